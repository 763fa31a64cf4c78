"""What a delivery does for an account: which PR work it means, and waking the account.

A delivery that cannot mean work — a comment that is no command, a bot's comment, a draft's
push, an event for an unwatched author — is answered without touching anything. One that can
wakes the account's poll loop, which observes the change through GitHub's API and records it
with the feed marks (the inbox rule), so an acknowledged delivery never holds the only copy of
the work: a crash right after the answer leaves the change on GitHub for the next tick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..commands import author_ignored, parse_command
from . import events

if TYPE_CHECKING:
    from ..app import ReviewerApp


class WakeAccount:
    def __init__(self, app: ReviewerApp):
        self.app = app

    async def record(self, account: str, event: events.Envelope, delivery_id: str) -> str:
        acct = self.app.accounts[account]
        why = self.skip_reason(acct.config.ignore_authors, event)
        if why is not None:
            return f"account {account}: {why}"
        if isinstance(event, events.ReviewThreadEvent):
            # Nothing to run now: the next turn of the PR reads its threads from GitHub.
            return f"account {account}: thread {event.action}; read by the next turn"
        if acct.poller is not None:
            acct.poller.wake()
        return f"account {account}: work observed"

    @staticmethod
    def skip_reason(ignore_authors: list[str], event: events.Envelope) -> str | None:
        if isinstance(event, events.PullRequestEvent):
            pr = event.pull_request
            if event.action == "edited" and not event.base_changed:
                return "title/body edit; nothing to review"
            if pr.draft and event.action != "closed":
                return "draft; not reviewed"
            if author_ignored(pr.user.login, ignore_authors):
                return f"author {pr.user.login} is ignored"
            return None
        if isinstance(event, events.IssueCommentEvent | events.ReviewCommentEvent):
            comment = event.comment
            if comment.user.is_bot or parse_command(comment.body) is None:
                return "not a command"
            return None
        if isinstance(event, events.ReviewThreadEvent):
            return None
        return "not an event the reviewer uses"
