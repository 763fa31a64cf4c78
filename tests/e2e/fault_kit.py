"""Shared pieces of the fault-injection suite: a clock tests can move past a backoff (the
sandbox GitHub's clock moves with it, so feed marks and comment times stay comparable), and
the checks every scenario ends with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dsh_github_reviewer.testing.scenario import REPO
from tests.waiting import wait_until

__all__ = ["Clock", "no_pending_reviews", "replies_to", "reviews_with", "wait_until"]


class Clock:
    def __init__(self, sb):
        self.sb, self.offset = sb, timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def skip(self, seconds: float = 3600) -> None:
        """Past any backoff: both this clock and the sandbox's move forward."""
        self.offset += timedelta(seconds=seconds)
        self.sb.state.advance(seconds)


def replies_to(sb, comment_id: int, number: int = 1) -> list:
    tag = f"reply-to:{comment_id} -->"
    return [c for c in [*sb.state.issue_comments_of(REPO, number),
                        *sb.state.review_comments_of(REPO, number)] if tag in (c.body or "")]


def reviews_with(sb, marker: str, number: int = 1) -> list:
    return [r for r in sb.state.reviews_of(REPO, number) if marker in (r.body or "")]


def no_pending_reviews(sb) -> bool:
    return not [r for r in sb.state.reviews if r.state == "PENDING"]
