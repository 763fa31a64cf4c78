"""The PR's one living summary comment: found by its marker, edited in place, never a second.

What it shows costs no model tokens — it is built from GitHub (the PR's files, the bot's
review threads and their state) and the session log (cost, cache hits): a walkthrough (one line
per changed file, or per directory on a large PR), the findings with severity and status
(open, fixed, dismissed), the head last reviewed or "reviewing <sha>…" while a review runs, and
how to talk to the bot. Exactly once: before creating it, the PR's comments are searched for the
marker, so a crash after the create edits the same comment next time. Only the bot's own comment
is its summary (``core/triggers.py``): another account's comment holding the marker is never
edited, and only the bot's own threads are findings.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..core.sanitizer import redact_secrets, sanitize_line
from ..core.severity import headline
from ..core.text_cache import short_text_cache
from ..core.triggers import BotIdentity, Trigger, is_summary, marks_fixed_in, summary_marker
from ..github.client import GitHubClient
from ..github.models import IssueComment, PullFile, ReviewComment
from ..github.threads import ThreadState

log = logging.getLogger(__name__)

WALKTHROUGH_FILES = 40   # more changed files than this: one line per directory
FINDINGS_SHOWN = 100
STATUS_ICON = {"open": "🔴 open", "fixed": "✅ fixed", "dismissed": "⚪ dismissed"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int | None
    severity: str | None
    status: str          # open | fixed | dismissed
    text: str            # the finding's first line
    url: str = ""
    side: str | None = None          # LEFT: a removed (old) line
    start_line: int | None = None    # a range's first line
    # Listed in a review body instead of inline (budget, cap, min_severity, a file-level
    # comment): it has no thread, so it stays open.
    listed: bool = False

    @property
    def where(self) -> str:
        if not self.line:
            return self.path
        lines = (f"{self.start_line}–{self.line}" if self.start_line
                 and self.start_line != self.line else str(self.line))
        return f"{self.path}:{lines}" + (" (LEFT, old code)" if self.side == "LEFT" else "")


# Why a review waits while its account is paused, in words for the PR's readers: never the
# provider's or GitHub's own error text (it can name keys, quotas or internal hosts).
WAIT_REASONS = {
    "model": "the model provider rejected the bot's API key",
    "rate_limit": "GitHub is rate limiting the bot",
    "github": "GitHub rejected the bot's token",
}


@dataclass(frozen=True)
class Waiting:
    """A review that cannot run now because its account is paused (``work/pause.py``)."""

    head: str
    kind: str            # the pause: model | rate_limit | github
    until: datetime      # the next try


@dataclass
class Summary:
    files: Sequence[PullFile] = ()
    findings: list[Finding] = field(default_factory=list)
    reviewing: str | None = None        # head being reviewed right now
    waiting: Waiting | None = None      # or the review that waits for a paused account
    last_reviewed: str | None = None
    reviews: int = 0
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    cache_read_tokens: int = 0
    # The second look's section (``pr_output/second_look.py``): dropped findings, its cost.
    second_look: str = ""


def _walkthrough(files: Sequence[PullFile]) -> list[str]:
    if len(files) <= WALKTHROUGH_FILES:
        return [f"- `{sanitize_line(f.filename, 200)}` — {f.status} (+{f.additions}/"
                f"-{f.deletions})" for f in files]
    groups: dict[str, list[PullFile]] = defaultdict(list)
    for f in files:
        groups[f.filename.rsplit("/", 1)[0] + "/" if "/" in f.filename else "(root)"].append(f)
    return [f"- `{sanitize_line(d, 200)}` — {len(fs)} files (+{sum(f.additions for f in fs)}/"
            f"-{sum(f.deletions for f in fs)})" for d, fs in sorted(groups.items())]


def _cell(text: str) -> str:
    # GitHub renders HTML here: a finding's words ("<!-- TODO", "</table>") are entities, so
    # they cannot hide or break the rest of the comment.
    return (redact_secrets(text).replace("|", "\\|").replace("\n", " ")
            .replace("<", "&lt;").replace(">", "&gt;"))


@functools.lru_cache(maxsize=4096)
def _finding_row(f: Finding) -> str:
    # A pure function of the finding: a PR's summary is rendered twice per review with the
    # same findings (up to FINDINGS_SHOWN rows), so each row is escaped once.
    where = f"[`{_cell(f.where)}`]({f.url})" if f.url.startswith(("https://", "http://")) \
        else f"`{_cell(f.where)}`"
    status = STATUS_ICON[f.status] + (" (in the review body)" if f.listed else "")
    return f"| {where} | {f.severity or '—'} | {status} | {_cell(f.text)[:160]} |"


def render(s: Summary) -> str:
    head = ["## dsh-github-reviewer summary", ""]
    if s.waiting:
        w = s.waiting
        until = w.until.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        head.append(f"⏸️ **The review of `{w.head[:12]}` waits:** "
                    f"{WAIT_REASONS.get(w.kind, 'the bot is paused')}. It is tried again at "
                    f"{until} (sooner once the bot's operator fixes it); nothing is lost "
                    "meanwhile." + (f" (Last reviewed: `{s.last_reviewed[:12]}`.)"
                                    if s.last_reviewed else ""))
    elif s.reviewing:
        head.append(f"⏳ **Reviewing `{s.reviewing[:12]}`…**"
                    + (f" (last reviewed: `{s.last_reviewed[:12]}`)" if s.last_reviewed
                       else ""))
    elif s.last_reviewed:
        head.append(f"Head last reviewed: `{s.last_reviewed[:12]}` ({s.reviews} review"
                    f"{'' if s.reviews == 1 else 's'} so far)")
    else:
        head.append("Not reviewed yet.")
    parts = ["\n".join(head)]
    if s.files:
        parts.append(f"### Walkthrough ({len(s.files)} file{'' if len(s.files) == 1 else 's'})"
                     "\n\n" + "\n".join(_walkthrough(s.files)))
    if s.findings:
        by_status = Counter(f.status for f in s.findings)
        counts = {k: by_status[k] for k in STATUS_ICON}
        rows = ["| Where | Severity | Status | Finding |", "|---|---|---|---|"]
        rows += [_finding_row(f) for f in s.findings[:FINDINGS_SHOWN]]
        more = len(s.findings) - FINDINGS_SHOWN
        listed = sum(1 for f in s.findings if f.listed)
        open_ = f"{counts['open']} open" + (f" ({listed} of them listed in a review body)"
                                            if listed else "")
        parts.append(f"### Findings ({open_}, {counts['fixed']} fixed, "
                     f"{counts['dismissed']} dismissed)\n\n" + "\n".join(rows)
                     + (f"\n\n…and {more} more." if more > 0 else ""))
    else:
        parts.append("### Findings\n\nNone so far.")
    if s.prompt_tokens:
        hit = 100.0 * s.cache_read_tokens / s.prompt_tokens
        parts.append(f"Cost of this PR's reviews and answers: ${s.cost_usd:.4f} · prompt "
                     f"cache hit {hit:.0f} %")
    if s.second_look:
        parts.append(s.second_look)
    parts.append("Comment `/review` to review the current head again, or `/bot <question>` "
                 "to ask about this pull request (on a review thread, about that finding).")
    parts.append(summary_marker())
    return "\n\n".join(parts)


def findings_of(comments: Sequence[ReviewComment], review_ids: set[int],
                states: dict[int, ThreadState], me: BotIdentity,
                voted_down: Collection[int] = ()) -> list[Finding]:
    """The bot's inline findings (roots of its reviews' threads) with their status: fixed
    when the bot resolved the thread after a push fixed it (its "Fixed in" reply) and it stayed
    resolved; dismissed when people resolved it otherwise or voted it down; else open.
    ``voted_down``: the roots with a 👎 that counts (``github/votes.py``: from an allowlisted
    person, not the PR's author) — the roll-up's counts alone dismiss nothing. Severity is
    read from the comment's first token."""
    out = []
    # The roots the bot answered "Fixed in": one pass over the replies (linear in the PR's
    # comments, however many threads it has).
    fixed_in = {r.in_reply_to_id for r in comments
                if r.in_reply_to_id is not None and marks_fixed_in(r, me, r.in_reply_to_id)}
    for c in comments:
        if c.in_reply_to_id is not None or c.pull_request_review_id not in review_ids \
                or not me.wrote(c):
            continue
        sev, first = headline(c.body)
        state = states.get(c.id)
        resolved = bool(state and state.resolved)
        fixed_by_bot = c.id in fixed_in
        if resolved and fixed_by_bot:
            status = "fixed"
        elif resolved or c.id in voted_down:
            status = "dismissed"
        else:
            status = "open"
        out.append(Finding(path=c.path or "", line=c.line, severity=sev, status=status,
                           text=first, url=c.html_url, side=c.side,
                           start_line=c.start_line))
    return out


@dataclass(frozen=True)
class Drafted:
    """One finding the model drafted in a review turn (its accepted tool call's arguments,
    from the session log), and the review turn's trigger."""

    trigger: Trigger
    path: str
    body: str
    severity: str | None
    line: int | None = None
    side: str | None = None
    start_line: int | None = None


def listed_findings(drafted: Sequence[Drafted], reviews: dict[Trigger, str],
                    comments: Sequence[ReviewComment], review_ids: set[int]) -> list[Finding]:
    """The drafted findings of posted reviews that are not inline: listed in the review body
    (or left out of it for its size, which the body says). ``reviews``: trigger -> the posted
    review's URL. Matched to the bot's inline comments by place (the line they were posted
    at, which stays when a push outdates them) and text, so each finding shows once."""
    seen = {(c.path, c.original_line or c.line, c.side or "RIGHT",
             headline(c.body)[1])
            for c in comments
            if c.in_reply_to_id is None and c.pull_request_review_id in review_ids}
    out = []
    for d in drafted:
        if d.trigger not in reviews:
            continue   # that turn's review is not on GitHub: nothing of it was reported
        text = _drafted_first_line(d.body)
        ident = (d.path, d.line, d.side or "RIGHT", text)
        if ident in seen:
            continue
        seen.add(ident)
        out.append(Finding(path=d.path, line=d.line, severity=d.severity, status="open",
                           text=text, url=reviews[d.trigger], side=d.side,
                           start_line=d.start_line, listed=True))
    return out


@short_text_cache(max_chars=4000)
def _drafted_first_line(body: str) -> str:
    # A PR's drafted findings are all listed again at every summary update.
    return redact_secrets(body).strip().split("\n", 1)[0]


async def upsert(client: GitHubClient, owner: str, repo: str, number: int,
                 body: str, me: BotIdentity) -> IssueComment:
    """Edit the bot's summary comment in place, or create it when the bot has none."""
    existing = [c for c in await client.list_issue_comments(owner, repo, number)
                if is_summary(c, me)]
    if existing:
        if existing[0].body == body:
            return existing[0]
        return await client.edit_issue_comment(owner, repo, existing[0].id, body)
    return await client.post_issue_comment(owner, repo, number, body)
