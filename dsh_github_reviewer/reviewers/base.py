"""The one interface of who reviews: ``Reviewer``, implemented by the single reviewer
(``single.SingleReviewer``) and the team (``team.TeamReviewer``). The app picks one per account
when it is wired; the PR work (``work``) only ever calls this interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..core.triggers import Trigger
from ..github.account import ConnectedAccount
from ..github.models import PullRequest
from ..github.threads import ThreadState
from ..turn.prompts import TrustedInstructions


@dataclass
class TurnResult:
    """How a review or a ``/bot`` answer ended: a review is ``ok`` only once it is on GitHub."""

    ok: bool
    error: str | None = None
    text: str | None = None
    review_id: int | None = None
    posted_now: bool = False
    # Why it failed when that is the account's problem, not the PR's: "auth" (the model
    # provider rejected the key), "rate_limit" (github-mcp-server was rate limited).
    failure: str | None = None
    # A team's review: its verdict line, the members that did not complete (the review
    # failed closed) and how each member's turn went.
    verdict: str | None = None
    incomplete: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    # The bot's threads' resolution states the review turn's input was read with (root comment
    # id -> state; None: not read): the summary after the post starts from them.
    thread_states: dict[int, ThreadState] | None = None


class Reviewer(Protocol):
    async def review(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                     instructions: TrustedInstructions | None, previous_head: str | None,
                     requested_by: str | None = None,
                     same_review: tuple[Trigger, ...] = ()) -> TurnResult:
        """One review for ``trigger``: ok only if a COMMENT review for it is on GitHub.
        ``same_review``: earlier triggers of this very review (a CI job's earlier attempts),
        whose completed work on this head may be reused."""
        ...

    async def chat(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                   instructions: TrustedInstructions | None, author: str, message: str,
                   path: str | None, line: int | None) -> TurnResult:
        """The answer to a ``/bot`` question (redacted, stripped), not yet posted."""
        ...
