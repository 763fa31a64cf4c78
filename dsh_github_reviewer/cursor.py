"""The per-account cursor: what the poller knows about every open PR (spec §2).

Stored in domain ``dsh_github_reviewer``, table ``accounts``, key = account name. Unknown status
values fail validation at open, so a corrupted or hand-edited record is reported, not guessed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dsh_harness import DomainSpec

DOMAIN = "dsh_github_reviewer"
TABLE = "accounts"
DOMAIN_VERSION = 1
PROCESSED_IDS_CAP = 500

Status = Literal["reviewed", "missing_instructions", "reviewing"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InflightCommand(Record):
    """A comment command recorded before it runs, so a crash neither loses nor repeats it."""

    comment_id: int
    kind: Literal["review", "bot"]
    source: Literal["issue", "review"]
    author: str
    message: str = ""
    path: str | None = None
    line: int | None = None
    reply_to: int | None = None
    started_at: datetime


class PrEntry(Record):
    head_sha: str
    status: Status
    updated_at: datetime
    base_sha: str | None = None
    reviewed_head_sha: str | None = None
    last_failed_sha: str | None = None
    fail_count: int = Field(default=0, ge=0)
    last_failed_at: datetime | None = None
    last_error: str | None = None
    comment_watermark: datetime | None = None
    processed_comment_ids: list[int] = Field(default_factory=list)
    reviews_done: int = Field(default=0, ge=0)
    inflight: InflightCommand | None = None
    trigger: str | None = None
    last_seen_open_at: datetime | None = None
    draft_logged_sha: str | None = None


class AccountCursor(Record):
    prs: dict[str, PrEntry] = Field(default_factory=dict)


def domain_spec() -> DomainSpec:
    return DomainSpec(name=DOMAIN, version=DOMAIN_VERSION, tables={TABLE: AccountCursor})
