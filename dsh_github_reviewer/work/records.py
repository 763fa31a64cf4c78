"""The reviewer's stored work: one record per PR, one per account, instructions by hash.

Storage domain ``dsh_github_reviewer`` (version 2):

* table ``accounts``, key = account name: ``AccountRecord`` — feed marks per repository, tick
  times, the rate-limit pause, and the last result of each repository's poll.
* table ``prs``, key = ``<account>:<owner>/<repo>#<n>`` (lower case): ``PrRecord`` — what the
  bot knows and still owes for one PR. A PR update reads and writes this record only, so it
  costs the same at 10 and 10,000 open PRs.
* table ``instructions``, key = hash of source and text: ``InstructionsRecord`` — trusted
  review instructions are stored once and referenced by ``PrRecord.instructions_key``.

The work a PR record owes (its *inbox*): a review of ``head_sha`` while ``status`` is
``reviewing`` (answering ``trigger``); every ``/bot`` command in ``queued``; every give-up
notice in ``notices`` not yet posted. Each item carries its attempts and backoff. Unknown
status values fail validation at open, so a corrupted record is reported, not guessed.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..github.feeds import FeedMarks

DOMAIN = "dsh_github_reviewer"
DOMAIN_VERSION = 2
ACCOUNTS, PRS, INSTRUCTIONS = "accounts", "prs", "instructions"
PROCESSED_IDS_CAP = 500
NOTICES_KEPT = 20
PRUNE_AFTER = timedelta(days=7)
MAX_BACKOFF = timedelta(minutes=30)

Status = Literal["reviewed", "missing_instructions", "reviewing", "gave_up"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


def backoff(attempts: int, poll_interval_s: float) -> timedelta:
    """min(2^min(n,10) x interval, 30 min): the wait after the n-th failed attempt."""
    wait = timedelta(seconds=(2 ** min(attempts, 10)) * poll_interval_s)
    return min(wait, MAX_BACKOFF)


class Command(Record):
    """A ``/bot`` comment, recorded by the poll that saw it; removed only once answered."""

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
    attempts: int = Field(default=0, ge=0)
    next_attempt_at: datetime | None = None
    last_error: str | None = None
    # When the last counted attempt failed: `run --once` names a pass's failed attempts.
    last_failed_at: datetime | None = None


class Notice(Record):
    """A visible give-up: one short PR comment, findable by its ``trigger`` marker."""

    trigger: str
    what: str
    error: str
    created_at: datetime
    posted: bool = False
    attempts: int = Field(default=0, ge=0)
    next_attempt_at: datetime | None = None
    # Why and when posting the notice last failed (it is retried with backoff).
    post_error: str | None = None
    last_failed_at: datetime | None = None


class InstructionsRecord(Record):
    source: str
    text: str

    @property
    def key(self) -> str:
        return instructions_key(self.source, self.text)


def instructions_key(source: str, text: str) -> str:
    return hashlib.sha256(f"{source}\0{text}".encode()).hexdigest()[:32]


class PrRecord(Record):
    head_sha: str
    status: Status
    updated_at: datetime
    title: str = ""
    base_sha: str | None = None
    # The base branch the PR was last recorded/reviewed against: a poll that lists it on
    # another branch (a retarget whose delivery was lost) owes a review of the same head.
    base_ref: str | None = None
    reviewed_head_sha: str | None = None
    last_review_started_at: datetime | None = None
    # What the owed review answers: "<account>:auto:<sha>" or "<account>:cmd:<comment id>".
    trigger: str | None = None
    requested_by: str | None = None
    last_failed_sha: str | None = None
    fail_count: int = Field(default=0, ge=0)
    last_failed_at: datetime | None = None
    # A pause that is not a failed attempt (rate limit): no attempt is counted.
    not_before: datetime | None = None
    last_error: str | None = None
    processed_comment_ids: list[int] = Field(default_factory=list)
    reviews_done: int = Field(default=0, ge=0)
    queued: list[Command] = Field(default_factory=list)
    notices: list[Notice] = Field(default_factory=list)
    instructions_key: str | None = None
    closed_seen_at: datetime | None = None

    def processed(self, comment_id: int) -> bool:
        return comment_id in self.processed_comment_ids

    def mark_processed(self, comment_id: int) -> None:
        if comment_id not in self.processed_comment_ids:
            self.processed_comment_ids.append(comment_id)
            del self.processed_comment_ids[:-PROCESSED_IDS_CAP]

    def backoff_until(self, poll_interval_s: float) -> datetime | None:
        """When the owed review may be tried again (None: now)."""
        if self.status != "reviewing":
            return None
        until = self.not_before
        if self.fail_count and self.last_failed_at is not None:
            retry = self.last_failed_at + backoff(self.fail_count, poll_interval_s)
            until = retry if until is None else max(until, retry)
        return until

    def review_due_at(self, poll_interval_s: float, now: datetime) -> datetime | None:
        if self.status != "reviewing":
            return None
        return self.backoff_until(poll_interval_s) or now

    def due_at(self, poll_interval_s: float, now: datetime) -> datetime | None:
        """The earliest moment some of this PR's work may run; None = nothing owed."""
        times = [self.review_due_at(poll_interval_s, now)]
        times += [c.next_attempt_at or now for c in self.queued]
        times += [n.next_attempt_at or now for n in self.notices if not n.posted]
        times = [t for t in times if t is not None]
        return min(times) if times else None

    def prunable(self, now: datetime) -> bool:
        """Gone from the open list for more than ``PRUNE_AFTER`` and owing nothing."""
        return (self.closed_seen_at is not None and now - self.closed_seen_at > PRUNE_AFTER
                and not self.queued and all(n.posted for n in self.notices))

    def add_notice(self, notice: Notice) -> None:
        if any(n.trigger == notice.trigger for n in self.notices):
            return
        self.notices.append(notice)
        # Posted notices are history: keep the newest few for `status`.
        while len(self.notices) > NOTICES_KEPT and any(n.posted for n in self.notices):
            self.notices.remove(next(n for n in self.notices if n.posted))


class RepoState(Record):
    """The last poll of one repository, shown per repository in ``status``."""

    last_ok_at: datetime | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None


class AccountRecord(Record):
    feeds: dict[str, FeedMarks] = Field(default_factory=dict)
    repos: dict[str, RepoState] = Field(default_factory=dict)
    last_tick_at: datetime | None = None
    next_tick_at: datetime | None = None
    rate_limited_until: datetime | None = None
    last_error: str | None = None
    bot_login: str | None = None


def pr_key(account: str, repo: str, number: int) -> str:
    return f"{account}:{repo.lower()}#{int(number)}"


def split_pr_key(key: str) -> tuple[str, str, int]:
    """(account, owner/repo, number) of a ``prs`` key."""
    account, _, rest = key.partition(":")
    repo, _, number = rest.rpartition("#")
    return account, repo, int(number)


def migrate_v1(data: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Version 1 kept one ``accounts`` record per account holding every PR (O(N) per update).

    Each PR entry becomes its own ``prs`` record; its copy of the instructions becomes one
    shared ``instructions`` record; an in-flight command goes back to the front of the queue
    (it was not answered, or its reply marker will show it was).
    """
    accounts: dict[str, Any] = {}
    prs: dict[str, Any] = {}
    instructions: dict[str, Any] = {}
    for account, v1_record in data.get(ACCOUNTS, {}).items():
        for key, entry in (v1_record.get("prs") or {}).items():
            entry = dict(entry)
            inflight = entry.pop("inflight", None)
            queued = list(entry.get("queued") or [])
            if inflight:
                queued.insert(0, inflight)
            entry["queued"] = [q for q in queued if q.get("kind") == "bot"]
            for q in queued:
                if q.get("kind") == "review" and entry.get("status") != "reviewing":
                    # A /review waiting behind a review: owed as a review of the head.
                    entry["status"] = "reviewing"
                    entry["trigger"] = f"{account}:cmd:{q['comment_id']}"
                    entry["requested_by"] = q.get("author")
            stored = entry.pop("instructions", None)
            if stored:
                ikey = instructions_key(stored["source"], stored["text"])
                instructions[ikey] = {"source": stored["source"], "text": stored["text"]}
                entry["instructions_key"] = ikey
            entry.pop("last_seen_open_at", None)
            repo, _, number = key.rpartition("#")
            prs[pr_key(account, repo, int(number))] = entry
        accounts[account] = {k: v for k, v in v1_record.items() if k != "prs"}
    return {ACCOUNTS: accounts, PRS: prs, INSTRUCTIONS: instructions}
