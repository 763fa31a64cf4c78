"""Pausing an account whose credentials were rejected (or whose MCP server is rate limited).

Retrying with a rejected GitHub token or model key only fails again: every tick would log the
same error, and every PR would count failed attempts toward a public give-up. Instead the
account pauses: its account record says why and until when (``status`` and the web UI show
it), ONE log line says so, and nothing of its PR work runs until then. The pause is retried
with a long backoff (``PAUSE_FIRST`` doubling up to ``PAUSE_MAX``); what lifts it is the same
kind of call succeeding again: a tick's GitHub reads for ``github``, a model turn for
``model``, a review for ``rate_limit``.

The pause is kept in memory (``AccountPause``, one per connected account, shared by its PR
workers and its poll loop) and in the account record for other processes and restarts.

A process that starts tries a stored *credential* pause (``github``, ``model``) once at its
first tick instead of waiting it out: fixing a token or key read from the environment takes a
restart, and that restart must not then wait up to ``PAUSE_MAX`` before the fixed credentials
are used. Still rejected, the account pauses again with the next, longer backoff. A rate-limit
pause is GitHub's, not the credentials', and a restart keeps it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from .records import AccountRecord
from .store import WorkStore

log = logging.getLogger(__name__)

PAUSE_FIRST = timedelta(minutes=15)
PAUSE_MAX = timedelta(hours=6)


@dataclass
class AccountPause:
    """One account's pause as this process knows it, with the store that records it."""

    key: str
    store: WorkStore
    paused_until: datetime | None = None
    pause: str | None = None
    # Whether this process has read the stored pause yet (``first_load``).
    loaded: bool = False


# Pauses a restart may lift at once: the operator may have fixed the credentials before it.
CREDENTIAL_PAUSES = ("github", "model")


def pause_length(pauses: int) -> timedelta:
    """The wait after the n-th consecutive pause: 15 min, 30 min, 1 h, ... at most 6 h."""
    return min(PAUSE_FIRST * 2 ** max(pauses - 1, 0), PAUSE_MAX)


async def first_load(acct: AccountPause, record: AccountRecord, now: datetime
                     ) -> AccountRecord:
    """The first read of the account record in this process: a stored credential pause ends
    now (its kind and count stay, so a failure pauses again, longer). Returns the record."""
    acct.loaded = True
    if not (record.pause in CREDENTIAL_PAUSES and record.paused_until is not None
            and record.paused_until > now):
        return record

    def apply(a: AccountRecord) -> None:
        if a.pause in CREDENTIAL_PAUSES and a.paused_until is not None and a.paused_until > now:
            a.paused_until = now
    log.warning("account %s: paused until %s (%s) by an earlier run; trying the credentials "
                "once now, as they may have been fixed before this start", acct.key,
                record.paused_until.isoformat(timespec="seconds"), record.pause_reason)
    return await acct.store.update_account(apply)


def load(acct: AccountPause, record: AccountRecord) -> None:
    """Take the stored pause into memory (a tick reads the account record anyway)."""
    acct.paused_until, acct.pause = record.paused_until, record.pause


def paused_until(acct: AccountPause, now: datetime) -> datetime | None:
    until = acct.paused_until
    return until if until is not None and until > now else None


async def pause(acct: AccountPause, kind: str, reason: str, now: datetime,
                wait: timedelta | None = None) -> datetime:
    """Pause the account for ``kind`` (``github``, ``model``, ``rate_limit``); ``wait``
    (a rate limit's own) replaces the backoff. Returns the end of the pause."""
    state: dict[str, object] = {}

    def apply(a: AccountRecord) -> None:
        first = a.pause != kind or a.paused_until is None
        a.pauses = 1 if a.pause != kind else a.pauses + 1
        a.paused_until = now + (wait if wait is not None else pause_length(a.pauses))
        a.pause, a.pause_reason, a.last_error = kind, reason, reason
        state.update(first=first, until=a.paused_until, pauses=a.pauses)
    await acct.store.update_account(apply)
    until = state["until"]
    assert isinstance(until, datetime)
    acct.paused_until, acct.pause = until, kind
    if state["first"]:
        log.error("account %s: paused until %s: %s. Nothing of this account runs until then; "
                  "fix the credentials (and restart, if they come from the environment) or "
                  "wait for that retry", acct.key, until.isoformat(timespec="seconds"), reason)
    else:
        log.warning("account %s: still paused (%s, try %d); retrying at %s", acct.key, reason,
                    state["pauses"], until.isoformat(timespec="seconds"))
    return until


async def resume(acct: AccountPause, kind: str) -> bool:
    """The kind of call that paused the account worked again: lift the pause. True if one
    was lifted (the caller wakes the account's work)."""
    if acct.pause != kind:
        return False

    def apply(a: AccountRecord) -> None:
        if a.pause == kind:
            a.paused_until, a.pause, a.pause_reason, a.pauses = None, None, None, 0
            a.last_error = None
    await acct.store.update_account(apply)
    acct.paused_until, acct.pause = None, None
    log.info("account %s: %s works again; the account resumes", acct.key,
             {"github": "the GitHub token", "model": "the model key"}.get(kind, "GitHub"))
    return True
