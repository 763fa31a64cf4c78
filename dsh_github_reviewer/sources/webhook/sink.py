"""What a delivery records for an account: the same PR work a poll would record.

A delivery names a PR and what happened to it. The PR's current state is read from GitHub
(one request; deliveries can arrive out of order, and an older ``synchronize`` must not put an
old head back), then the PR — with the delivered comment, for a command — goes through the
account's ``Inbox``: the same command parsing, association allowlist, own-comment filter and
draft/author rules as a poll, written in one atomic record update. Only then does the receiver
answer, and the scheduler is woken for the PRs that now owe work. Deliveries that cannot mean
work (a comment that is no command, the bot's own comment, a title edit) write nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...core.clock import utcnow
from ...core.commands import parse_command
from ...core.session_key import PrRef
from ...github.models import PullSummary, ReviewComment
from ...work.inbox import Observations
from ...work.records import PrRecord
from . import events

if TYPE_CHECKING:
    from ...work.scheduler import Scheduler
    from ..poll import AccountPoller

# GitHub gives up on a delivery after 10 s: the PR read must leave time to record and answer.
READ_PR_TIMEOUT_S = 7.0


class RecordWork:
    """Records into each account's inbox — the one its poll loop (``pollers``) records into —
    and wakes ``scheduler`` for the PRs that now owe work."""

    def __init__(self, pollers: Mapping[str, AccountPoller], scheduler: Scheduler):
        self.pollers, self.scheduler = pollers, scheduler

    async def record(self, account: str, event: events.Envelope, delivery_id: str) -> str:
        lane = self.pollers[account]
        try:
            result = await self.observe(lane, event)
            if isinstance(result, str):
                return f"account {account}: {result}"
            keys = result if isinstance(result, list) else await lane.inbox.record(result)
        except Exception:
            # The receiver answers 500 and GitHub does not retry: have the reconciliation poll
            # catch this delivery's work soon instead of at its next slot.
            lane.reconcile_soon()
            raise
        if keys:
            self.scheduler.wake(account, keys)
        return f"account {account}: recorded" + (f", work due on {', '.join(map(str, keys))}"
                                                 if keys else ", nothing new")

    async def observe(self, lane: AccountPoller, event: events.Envelope
                      ) -> Observations | list[PrRef] | str:
        """What to record through the inbox, the keys already recorded, or why nothing."""
        assert event.repository is not None
        repo = event.repository.full_name
        if isinstance(event, events.PullRequestEvent):
            if event.action == "edited" and not event.base_changed:
                return "title/body edit; nothing to record"
            if event.action == "closed":
                return await self.closed(lane, repo, event.number,
                                         event.pull_request.merged_at is not None)
            pr = await self.current(lane, repo, event.number)
            if pr.state != "open":
                return f"{repo}#{event.number} is {pr.state}; nothing to record"
            # A retarget is seen by the inbox (the record keeps the base branch), as by a poll.
            return Observations(repo=repo, pulls=[pr])
        if isinstance(event, events.IssueCommentEvent | events.ReviewCommentEvent):
            comment = event.comment
            # A reply on a review thread may teach a lesson (the inbox decides whose).
            reply = isinstance(comment, ReviewComment) and comment.in_reply_to_id is not None
            if lane.inbox.is_own(comment) or (parse_command(comment.body) is None
                                              and not reply):
                return "not a command"
            number = comment.number
            pr = await self.current(lane, repo, number)
            if pr.state != "open":
                # Refused with 😕 (on a PR the bot knows), as the poll would: recorded as seen
                # closed in the same write, so the inbox takes the command for no work.
                return Observations(repo=repo, comments=[comment], closed=[number])
            return Observations(repo=repo, pulls=[pr], comments=[comment])
        if isinstance(event, events.ReviewThreadEvent):
            # Nothing to run now: the next turn of the PR reads its threads from GitHub.
            return f"thread {event.action}; read by the next turn"
        return "not an event the reviewer uses"

    async def current(self, lane: AccountPoller, repo: str, number: int) -> PullSummary:
        owner, name = repo.split("/")
        async with asyncio.timeout(READ_PR_TIMEOUT_S):
            return await lane.client.get_pull(owner, name, number)

    async def closed(self, lane: AccountPoller, repo: str, number: int,
                     merged: bool = False) -> str:
        """Queued work of a closed PR waits: the worker skips a closed record, and a reopen
        (or the poll that still lists it) clears the mark."""
        now = utcnow()

        def mark(rec: PrRecord | None) -> PrRecord | None:
            if rec is not None:
                rec.closed(now, merged)
            return rec
        await lane.store.update_pr(PrRef(lane.acct.key, repo, number), mark)
        return f"{repo}#{number} closed"
