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
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.session_key import PrRef
from ..core.triggers import StoredTrigger, Trigger
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
    # Assignments are validated too: a trigger set as a string becomes a ``Trigger``.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def backoff(attempts: int, poll_interval_s: float) -> timedelta:
    """min(2^min(n,10) x interval, 30 min): the wait after the n-th failed attempt."""
    wait = timedelta(seconds=(2 ** min(attempts, 10)) * poll_interval_s)
    return min(wait, MAX_BACKOFF)


class Command(Record):
    """A ``/bot`` comment, recorded by the poll that saw it; removed only once answered."""

    comment_id: int
    kind: Literal["review", "bot"]
    source: Literal["issue", "review"]
    # What answers it: "chat" (a model turn) or one of the bot's own words (``core.commands``);
    # "teach": a reply on a bot thread by an allowed person, a lesson if it dismisses the
    # finding (``work/teach.py``).
    action: Literal["chat", "help", "pause", "resume", "lessons", "forget", "learn",
                    "teach"] = "chat"
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
    # "teach": how often the reply was read again for a 👎 its author may have added after
    # replying (``work/bot_commands.py``, ``TEACH_RECHECKS``).
    rechecks: int = Field(default=0, ge=0)


class Reaction(Record):
    """A reaction the bot owes a command comment: 👀 (``eyes``) when the command is recorded,
    😕 (``confused``) when it is refused. Recorded in the same write as the command, so a crash
    before it is added loses nothing; adding it twice changes nothing on GitHub."""

    comment_id: int
    source: Literal["issue", "review"]
    content: Literal["eyes", "confused"]
    attempts: int = Field(default=0, ge=0)
    next_attempt_at: datetime | None = None


REACTION_ATTEMPTS = 5


class FixOwed(Record):
    """Resolving the threads a posted review named as fixed, owed because GitHub failed the
    first try. Recorded before the review is recorded ``reviewed`` (a crash before that runs
    it again from the review's marker), retried with backoff until done. Idempotent: GitHub's
    ``isResolved`` and the reply's ``fixed-in`` marker say what already happened."""

    review_id: int
    attempts: int = Field(default=0, ge=0)
    next_attempt_at: datetime | None = None
    last_error: str | None = None


FIX_ATTEMPTS = 12


class Notice(Record):
    """A visible give-up: one short PR comment, findable by its ``trigger`` marker."""

    trigger: StoredTrigger
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
    # What the owed review answers (``core.triggers``: auto, retarget or cmd).
    trigger: StoredTrigger | None = None
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
    # Why the base's .github/dsh-review.toml was ignored at the last review (status, web).
    config_error: str | None = None
    # Reactions owed to command comments (added at once, outside the PR's ordered work).
    reactions: list[Reaction] = Field(default_factory=list)
    # Posted reviews whose fixed threads are still to be resolved (GitHub failed the try).
    fixes: list[FixOwed] = Field(default_factory=list)
    instructions_key: str | None = None
    closed_seen_at: datetime | None = None
    # Known to have closed by a merge (a webhook or a read of the PR said so; a poll that only
    # misses it in the open list cannot tell).
    merged: bool = False
    # The PR was a draft when last seen: nothing of its work runs (an owed review, queued
    # commands, notices) until it is seen ready for review again.
    draft: bool = False
    # The head the review procedure found must wait as a draft: the base's
    # .github/dsh-review.toml does not say auto_review.drafts = true. Read once per draft head
    # (a push asks again), never on every tick.
    draft_waits: str | None = None
    # ``/bot pause``: who paused automatic reviews of this PR and when (None: not paused).
    # An automatic review stays owed while paused and runs after ``/bot resume``.
    paused_by: str | None = None
    paused_at: datetime | None = None
    # ``/review full``: the owed review covers the whole PR, not only what changed (kept when
    # a push arrives before it runs; cleared once a review is posted).
    full_review: bool = False

    # -- the state machine: every change of ``status`` is one of these transitions ----------
    # (``tests/reviewer/work/test_records.py`` holds the transition table; the architecture
    # guide, "The PR record's states", shows the same table.)

    @classmethod
    def owing(cls, *, head_sha: str, title: str, base_sha: str | None, base_ref: str | None,
              trigger: Trigger, now: datetime) -> PrRecord:
        """A PR seen for the first time: it owes a review of its head."""
        return cls(head_sha=head_sha, status="reviewing", updated_at=now, title=title,
                   base_sha=base_sha, base_ref=base_ref, trigger=trigger)

    def owe_review(self, trigger: Trigger, now: datetime, requested_by: str | None = None
                   ) -> None:
        """Any state -> ``reviewing`` answering ``trigger``: a new head, a retarget, a
        ``/review``. New work starts afresh: earlier failures (and a give-up) belong to the
        work before it."""
        self.status, self.updated_at = "reviewing", now
        self.trigger, self.requested_by = trigger, requested_by
        self.fail_count, self.last_failed_sha, self.last_failed_at = 0, None, None
        self.not_before = None

    def pause(self, by: str, at: datetime) -> None:
        """``/bot pause``: automatic reviews wait (no transition: an owed one stays owed)."""
        self.paused_by, self.paused_at = by, at

    def resume(self) -> None:
        """``/bot resume``: an automatic review owed meanwhile is due again."""
        self.paused_by, self.paused_at = None, None

    @property
    def waits_for_resume(self) -> bool:
        """The owed review is automatic and the PR is paused: it runs after ``/bot resume``."""
        return (self.paused_by is not None and self.status == "reviewing"
                and (self.trigger is None or self.trigger.automatic))

    def seen_at(self, *, head_sha: str, title: str, base_sha: str | None,
                base_ref: str | None) -> None:
        """What the PR looked like when last observed (no transition)."""
        self.head_sha, self.title, self.base_sha, self.base_ref = (head_sha, title, base_sha,
                                                                   base_ref)

    def started(self, at: datetime, instructions_key: str | None) -> None:
        """``reviewing`` stays ``reviewing``: the model is about to run."""
        self.last_review_started_at, self.updated_at = at, at
        self.instructions_key = instructions_key

    def reviewed(self, head_sha: str, now: datetime, *, counted: bool,
                 answers: Collection[Trigger | None]) -> None:
        """A review of ``head_sha`` is on GitHub. ``reviewing`` -> ``reviewed`` when the owed
        trigger is one the review answers (``answers``); otherwise the record moved on during
        the turn (a push, a ``/review`` after the start) and still owes that."""
        self.updated_at, self.reviewed_head_sha = now, head_sha
        if counted:
            self.reviews_done += 1
        if self.trigger in answers:
            self.status, self.head_sha, self.trigger, self.requested_by = ("reviewed", head_sha,
                                                                           None, None)
            self.fail_count, self.last_failed_sha, self.last_failed_at = 0, None, None
            self.not_before, self.last_error = None, None
            self.full_review = False

    def answered_elsewhere(self, auto: Trigger, commit: str | None) -> None:
        """``reviewing`` stays ``reviewing``: the owed trigger was answered by a review on an
        older head (found by its marker), so the current head is owed its automatic review."""
        self.trigger, self.requested_by = auto, None
        if commit:
            self.reviewed_head_sha = commit

    def failed(self, head_sha: str, now: datetime, error: str, max_attempts: int,
               ran: Trigger) -> bool:
        """A failed attempt at ``ran`` on ``head_sha`` (``reviewing``); at ``max_attempts``
        on one head ``reviewing`` -> ``gave_up``. True when it gave up."""
        self.fail_count = (self.fail_count if self.last_failed_sha == head_sha else 0) + 1
        self.last_failed_sha, self.last_failed_at, self.updated_at = head_sha, now, now
        self.last_error = error
        if self.fail_count < max_attempts:
            return False
        self.gave_up(now, f"the review of head {head_sha[:12]}", error, self.trigger or ran)
        return True

    def gave_up(self, now: datetime, what: str, error: str, trigger: Trigger) -> None:
        """``reviewing`` -> ``gave_up``: the owed review is abandoned, visibly (a notice
        carrying ``trigger``, posted once)."""
        self.status = "gave_up"
        self.add_notice(Notice(trigger=trigger, what=what, error=error, created_at=now))

    def skipped(self, head_sha: str, now: datetime, note: str) -> None:
        """``reviewing`` -> ``reviewed`` without a review: the repository config says no
        automatic review of this PR (``/review`` still reviews it)."""
        self.status, self.head_sha, self.updated_at = "reviewed", head_sha, now
        self.trigger, self.requested_by, self.fail_count, self.not_before = None, None, 0, None
        self.full_review = False
        self.last_failed_sha, self.last_failed_at, self.last_error = None, None, note

    def missing_instructions(self, now: datetime, error: str) -> None:
        """Any state -> ``missing_instructions``: nothing to review against; nothing owed."""
        self.status, self.updated_at = "missing_instructions", now
        self.trigger, self.requested_by, self.fail_count, self.not_before = None, None, 0, None
        self.last_error = error

    def paused(self, until: datetime, error: str) -> None:
        """``reviewing`` stays ``reviewing`` until ``until`` (rate limit): no attempt counted."""
        self.not_before, self.last_error = until, error

    def closed(self, now: datetime, merged: bool = False) -> None:
        """Gone from the open list (any state; ``prunable`` a week later)."""
        self.closed_seen_at = self.closed_seen_at or now
        self.merged = self.merged or merged

    def reopened(self) -> None:
        self.closed_seen_at = None
        self.merged = False

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
        """When the owed review may run; None when none is owed now: none was asked, a draft
        waits for its next head, the repository is paused, or the PR was closed (its status
        stays, so a reopened PR owes the review it owed; its commands and notices still run)."""
        if self.status != "reviewing" or (self.draft and self.draft_waits == self.head_sha) \
                or self.waits_for_resume or self.closed_seen_at is not None:
            return None
        return self.backoff_until(poll_interval_s) or now

    def due_at(self, poll_interval_s: float, now: datetime) -> datetime | None:
        """The earliest moment some of this PR's work may run; None = nothing owed."""
        reactions = [r.next_attempt_at or now for r in [*self.reactions, *self.fixes]]
        # A draft: 😕 on its commands, a posted review's thread resolution, and its owed review
        # until the procedure has read whether the base reviews drafts (``draft_waits``).
        times = [self.review_due_at(poll_interval_s, now), *reactions]
        if not self.draft:
            times += [c.next_attempt_at or now for c in self.queued]
            times += [n.next_attempt_at or now for n in self.notices if not n.posted]
        times = [t for t in times if t is not None]
        return min(times) if times else None

    def prunable(self, now: datetime) -> bool:
        """Gone from the open list for more than ``PRUNE_AFTER`` and owing nothing."""
        return (self.closed_seen_at is not None and now - self.closed_seen_at > PRUNE_AFTER
                and not self.queued and not self.reactions and not self.fixes
                and all(n.posted for n in self.notices))

    def owe_reaction(self, comment_id: int, source: Literal["issue", "review"],
                     content: Literal["eyes", "confused"]) -> None:
        if not any(r.comment_id == comment_id and r.content == content
                   for r in self.reactions):
            self.reactions.append(Reaction(comment_id=comment_id, source=source,
                                           content=content))

    def owe_fix(self, review_id: int, error: str, now: datetime, poll_interval_s: float
                ) -> FixOwed | None:
        """A try at resolving ``review_id``'s fixed threads failed: owed again after backoff.
        None when it gave up (``FIX_ATTEMPTS`` failed tries)."""
        fix = next((f for f in self.fixes if f.review_id == review_id), None)
        if fix is None:
            fix = FixOwed(review_id=review_id)
            self.fixes.append(fix)
        fix.attempts += 1
        fix.last_error = error
        fix.next_attempt_at = now + backoff(fix.attempts, poll_interval_s)
        if fix.attempts >= FIX_ATTEMPTS:
            self.fixes.remove(fix)
            return None
        return fix

    def fix_done(self, review_id: int) -> None:
        self.fixes = [f for f in self.fixes if f.review_id != review_id]

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
    # Credentials rejected (GitHub's 401, the model provider's 401/403, a 429 of the MCP
    # server's GitHub calls): nothing of the account runs until ``paused_until``; ``pause``
    # says why ("github", "model" or "rate_limit": what clears it), ``pauses`` counts the
    # consecutive pauses for the backoff (see ``work/pause.py``).
    paused_until: datetime | None = None
    pause: str | None = None
    pause_reason: str | None = None
    pauses: int = Field(default=0, ge=0)


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
                    entry["trigger"] = Trigger.cmd(account, q["comment_id"]).format()
                    entry["requested_by"] = q.get("author")
            stored = entry.pop("instructions", None)
            if stored:
                ikey = instructions_key(stored["source"], stored["text"])
                instructions[ikey] = {"source": stored["source"], "text": stored["text"]}
                entry["instructions_key"] = ikey
            entry.pop("last_seen_open_at", None)
            prs[PrRef.parse_v1(account, key).format()] = entry
        accounts[account] = {k: v for k, v in v1_record.items() if k != "prs"}
    return {ACCOUNTS: accounts, PRS: prs, INSTRUCTIONS: instructions}
