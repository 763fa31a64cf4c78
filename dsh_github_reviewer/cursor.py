"""The per-account cursor: what the poller knows about every open PR (spec §2).

Stored in domain ``dsh_github_reviewer``, table ``accounts``, key = account name. Unknown status
values fail validation at open, so a corrupted or hand-edited record is reported, not guessed.
Every change is a read-modify-write under the domain's lock (``CursorStore.update_pr``), so PRs
reviewed concurrently never overwrite each other's entries.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dsh_harness import Domain, DomainSpec

from .github.feeds import FeedMarks

DOMAIN = "dsh_github_reviewer"
TABLE = "accounts"
DOMAIN_VERSION = 1
PROCESSED_IDS_CAP = 500
PRUNE_AFTER = timedelta(days=7)
MAX_BACKOFF = timedelta(minutes=30)

Status = Literal["reviewed", "missing_instructions", "reviewing"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Command(Record):
    """A comment command, recorded before it runs so a crash neither loses nor repeats it."""

    comment_id: int
    kind: Literal["review", "bot"]
    source: Literal["issue", "review"]
    author: str
    association: str = "NONE"
    message: str = ""
    path: str | None = None
    line: int | None = None
    thread_root: int | None = None
    created_at: datetime


class Instructions(Record):
    source: str
    text: str


class PrEntry(Record):
    head_sha: str
    status: Status
    updated_at: datetime
    title: str = ""
    base_sha: str | None = None
    reviewed_head_sha: str | None = None
    last_review_started_at: datetime | None = None
    trigger: str | None = None
    last_failed_sha: str | None = None
    fail_count: int = Field(default=0, ge=0)
    last_failed_at: datetime | None = None
    last_error: str | None = None
    processed_comment_ids: list[int] = Field(default_factory=list)
    reviews_done: int = Field(default=0, ge=0)
    inflight: Command | None = None
    queued: list[Command] = Field(default_factory=list)
    instructions: Instructions | None = None
    last_seen_open_at: datetime | None = None

    def processed(self, comment_id: int) -> bool:
        return comment_id in self.processed_comment_ids

    def mark_processed(self, comment_id: int) -> None:
        if comment_id not in self.processed_comment_ids:
            self.processed_comment_ids.append(comment_id)
            del self.processed_comment_ids[:-PROCESSED_IDS_CAP]

    def backoff_until(self, poll_interval_s: float) -> datetime | None:
        """When a failed head may be retried: min(2^min(n,10) x interval, 30 min) after."""
        if self.status != "reviewing" or not self.fail_count or self.last_failed_at is None:
            return None
        wait = timedelta(seconds=(2 ** min(self.fail_count, 10)) * poll_interval_s)
        return self.last_failed_at + min(wait, MAX_BACKOFF)


class AccountCursor(Record):
    prs: dict[str, PrEntry] = Field(default_factory=dict)
    feeds: dict[str, FeedMarks] = Field(default_factory=dict)
    last_tick_at: datetime | None = None
    next_tick_at: datetime | None = None
    rate_limited_until: datetime | None = None
    last_error: str | None = None


def domain_spec() -> DomainSpec:
    return DomainSpec(name=DOMAIN, version=DOMAIN_VERSION, tables={TABLE: AccountCursor})


class CursorStore:
    """One account's cursor record."""

    def __init__(self, domain: Domain, account: str):
        self.table = domain.table(TABLE)
        self.account = account

    async def load(self) -> AccountCursor:
        return await self.table.get(self.account) or AccountCursor()

    async def update(self, fn: Callable[[AccountCursor], None]) -> AccountCursor:
        def apply(current: AccountCursor | None) -> AccountCursor:
            cursor = current or AccountCursor()
            fn(cursor)
            return cursor
        return await self.table.update(self.account, apply)

    async def update_pr(self, key: str, fn: Callable[[PrEntry | None], PrEntry | None]
                        ) -> PrEntry | None:
        result: list[PrEntry | None] = [None]

        def apply(cursor: AccountCursor) -> None:
            new = fn(cursor.prs.get(key))
            if new is None:
                cursor.prs.pop(key, None)
            else:
                cursor.prs[key] = new
            result[0] = new
        await self.update(apply)
        return result[0]

    async def prune(self, now: datetime) -> list[str]:
        """Drop entries of PRs absent from the open list for 7 days (closed/merged)."""
        gone: list[str] = []

        def apply(cursor: AccountCursor) -> None:
            for key, entry in list(cursor.prs.items()):
                seen = entry.last_seen_open_at or entry.updated_at
                if now - seen > PRUNE_AFTER and entry.inflight is None:
                    del cursor.prs[key]
                    gone.append(key)
        await self.update(apply)
        return gone
