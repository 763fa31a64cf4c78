"""The ``/bot`` commands the bot answers itself, without a model turn: ``help``, ``pause``,
``resume``, ``learn``, ``lessons``, ``forget`` — and replies on its threads that may teach a
lesson (``teach``).

Each answer is one reply carrying the command's reply marker, posted once (``post_reply``
checks for the marker). What a command changes is idempotent per comment: ``pause`` and
``resume`` were applied by the inbox when it recorded the command, a lesson is keyed by the
comment that taught it, and a forgotten lesson remembers the comment that removed it.
"""

from __future__ import annotations

import logging
import re

from ..core.commands import HELP_TEXT
from ..core.sanitizer import sanitize_line
from ..core.session_key import PrRef
from ..github.models import ReviewComment
from ..pr_output.replies import post_reply
from ..turn.feedback import bot_reviews
from .context import WorkContext
from .lessons import (
    LESSONS_GIVEN,
    REMOVED_BY_LIMIT,
    REMOVED_ON_WEB,
    Lesson,
    LessonFinding,
    LessonSource,
    LessonStore,
)
from .records import Command

log = logging.getLogger(__name__)

# A reply that says the finding is no defect: "this is intended because …" and its kin. Only
# replies of people allowed to command the bot are read, and only on the bot's own findings.
DISMISSAL = re.compile(
    r"\b(intended|intentional(ly)?|on purpose|by design|deliberate(ly)?|false positive|"
    r"(not|isn['’]?t) an? (bug|issue|problem|defect)|expected behaviou?r|"
    r"works as (intended|expected)|won'?t fix|wontfix|as designed)\b", re.I)
# A dismissal word counts only when it is said, not asked or denied: not in a sentence that
# ends with "?", and with no negation among the few words before it ("this is not intended",
# "definitely not a false positive" agree with the finding).
_NEGATION = re.compile(r"\b(not|no|never|hardly|nor)\b|n't\b|n’t\b", re.I)
_SENTENCE_END = re.compile(r"[.!?\n]")
_NEGATION_WINDOW = 3   # words before the dismissal word
_NUMBER = re.compile(r"^#?([1-9][0-9]{0,8})$")
# A reply read before its author's 👎 on the finding (a webhook delivers the reply at once):
# read again this many times, this long apart, before it is taken as teaching nothing.
TEACH_RECHECKS = 2
TEACH_RECHECK_S = 300.0
# ``/bot lessons`` in one comment: GitHub refuses a body over 65,536 characters (a full book
# is 200 lessons of up to 600), so the listing keeps this much room for its lines.
LISTING_CHARS = 60_000


def dismisses(text: str) -> bool:
    """The reply says the finding is no defect (``DISMISSAL``), as a statement."""
    for m in DISMISSAL.finditer(text):
        before = text[:m.start()]
        start = max((x.end() for x in _SENTENCE_END.finditer(before)), default=0)
        end = _SENTENCE_END.search(text, m.end())
        if end is not None and end.group() == "?":
            continue
        window = " ".join(before[start:].split()[-_NEGATION_WINDOW:])
        if not _NEGATION.search(window):
            return True
    return False


class NotYet(Exception):
    """A reply that teaches nothing yet: no 👎 from its author (so far), no dismissal."""


def lessons_of(ctx: WorkContext) -> LessonStore:
    return LessonStore(ctx.store.domain, ctx.acct.key)


async def answer(ctx: WorkContext, ref: PrRef, cmd: Command) -> None:
    """Run a built-in command and post its reply (nothing is posted for a thread reply that
    teaches nothing)."""
    text = await _text(ctx, ref, cmd)
    if text is None:
        return
    posted = await post_reply(ctx.client, ref.owner, ref.name, ref.number, cmd, text,
                              ctx.acct.identity)
    log.info("%s: /bot %s %d answered%s", ref, cmd.action, cmd.comment_id,
             "" if posted else " (reply was already posted)")


async def _text(ctx: WorkContext, ref: PrRef, cmd: Command) -> str | None:
    repo = ref.repo
    if cmd.action == "help":
        return HELP_TEXT
    if cmd.action == "pause":
        return (f"Automatic reviews of this pull request are paused (by @{cmd.author}). "
                "Commands are still answered and `/review` still reviews; `/bot resume` "
                "turns automatic reviews back on.")
    if cmd.action == "resume":
        return ("Automatic reviews of this pull request are on again; the current head is "
                "reviewed if it has not been yet.")
    if cmd.action == "lessons":
        return listing(repo, await lessons_of(ctx).active(repo))
    if cmd.action == "forget":
        return await _forget(ctx, repo, cmd)
    if cmd.action == "learn":
        return await _learn(ctx, ref, cmd)
    if cmd.action == "teach":
        return await _teach(ctx, ref, cmd)
    raise ValueError(f"not a built-in command: {cmd.action!r}")


def removed_by(lesson: Lesson) -> str:
    """Who removed a lesson, in words: a person (as code: no notification), the web UI, or
    the limit of kept lessons (``work/lessons.py`` writes those two in parentheses)."""
    who = lesson.removed_by or ""
    if who == REMOVED_ON_WEB:
        return "on the web UI"
    if who == REMOVED_BY_LIMIT:
        return "the oldest, when more were taught than a repository keeps"
    return f"by `@{who}`"


def _no_ping(text: str) -> str:
    """Text quoted in a reply without its mentions: GitHub notifies every ``@login`` and
    ``@org/team`` in a comment, and a listing is posted again each time it is asked (a word
    joiner after the ``@`` keeps the words and drops the notification)."""
    return text.replace("@", "@\u2060")


def listing(repo: str, lessons: list[Lesson]) -> str:
    if not lessons:
        return (f"No lessons for {repo} yet. Teach one with `/bot learn <lesson>`, or with a "
                "👎 on a finding plus a reply saying why.")
    shown: list[str] = []
    room = LISTING_CHARS
    for x in reversed(lessons):   # the newest first, while they fit in one comment
        where = ""
        if x.finding is not None:
            spot = x.finding.path + (f":{x.finding.line}" if x.finding.line else "")
            where = f", on a finding at `{sanitize_line(spot, 200)}` in #{x.finding.number}"
        line = (f"{x.id}. {_no_ping(x.text)} — taught by `@{x.taught_by}` "
                f"{x.taught_at.date().isoformat()}{where}")
        if len(line) + 1 > room:
            break
        room -= len(line) + 1
        shown.append(line)
    given = ("given to every review of its pull requests" if len(lessons) <= LESSONS_GIVEN
             else f"the newest {LESSONS_GIVEN} are given to every review of its pull requests")
    lines = [f"Lessons for {repo} ({given}):", "",
             *reversed(shown)]
    if len(shown) < len(lessons):
        lines += ["", f"…and {len(lessons) - len(shown)} older lesson(s) not shown here "
                  "(a comment holds 65,536 characters); the web UI's Lessons page lists "
                  "them all."]
    lines += ["", "`/bot forget <n>` removes lesson n."]
    return "\n".join(lines)


async def _forget(ctx: WorkContext, repo: str, cmd: Command) -> str:
    m = _NUMBER.match(cmd.message.strip())
    if m is None:
        return ("`/bot forget` needs the number of a lesson, e.g. `/bot forget 2`; "
                "`/bot lessons` lists them.")
    lesson_id = int(m.group(1))
    lesson, removed = await lessons_of(ctx).forget(repo, lesson_id, by=cmd.author,
                                                   at=ctx.clock(), comment_id=cmd.comment_id)
    if lesson is None:
        return f"There is no lesson {lesson_id} for {repo}; `/bot lessons` lists them."
    if not removed:
        return f"Lesson {lesson_id} was already removed ({removed_by(lesson)})."
    log.info("%s: lesson %d forgotten by %s", repo, lesson_id, cmd.author)
    return f"Forgot lesson {lesson_id}: {_no_ping(lesson.text)}"


async def _finding(ctx: WorkContext, ref: PrRef, root_id: int | None
                   ) -> tuple[ReviewComment | None, LessonFinding | None]:
    """The bot's finding at the root of a review thread, or (None, None) when the thread is
    not one of the bot's findings."""
    if root_id is None:
        return None, None
    owner, name, number = ref.owner, ref.name, ref.number
    client = ctx.client
    comments = await client.list_review_comments(owner, name, number)
    root = next((c for c in comments if c.id == root_id), None)
    if root is None or root.in_reply_to_id is not None:
        return None, None
    me = ctx.acct.identity
    mine = {r.id for r in bot_reviews(await client.list_reviews(owner, name, number), me)}
    if root.pull_request_review_id not in mine or not me.wrote(root):
        return None, None
    first = (root.body or "").strip().split("\n", 1)[0]
    return root, LessonFinding(comment_id=root.id, number=number, path=root.path or "",
                               line=root.line or root.original_line,
                               text=sanitize_line(first, 200), url=root.html_url)


def _taught(lesson: Lesson, repo: str) -> str:
    return (f"Noted as lesson {lesson.id} for {repo}: the next reviews of its pull requests "
            f"are told. `/bot lessons` lists the lessons, `/bot forget {lesson.id}` removes "
            "this one.")


async def _learn(ctx: WorkContext, ref: PrRef, cmd: Command) -> str:
    repo = ref.repo
    if not cmd.message.strip():
        return "`/bot learn` needs the lesson, e.g. `/bot learn we log with structlog, not print`."
    finding = None
    if cmd.source == "review":
        _, finding = await _finding(ctx, ref, cmd.thread_root)
    lesson = await lessons_of(ctx).teach(
        repo, text=cmd.message, source="command", taught_by=cmd.author,
        association=cmd.association, at=cmd.created_at, comment_id=cmd.comment_id,
        number=ref.number, finding=finding)
    if lesson is None:
        return "That lesson is empty once hidden characters are removed; nothing was stored."
    log.info("%s: lesson %d taught by %s (/bot learn)", repo, lesson.id, cmd.author)
    return _taught(lesson, repo)


async def _teach(ctx: WorkContext, ref: PrRef, cmd: Command) -> str | None:
    """A reply on a thread: a lesson when the thread is the bot's finding and the reply
    dismisses it — its author gave the finding a 👎, or the reply says it is intended."""
    root, finding = await _finding(ctx, ref, cmd.thread_root)
    if root is None:
        return None
    voted = await _voted_down(ctx, ref, root.id, cmd.author)
    source: LessonSource
    if voted:
        source = "vote"
    elif dismisses(cmd.message):
        source = "reply"
    elif cmd.rechecks < TEACH_RECHECKS:
        raise NotYet(f"reply {cmd.comment_id}: no 👎 from {cmd.author} on the finding yet")
    else:
        return None
    lesson = await lessons_of(ctx).teach(
        ref.repo, text=cmd.message, source=source, taught_by=cmd.author,
        association=cmd.association, at=cmd.created_at, comment_id=cmd.comment_id,
        number=ref.number, finding=finding)
    if lesson is None:
        return None
    log.info("%s: lesson %d taught by %s (%s on thread %d)", ref.repo, lesson.id, cmd.author,
             source, root.id)
    return _taught(lesson, ref.repo)


async def _voted_down(ctx: WorkContext, ref: PrRef, comment_id: int, login: str) -> bool:
    votes = await ctx.client.list_reactions(ref.owner, ref.name, comment_id, review_comment=True)
    return any(v.content == "-1" and v.user is not None
               and v.user.login.lower() == login.lower() for v in votes)
