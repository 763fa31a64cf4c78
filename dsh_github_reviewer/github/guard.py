"""The four guarded tools: the only way the model touches GitHub.

Every call runs the same pipeline: no active turn → error; chat turn + write tool → error;
validate and normalize (``guard_rules``; errors cost no budget); the turn's read or
posting budget (kept apart, ``FindingLimits``); the call (MCP for
reads, the local draft and one REST post for writes); the result capped by the harness.
The tools are stable objects in every PR's world; the per-turn scope lives in ``GuardTurn``,
registered by the runner for the duration of a turn and looked up by session id.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dsh_harness import Tool, ToolContext, ToolRejected, ToolText

from ..core.sanitizer import sanitize_code
from ..core.triggers import BotIdentity
from . import tool_specs
from .client import RATE_LIMIT_DEFAULT_S, GitHubClient
from .dialects import Dialect, DialectError, detect
from .diff import commentable_lines
from .errors import GitHubError
from .guard_rules import (
    SEVERITY_REFUSED,
    ChangedFiles,
    Rejected,
    Scope,
    check_comment,
    check_file,
    check_read,
    check_review_write,
)
from .mcp_host import McpConnection, McpError, McpRuntime
from .models import PullFile, Review
from .review_submit import Draft, DraftComment, FindingLimits, post_review

log = logging.getLogger(__name__)

CHANGED_FILES_PAGE_CAP = 30  # GitHub lists at most 3,000 files of a PR
READ_TOOLS = ("get_file_contents", "pull_request_read")
# Flows whose turns may only read: a /bot chat answers in text, a team persona reports to the
# coordinator (the single writer).
READ_ONLY_FLOWS = ("chat", "persona", "verify")


BUDGET_SPENT = ("read budget spent ({n} reads, review.max_read_calls): no more reads in "
                "this turn. Posting has a budget of its own and still works: if you have not "
                "yet, call pull_request_review_write method=create, add your findings with "
                "add_comment_to_pending_review, then pull_request_review_write "
                "method=submit_pending event=COMMENT now.")


class ToolFailed(ToolRejected):
    """The server or GitHub answered with an error; the model sees it as a tool error."""


# How github-mcp-server's tool errors name a GitHub rate limit (go-github's RateLimitError and
# AbuseRateLimitError texts, or the bare status).
RATE_LIMITED = re.compile(r"rate limit|\b429\b|abuse detection", re.IGNORECASE)
# go-github's RateLimitError ends with the primary limit's reset ("[rate reset in 1m05s]");
# its secondary-limit error carries no Retry-After, so that one waits GitHub's minimum.
RATE_RESET = re.compile(r"\[rate reset in (?:(\d+)m)?(\d+)s\]")


def mcp_rate_limit_wait(text: str) -> float:
    m = RATE_RESET.search(text)
    if m is None:
        return RATE_LIMIT_DEFAULT_S
    return 60.0 * int(m.group(1) or 0) + int(m.group(2))


@dataclass
class GuardTurn:
    """One turn's scope and state: what may be touched, the draft, what was posted."""

    scope: Scope
    client: GitHubClient
    runtime: McpRuntime
    token: str
    # Who the bot is: only its own review answering the trigger counts as already posted.
    me: BotIdentity
    connection: McpConnection | None = None
    dialect: Dialect | None = None
    changed: ChangedFiles | None = None
    changed_loaded: bool = False
    draft: Draft | None = None
    submitted: Review | None = None
    posted_now: bool = False
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # Which drafted findings go inline (review.min_severity / max_findings).
    limits: FindingLimits = field(default_factory=FindingLimits)
    # Reads and inline findings so far, each against its own budget (``limits``).
    reads: int = 0
    comments: int = 0
    # A budget ran out (reads refused, or findings listed instead of inline); a draft the
    # model never submitted is submitted by the bot (``submit_draft``).
    budget_spent: bool = False
    # Findings refused because their severity was missing or invalid (the model was told
    # how to resend them); the session log's tool results carry the same fact as their note.
    severity_refusals: int = 0
    # The bot's open threads on the PR (root comment id -> ("path:line", its first words)), as
    # the review message lists them: the ones submit_pending may name as fixed.
    fixable: dict[int, tuple[str, str]] = field(default_factory=dict)
    # Lines code adds to the review body (e.g. that the PR edits the files steering it).
    body_notes: list[str] = field(default_factory=list)
    # github-mcp-server reported a GitHub rate limit (429, primary or secondary limit).
    rate_limited: bool = False
    # The team's coordinator turn: code, not the model, has the last word on the verdict line
    # (fail closed), applied to the body right before it is posted.
    finalize_body: Callable[[str], str] | None = None
    # The second look (``reviewers/second_look.py``): submit_pending keeps the body here and
    # answers the model exactly as a post would; the runner posts after the verifier checked
    # the draft, so the review session's requests are the same with or without it.
    hold_post: bool = False
    held_body: str | None = None

    @property
    def writes_closed(self) -> bool:
        """The review was submitted (posted, or held for the second look)."""
        return self.submitted is not None or self.held_body is not None

    async def ensure_dialect(self) -> Dialect:
        if self.dialect is None:
            try:
                self.dialect = detect(await self.runtime.tools(self.token))
            except (McpError, DialectError) as exc:
                raise ToolFailed(f"github-mcp-server is unavailable: {exc}") from None
        return self.dialect

    async def call(self, tool: str, args: dict[str, Any]) -> str:
        if self.connection is None:
            try:
                self.connection = await self.runtime.connect(self.token)
            except McpError as exc:
                raise ToolFailed(f"github-mcp-server is unavailable: {exc}") from None
        wait = self.client.blocked_until - self.client.clock()
        if wait > 0:
            # The account honours a rate limit's wait: github-mcp-server (same token) too.
            raise ToolFailed(f"{tool} not called: GitHub rate limited this bot; no GitHub "
                             f"call for {wait:.0f} s more. Finish the turn now.")
        self.calls.append((tool, args))
        try:
            is_error, text = await self.connection.call(tool, args)
        except McpError as exc:
            raise ToolFailed(str(exc)) from None
        if is_error:
            if RATE_LIMITED.search(text):
                # GitHub refused the server's call for the rate limit (same token as ours):
                # the account makes no GitHub call until the limit's wait is over (the
                # server's text states it for the primary limit, else GitHub's minimum), the
                # turn fails and the account pauses instead of failing PRs.
                self.rate_limited = True
                self.client.block(mcp_rate_limit_wait(text))
            raise ToolFailed(f"{tool} failed: {sanitize_code(text)}")
        return sanitize_code(text)

    async def changed_files(self) -> ChangedFiles | None:
        """Loaded once per turn, not counted against the budget, never truncated."""
        if not self.changed_loaded:
            self.changed_loaded = True
            s = self.scope
            try:
                files = await self.client.list_pull_files(s.owner, s.repo, s.number,
                                                          max_pages=CHANGED_FILES_PAGE_CAP)
            except GitHubError as exc:
                log.warning("%s: cannot load changed files: %s", s.pr_label, exc)
                return None
            self.use_files(files)
        return self.changed

    def use_files(self, files: list[PullFile]) -> None:
        """The PR's files, already listed by the runner for the prepared diff: no second
        request for the same list."""
        self.changed_loaded = True
        self.changed = ChangedFiles(
            paths={f.filename for f in files},
            previous={f.previous_filename for f in files if f.previous_filename},
            lines={f.filename: commentable_lines(f.patch) for f in files})

    def read_budget(self) -> None:
        """One read against ``limits.read_calls``; refused (free) once it is spent."""
        if self.reads >= self.limits.read_calls:
            self.budget_spent = True
            raise Rejected(BUDGET_SPENT.format(n=self.limits.read_calls))
        self.reads += 1

    def comment_budget(self) -> bool:
        """One inline finding against ``limits.comment_calls``: False once it is spent (the
        finding is kept and listed in the review body)."""
        if self.comments >= self.limits.comment_calls:
            self.budget_spent = True
            return False
        self.comments += 1
        return True

    def start_draft(self) -> Draft:
        """The pending review at the PR's head (``create``; kept if one is started)."""
        if self.draft is None:
            self.draft = Draft(commit_id=self.scope.head_sha, limits=self.limits)
        return self.draft

    async def submit(self, body: str) -> Review:
        """Post the draft as this trigger's one review (once: an earlier post is reused)."""
        assert self.draft is not None
        s = self.scope
        if s.trigger is None:
            raise Rejected("this turn answers no review request: it cannot submit a review")
        if self.body_notes:
            body = body.rstrip() + "\n\n" + "\n\n".join(self.body_notes)
        body = self.finalize_body(body) if self.finalize_body else body
        review, posted = await post_review(self.client, s.owner, s.repo, s.number, self.draft,
                                           body, s.trigger, self.me)
        self.submitted, self.posted_now = review, posted
        return review

    async def submit_draft(self, why: str) -> Review | None:
        """A draft the model never submitted (budget spent, step limit): the bot submits it so
        no finding is lost, saying why. None when there is nothing drafted."""
        if self.submitted is not None or self.draft is None or not self.draft.comments:
            return None
        body = (f"The review turn ended before the reviewer submitted this review ({why}); "
                f"the bot posted the {len(self.draft.comments)} finding(s) it had drafted. "
                "Files it had not read yet were not reviewed; comment `/review` to run it "
                "again.")
        if self.hold_post:
            self.held_body = body   # checked by the second look before the runner posts it
            return None
        return await self.submit(body)

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()
            self.connection = None


class Guard:
    """The four tools of one account; per-turn state is registered by the runner."""

    def __init__(self) -> None:
        self.turns: dict[str, GuardTurn] = {}

    def begin(self, session_id: str, turn: GuardTurn) -> None:
        self.turns[session_id] = turn

    async def end(self, session_id: str) -> GuardTurn | None:
        turn = self.turns.pop(session_id, None)
        if turn is not None:
            await turn.close()
        return turn

    def read_tools(self) -> list[Tool]:
        """The read tools only: a team persona's world."""
        return [t for t in self.tools() if t.name in READ_TOOLS]

    def tools(self) -> list[Tool]:
        handlers = {"pull_request_read": self.pull_request_read,
                    "get_file_contents": self.get_file_contents,
                    "pull_request_review_write": self.pull_request_review_write,
                    "add_comment_to_pending_review": self.add_comment_to_pending_review}
        return [Tool(name=spec["name"], description=spec["description"],
                     parameters=spec["parameters"], handler=handlers[spec["name"]],
                     self_budgeted=True) for spec in tool_specs.ALL]

    def _turn(self, ctx: ToolContext, write: bool = False) -> GuardTurn:
        turn = self.turns.get(ctx.session_id)
        if turn is None:
            raise Rejected("no active review turn for this session; tools are unavailable")
        if write and turn.scope.flow in READ_ONLY_FLOWS:
            raise Rejected(f"write tools are disabled in {turn.scope.flow} turns; answer in "
                           "your reply text")
        return turn

    # -- reads --------------------------------------------------------------------------------

    async def pull_request_read(self, args: dict[str, Any], ctx: ToolContext) -> str:
        turn = self._turn(ctx)
        method, out = check_read(args, turn.scope)
        dialect = await turn.ensure_dialect()
        try:
            tool, server_args = dialect.pr_read(method, out)
        except DialectError as exc:
            raise Rejected(str(exc)) from None
        turn.read_budget()
        return await turn.call(tool, server_args)

    async def get_file_contents(self, args: dict[str, Any], ctx: ToolContext) -> str:
        turn = self._turn(ctx)
        out = check_file(args, turn.scope, await turn.changed_files())
        dialect = await turn.ensure_dialect()
        turn.read_budget()
        tool, server_args = dialect.file_read(out, turn.scope)
        return await turn.call(tool, server_args)

    # -- writes -------------------------------------------------------------------------------

    async def pull_request_review_write(self, args: dict[str, Any], ctx: ToolContext) -> str:
        turn = self._turn(ctx, write=True)
        method, out = check_review_write(args, turn.scope)
        if turn.writes_closed:
            raise Rejected("the review for this trigger was already submitted; reply with a "
                           "short final message")
        # Neither create nor submit is budgeted: a model that read a lot can always post.
        if method == "create":
            return f"Pending review started on {turn.start_draft().commit_id[:12]}."
        if turn.draft is None:
            raise Rejected("no pending review: call pull_request_review_write method=create "
                           "first")
        fixed = out.get("fixedThreads", [])
        unknown = [i for i in fixed if i not in turn.fixable]
        if unknown:
            known = ", ".join(f"{i} ({w})" for i, (w, _) in turn.fixable.items()) or "none"
            raise Rejected(f"fixedThreads {unknown} are not your open threads on this PR; "
                           f"open threads: {known}")
        turn.draft.fixed = list(fixed)
        turn.draft.fixed_labels = [turn.fixable[i] for i in fixed]
        if turn.hold_post:
            turn.held_body = out["body"]
            # The same answer as a direct post (ending the turn), so the review session's
            # requests are the same with and without the second look.
            return ToolText(f"Submitted with {len(turn.draft.comments)} comment(s).",
                            ends_turn=True)
        try:
            review = await turn.submit(out["body"])
        except GitHubError as exc:
            raise ToolFailed(f"submitting the review failed: {exc}") from None
        # The review's URL goes to the session log (the web UI links it), not to the model.
        url = review.html_url if review.html_url.startswith(("https://", "http://")) else None
        # The submit is the review turn's task: the turn ends here (no request only for a
        # closing text; whatever the model still had to say, it said with this call).
        return ToolText(f"Submitted with {len(turn.draft.comments)} comment(s).",
                        note=f"review {url}" if url else None, ends_turn=True)

    async def add_comment_to_pending_review(self, args: dict[str, Any], ctx: ToolContext) -> str:
        turn = self._turn(ctx, write=True)
        try:
            out = check_comment(args, turn.scope, await turn.changed_files())
        except Rejected as exc:
            if exc.note == SEVERITY_REFUSED:
                turn.severity_refusals += 1
                log.info("%s: a finding was refused for its severity (%d in this turn)",
                         turn.scope.pr_label, turn.severity_refusals)
            raise
        if turn.writes_closed:
            raise Rejected("the review for this trigger was already submitted")
        if turn.draft is None:
            raise Rejected("no pending review: call pull_request_review_write method=create "
                           "first")
        over = not turn.comment_budget()
        turn.draft.comments.append(DraftComment(
            path=out["path"], body=out["body"], subject_type=out["subjectType"],
            line=out.get("line"), side=out.get("side"), start_line=out.get("startLine"),
            start_side=out.get("startSide"), severity=out["severity"], over_budget=over))
        if over:
            return (f"Added ({len(turn.draft.comments)} pending); the posting budget "
                    f"(review.max_comment_calls, {turn.limits.comment_calls}) is spent, so this "
                    "finding will be listed in the review body instead of inline. Submit with "
                    "pull_request_review_write method=submit_pending (never budgeted).")
        return f"Added ({len(turn.draft.comments)} pending)."
