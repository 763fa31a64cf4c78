"""What a review turn is given besides the PR's metadata: a prepared diff on the
first review, only what changed on a re-review, and people's feedback on the bot's threads.

The cost of a re-review should follow the push, not the PR: after a push the user message
carries the diff between the last reviewed head and the new one (the compare API, a conditional
request), restricted to the PR's files — a merge of the base branch into the PR brings in
other people's files, which are not under review — plus the new commits' messages. When the
old head is no longer an ancestor (force-push, rebase), the three-dot comparison shows the
changes since the merge base instead of the difference between the heads, so the two one-sided
comparisons are combined into the files whose content differs between the heads, and their
current PR diff is given with a note saying so.

Whether a turn is a re-review is decided by the conversation, not only by the record: an
interdiff means nothing to a model that has not seen the earlier review (a lost session, or a
crash right after the post), so that model gets the whole diff and the list of the bot's
earlier findings on the PR. What earlier turns told the model is read from their turn meta
(``told.py``), never from their text. A retry after a turn that ended without a submit refers
to the material that turn was given instead of sending it again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..config import ReviewSettings
from ..core.sanitizer import redact_secrets, sanitize, sanitize_line
from ..core.severity import headline
from ..core.triggers import BotIdentity, marks_fixed_in
from ..github import votes
from ..github.client import GitHubClient
from ..github.errors import GitHubError, NotFound, RateLimited
from ..github.models import Comparison, PullFile, PullRequest, Review, ReviewComment
from .diff_prep import exclude_patterns, excluded, is_binary, prepare
from .feedback import (
    ThreadNews,
    ThreadState,
    bot_reviews,
    render,
    thread_news,
    thread_states,
    told_facts,
)
from .told import Conversation, ThreadPlace

log = logging.getLogger(__name__)

FILES_PAGE_CAP = 30  # GitHub lists at most 3,000 files of a PR
COMMITS_SHOWN = 20
COMMIT_MESSAGE_LIMIT = 500


@dataclass
class ReviewInput:
    """The per-turn material; ``kind`` is first | again | base_changed | full | push |
    force_push | unchanged | retry | unavailable."""

    kind: str
    diff: str = ""
    commits: list[str] = field(default_factory=list)
    more_commits: int = 0
    feedback: str = ""
    note: str = ""
    files: list[PullFile] | None = None  # the PR's files, reused by the guard
    previous_head: str | None = None  # the last reviewed head this material starts from
    findings: list[str] = field(default_factory=list)  # the bot's earlier findings (again)
    told_facts: list[str] = field(default_factory=list)  # feedback facts, for the turn meta
    told_threads: dict[str, str] = field(default_factory=dict)  # resolutions, likewise
    # The bot's threads still open (root id -> (path:line, first line)): those a re-review
    # may name as fixed (``fixedThreads``).
    open_threads: dict[int, tuple[str, str]] = field(default_factory=dict)
    # Where each thread named above stands (open ones and those with feedback), for the turn
    # meta: the web UI pairs thread ids with posted findings by these.
    places: dict[str, ThreadPlace] = field(default_factory=dict)
    # A push whose commits change none of the PR's files that are reviewed (only files outside
    # the PR, as a merge of the base branch brings in, or only ``exclude``d ones).
    no_code: bool = False
    # The resolution state of the bot's threads as read for this input (root comment id ->
    # state; None: not read). The summary after the post starts from it instead of asking
    # GraphQL again (``work/procedure.py``).
    thread_states: dict[int, ThreadState] | None = None

    @property
    def whole_diff(self) -> bool:
        return self.kind in ("first", "again", "base_changed", "full") and bool(self.diff)

    @property
    def nothing_new(self) -> bool:
        """No code to look at that the conversation has not seen: the head is unchanged, or
        the push changed no reviewed file."""
        return self.kind == "unchanged" or self.no_code


SIZES_PER_QUERY = 50


async def blob_sizes(client: GitHubClient, owner: str, repo: str, sha: str,
                     paths: Sequence[str]) -> dict[str, int]:
    """Byte sizes of files at ``sha`` in one GraphQL query (no content is downloaded); empty
    and logged when unavailable — the summary then names the files without sizes."""
    paths = list(paths)[:SIZES_PER_QUERY]
    if not paths:
        return {}
    names = ", ".join(f"$e{i}: String!" for i in range(len(paths)))
    fields = " ".join(f"f{i}: object(expression: $e{i}) {{ ... on Blob {{ byteSize }} }}"
                      for i in range(len(paths)))
    query = (f"query($owner: String!, $name: String!, {names}) {{ repository(owner: $owner, "
             f"name: $name) {{ {fields} }} }}")
    variables: dict[str, str] = {"owner": owner, "name": repo}
    variables.update({f"e{i}": f"{sha}:{p}" for i, p in enumerate(paths)})
    try:
        data = (await client.graphql(query, variables))["repository"]
        return {p: int(data[f"f{i}"]["byteSize"]) for i, p in enumerate(paths)
                if isinstance(data.get(f"f{i}"), dict) and "byteSize" in data[f"f{i}"]}
    except (GitHubError, KeyError, TypeError, ValueError) as exc:
        log.warning("%s/%s: binary file sizes unavailable: %s", owner, repo, exc)
        return {}


def _base_branch_changed(base_ref: str, conv: Conversation) -> bool:
    """Whether the base branch the model was last told is another one."""
    told = conv.base_ref()
    return told is not None and told != base_ref


def _material_above(pr: PullRequest, previous_head: str | None, conv: Conversation) -> bool:
    """A turn still in the conversation was given this very material (same head, base and
    starting point) and no review came of it: a retry can point at it."""
    if previous_head == pr.head.sha:
        return False
    return any(t is not None and t.head == pr.head.sha and t.base_ref == pr.base.ref
               and t.previous_head == previous_head
               and t.kind in ("first", "again", "base_changed", "push", "force_push")
               for t, _ in conv.turns)


def _commit_lines(cmp: Comparison) -> tuple[list[str], int]:
    out = []
    for c in cmp.commits[-COMMITS_SHOWN:]:
        message = sanitize(c.commit.message).strip()
        if len(message) > COMMIT_MESSAGE_LIMIT:
            message = message[:COMMIT_MESSAGE_LIMIT] + " […]"
        out.append(f"{c.sha[:12]} {message}".replace("\n", "\n    "))
    return out, max(0, cmp.total_commits - len(out))


def _paths(files: Sequence[PullFile]) -> set[str]:
    """Every path the entries name, previous names of renamed files included."""
    return {f.filename for f in files} | {f.previous_filename for f in files
                                          if f.previous_filename}


def _touches(f: PullFile, paths: set[str]) -> bool:
    return f.filename in paths or f.previous_filename in paths


async def _reviewed_paths(client: GitHubClient, owner: str, repo: str, base_sha: str,
                          previous_head: str) -> set[str]:
    """The PR's files at the previously reviewed head; empty (and logged) when GitHub cannot
    compare them (a base branch rewritten since): the interdiff is still worth giving."""
    try:
        return _paths((await client.compare(owner, repo, base_sha, previous_head)).files)
    except RateLimited:
        raise
    except GitHubError as exc:
        log.warning("%s/%s: the files of the reviewed head %s are unavailable: %s", owner,
                    repo, previous_head[:12], exc)
        return set()


def _key(f: PullFile) -> str | None:
    return None if f.status == "removed" else f.sha


async def _between_heads(client: GitHubClient, owner: str, repo: str, old: str, new: str,
                         forward: Comparison) -> set[str]:
    """Paths whose content differs between two heads that diverged.

    ``old...new`` lists the new side's changes since the merge base and ``new...old`` the old
    side's; a path in only one of them changed on that side only, a path in both differs
    when its blobs differ.
    """
    backward = await client.compare(owner, repo, new, old)
    new_side = {f.filename: _key(f) for f in forward.files}
    old_side = {f.filename: _key(f) for f in backward.files}
    return {p for p in new_side.keys() | old_side.keys()
            if p not in new_side or p not in old_side or new_side[p] != old_side[p]}


async def prepare_review(client: GitHubClient, pr: PullRequest, settings: ReviewSettings,
                         previous_head: str | None,
                         history: Conversation | Sequence[str], me: BotIdentity, *,
                         full: bool = False) -> ReviewInput:
    """``full``: ``/review full`` — the PR's whole prepared diff even when the conversation
    holds the last review (the earlier findings still count as told)."""
    conv = Conversation.of(history)
    base = pr.base.repo
    assert base is not None
    owner, repo, number = base.owner.login, base.name, pr.number
    patterns = exclude_patterns(settings.exclude, settings.exclude_builtin)
    budget = settings.max_diff_kb * 1024
    try:
        # The runner's trigger check listed the reviews just before: a free 304 here.
        mine = bot_reviews(await client.list_reviews(owner, repo, number), me)
        if previous_head is None and mine and conv.reviewed:
            # The conversation holds a review but the caller lost its head (a reset record):
            # the bot's last review on GitHub says which head it was.
            previous_head = next((r.commit_id for r in reversed(mine) if r.commit_id), None)
        files = await client.list_pull_files(owner, repo, number, max_pages=FILES_PAGE_CAP)
        if full and previous_head and conv.reviewed:
            result = ReviewInput("full", diff=await _shown(client, pr, files, patterns,
                                                             budget))
        else:
            result = await _diff_part(client, pr, files, previous_head, conv, patterns,
                                      budget)
        result.files, result.previous_head = files, previous_head
    except RateLimited:
        raise  # the turn fails and the account backs off; the tools would fail too
    except GitHubError as exc:
        log.warning("%s/%s#%d: cannot prepare the diff: %s", owner, repo, number, exc)
        return ReviewInput("unavailable", note=(
            f"The prepared diff could not be loaded ({redact_secrets(str(exc))[:200]}); read "
            "the changes with pull_request_read method=get_diff or get_files."))
    try:
        comments = await client.list_review_comments(owner, repo, number) if mine else []
        news, states = await _feedback(client, owner, repo, number, mine, comments, conv, me,
                                       pr.user.login,
                                       settings.command_author_associations)
        result.thread_states = states
        result.open_threads = open_threads(comments, mine, states, me)
        result.feedback = render(news)
        result.told_facts, result.told_threads = told_facts(news)
        result.places = thread_places(comments, {*result.open_threads,
                                                 *(n.root.id for n in news)})
        if result.kind == "again":
            result.findings = earlier_findings(comments, mine, me)
    except RateLimited:
        raise
    except GitHubError as exc:
        log.warning("%s/%s#%d: cannot read feedback on the bot's threads: %s", owner, repo,
                    number, exc)
    return result


async def _shown(client: GitHubClient, pr: PullRequest, chosen: list[PullFile],
                 patterns: list[str], budget: int) -> str:
    base = pr.base.repo
    assert base is not None
    binary = [f.filename for f in chosen if is_binary(f) and not excluded(f.filename, patterns)]
    sizes = await blob_sizes(client, base.owner.login, base.name, pr.head.sha, binary)
    return prepare(chosen, patterns, budget, sizes).render()


async def _diff_part(client: GitHubClient, pr: PullRequest, files: list[PullFile],
                     previous_head: str | None, conv: Conversation, patterns: list[str],
                     budget: int) -> ReviewInput:
    base = pr.base.repo
    assert base is not None
    owner, repo = base.owner.login, base.name

    async def shown(chosen: list[PullFile]) -> str:
        return await _shown(client, pr, chosen, patterns, budget)

    if _material_above(pr, previous_head, conv):
        # The last attempt was given this material and ended without a review (no submit):
        # sending it again would only bill it again.
        return ReviewInput("retry")
    if not previous_head:
        return ReviewInput("first", diff=await shown(files))
    if not conv.reviewed:
        # A lost session, or the earlier review was compacted into a summary: the model
        # no longer has the code it reviewed, so an interdiff alone would mean little.
        return ReviewInput("again", diff=await shown(files))
    if _base_branch_changed(pr.base.ref, conv):
        # Retargeted to another base branch: the PR's diff is a different one now, whatever
        # the head did, so the interdiff (or "unchanged") would hide most of it.
        return ReviewInput("base_changed", diff=await shown(files))
    if previous_head == pr.head.sha:
        return ReviewInput("unchanged")
    in_pr = _paths(files)
    try:
        cmp = await client.compare(owner, repo, previous_head, pr.head.sha)
    except NotFound:
        return ReviewInput("force_push", diff=await shown(files), note=(
            f"The previously reviewed head {previous_head} cannot be compared with the new "
            "head on GitHub (it is gone, or the histories are unrelated), so no interdiff "
            "exists; below is the PR's whole prepared diff."))
    commits, more = _commit_lines(cmp)
    if cmp.status == "identical":
        return ReviewInput("unchanged")
    if cmp.status == "ahead":
        rest = [f for f in cmp.files if not _touches(f, in_pr)]
        if rest:
            # A push that deletes a file the PR added, or reverts a PR change, takes that file
            # out of the PR's file list, yet it was reviewed: the previous head's PR files
            # tell it from a file a merge of the base branch brought in (one more comparison,
            # only in this case).
            in_pr |= await _reviewed_paths(client, owner, repo, pr.base.sha, previous_head)
        changed = [f for f in cmp.files if _touches(f, in_pr)]
        outside = len(cmp.files) - len(changed)
        note = (f"{outside} file(s) changed by the new commits are not part of this PR (for "
                "example a merge of the base branch) and are not shown." if outside else "")
        return ReviewInput("push", diff=await shown(changed),
                           no_code=all(excluded(f.filename, patterns) and excluded(
                               f.previous_filename or f.filename, patterns) for f in changed),
                           commits=commits, more_commits=more, note=note)
    differs = await _between_heads(client, owner, repo, previous_head, pr.head.sha, cmp)
    chosen = [f for f in files if _touches(f, differs)]
    dropped: list[str] = []
    if differs - in_pr:
        # Paths that differ but are not in the PR now: the base's changes a rebase brought
        # in, or files the PR no longer changes — those the model reviewed must be named.
        reviewed = await _reviewed_paths(client, owner, repo, pr.base.sha, previous_head)
        dropped = sorted((differs - in_pr) & reviewed)
    gone = (f" No longer changed by the PR (deleted or back to the base's content): "
            f"{', '.join(sanitize_line(p, 200) for p in dropped[:40])}." if dropped else "")
    return ReviewInput("force_push", diff=await shown(chosen),
                       commits=commits, more_commits=more, note=(
        f"The previously reviewed head {previous_head} is not an ancestor of the new head "
        "(force-push or rebase), so there is no interdiff. Below are the PR's current diffs "
        f"of the {len(chosen)} file(s) whose content changed between the two heads; files "
        f"not listed are unchanged since your last review.{gone}"))


async def _feedback(client: GitHubClient, owner: str, repo: str, number: int,
                    mine: list[Review], comments: list[ReviewComment],
                    conv: Conversation, me: BotIdentity, pr_author: str, allowed: list[str]
                    ) -> tuple[list[ThreadNews], dict[int, ThreadState]]:
    if not mine:
        return [], {}
    ids = {r.id for r in mine}
    has_threads = any(c.pull_request_review_id in ids and c.in_reply_to_id is None
                      for c in comments)
    states = await thread_states(client, owner, repo, number) if has_threads else {}
    roots = [c for c in comments if c.in_reply_to_id is None and c.pull_request_review_id in ids
             and me.wrote(c)]
    down = await votes.dismissed(client, owner, repo, number, roots, comments, pr_author,
                                 allowed)
    return thread_news(comments, mine, states, conv, me, down), states


OPEN_THREADS_SHOWN = 50


def open_threads(comments: Sequence[ReviewComment], mine: Sequence[Review],
                 states: dict[int, ThreadState], me: BotIdentity
                 ) -> dict[int, tuple[str, str]]:
    """The bot's inline threads that are unresolved (state known) and that the bot never
    resolved before (a person who unresolved one keeps it open)."""
    ids = {r.id for r in mine if me.wrote(r)}
    fixed = fixed_before(comments, me)
    out: dict[int, tuple[str, str]] = {}
    for c in comments:
        state = states.get(c.id)
        if c.pull_request_review_id not in ids or c.in_reply_to_id is not None \
                or state is None or state.resolved or c.id in fixed or not me.wrote(c):
            continue
        where = sanitize_line(c.path or "", 200) + (f":{c.line}" if c.line else "")
        first = sanitize_line(headline(c.body)[1], 160)
        out[c.id] = (where, first)
        if len(out) >= OPEN_THREADS_SHOWN:
            break
    return out


def fixed_before(comments: Sequence[ReviewComment], me: BotIdentity) -> set[int]:
    """The root ids of threads holding the bot's own "Fixed in" reply: it resolved them once
    (one pass over the comments, not one per thread)."""
    return {c.in_reply_to_id for c in comments
            if c.in_reply_to_id is not None and marks_fixed_in(c, me, c.in_reply_to_id)}


def earlier_findings(comments: Sequence[ReviewComment], mine: Sequence[Review],
                     me: BotIdentity) -> list[str]:
    """The bot's inline findings on the PR, one line each: what a model that no longer has
    its earlier review (a lost session, a crash right after the post) must not repeat."""
    ids = {r.id for r in mine if me.wrote(r)}
    out = []
    for c in comments:
        if c.pull_request_review_id in ids and c.in_reply_to_id is None and me.wrote(c):
            where = sanitize_line(c.path or "", 200) + (f":{c.line}" if c.line else "")
            first = sanitize_line((c.body or "").strip().split("\n", 1)[0], 160)
            out.append(f"{where}: {first}")
    return out


def thread_places(comments: Sequence[ReviewComment], ids: set[int]) -> dict[str, ThreadPlace]:
    """The place of each of these root comments: path, the line it was posted on and its first
    line without the severity label (as data, so a path with spaces is still one path)."""
    out: dict[str, ThreadPlace] = {}
    for c in comments:
        if c.id in ids and c.in_reply_to_id is None:
            first = headline(c.body)[1]
            out[str(c.id)] = ThreadPlace(path=c.path or "", line=c.original_line or c.line,
                                         first=first[:160])
    return out
