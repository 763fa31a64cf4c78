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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..core.session_key import PrRef
from ..github.client import GitHubClient
from .records import AccountRecord
from .store import WorkStore

log = logging.getLogger(__name__)

PAUSE_FIRST = timedelta(minutes=15)
PAUSE_MAX = timedelta(hours=6)
RATE_FIRST = timedelta(minutes=1)
RATE_MAX = timedelta(minutes=15)
# While one PR probes an ended pause, the others look again this often (woken sooner when
# the probe lifts the pause).
PROBE_RECHECK = timedelta(seconds=30)


@dataclass
class AccountPause:
    """One account's pause as this process knows it, with the store that records it."""

    key: str
    store: WorkStore
    paused_until: datetime | None = None
    pause: str | None = None
    # Whether this process has read the stored pause yet (``first_load``).
    loaded: bool = False
    # The PR whose work is the one probe of a credential pause that ended and was not lifted
    # yet: the other PRs wait for its outcome, so a pause costs one request to the provider
    # and doubles once per probe, not once per PR.
    probe: PrRef | None = None
    # Wakes the account's PR work when a pause is lifted (set by the app; None in tests).
    on_resume: Callable[[], None] | None = None


# Pauses a restart may lift at once: the operator may have fixed the credentials before it.
CREDENTIAL_PAUSES = ("github", "model")


def pause_length(pauses: int, kind: str = "model") -> timedelta:
    """The wait after the n-th consecutive pause: 15 min, 30 min, 1 h, ... at most 6 h for
    rejected credentials; for a rate limit whose wait is unknown, GitHub's guidance: 1 min,
    doubling, at most 15 min."""
    if kind == "rate_limit":
        return min(RATE_FIRST * 2 ** max(pauses - 1, 0), RATE_MAX)
    return min(PAUSE_FIRST * 2 ** max(pauses - 1, 0), PAUSE_MAX)


def github_wait(client: GitHubClient) -> timedelta | None:
    """What is left of the rate-limit wait the account's GitHub client honours (Retry-After,
    the reset time, or what github-mcp-server reported), or None."""
    left = client.blocked_until - client.clock()
    return timedelta(seconds=left) if left > 0 else None


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


def _probing(acct: AccountPause, now: datetime) -> bool:
    """A credential pause ended but nothing lifted it yet: the next PR step is a probe."""
    return acct.pause in CREDENTIAL_PAUSES and paused_until(acct, now) is None


def work_held_until(acct: AccountPause, now: datetime) -> datetime | None:
    """Until when the account's PR work waits: the pause, or — while one PR probes a pause
    that ended — a short re-check (the probe's outcome wakes the work sooner)."""
    until = paused_until(acct, now)
    if until is None and _probing(acct, now) and acct.probe is not None:
        return now + PROBE_RECHECK
    return until


def take_probe(acct: AccountPause, key: PrRef, now: datetime) -> bool:
    """Whether ``key``'s work may run a step now: not while paused, and only one PR at a time
    while a credential pause that ended is being probed. Release with ``release_probe``."""
    if paused_until(acct, now) is not None:
        return False
    if not _probing(acct, now):
        return True
    if acct.probe not in (None, key):
        return False
    acct.probe = key
    return True


def release_probe(acct: AccountPause, key: PrRef) -> None:
    """``key``'s step ended (paused again, lifted, or it called nothing): another PR may probe."""
    if acct.probe == key:
        acct.probe = None


async def pause(acct: AccountPause, kind: str, reason: str, now: datetime,
                wait: timedelta | None = None) -> datetime:
    """Pause the account for ``kind`` (``github``, ``model``, ``rate_limit``); ``wait``
    (a rate limit's own) replaces the backoff. Returns the end of the pause."""
    state: dict[str, object] = {}

    def apply(a: AccountRecord) -> None:
        first = a.pause != kind or a.paused_until is None
        again = not first and a.paused_until is not None and a.paused_until > now
        state.update(first=first, again=again)
        if again and wait is None:
            # Paused already by another PR's failure of the same probe (e.g. two reviews that
            # were running): one doubling per probe, not one per PR.
            state.update(until=a.paused_until, pauses=a.pauses)
            return
        a.pauses = 1 if a.pause != kind else a.pauses + 1
        until = now + (wait if wait is not None else pause_length(a.pauses, kind))
        # A rate limit's own wait may be shorter than a pause already running: keep the later.
        a.paused_until = max(until, a.paused_until) if again and a.paused_until else until
        a.pause, a.pause_reason, a.last_error = kind, reason, reason
        state.update(until=a.paused_until, pauses=a.pauses)
    await acct.store.update_account(apply)
    until = state["until"]
    assert isinstance(until, datetime)
    acct.paused_until, acct.pause, acct.probe = until, kind, None
    if state["again"]:
        log.info("account %s: already paused until %s (%s)", acct.key,
                 until.isoformat(timespec="seconds"), reason)
    elif state["first"] and kind == "rate_limit":
        log.warning("account %s: paused until %s: %s. Nothing of this account calls GitHub "
                    "until then", acct.key, until.isoformat(timespec="seconds"), reason)
    elif state["first"]:
        log.error("account %s: paused until %s: %s. Nothing of this account runs until then; "
                  "fix the credentials (and restart, if they come from the environment) or "
                  "wait for that retry", acct.key, until.isoformat(timespec="seconds"), reason)
    else:
        log.warning("account %s: still paused (%s, try %d); retrying at %s", acct.key, reason,
                    state["pauses"], until.isoformat(timespec="seconds"))
    return until


async def resume(acct: AccountPause, *kinds: str) -> bool:
    """A kind of call that paused the account (one of ``kinds``) worked again: lift the
    pause. True if one was lifted (the account's work is woken)."""
    kind = acct.pause
    if kind not in kinds:
        return False

    def apply(a: AccountRecord) -> None:
        if a.pause == kind:
            a.paused_until, a.pause, a.pause_reason, a.pauses = None, None, None, 0
            a.last_error = None
    await acct.store.update_account(apply)
    acct.paused_until, acct.pause, acct.probe = None, None, None
    log.info("account %s: %s works again; the account resumes", acct.key,
             {"github": "the GitHub token", "model": "the model key"}.get(kind, "GitHub"))
    if acct.on_resume is not None:
        acct.on_resume()
    return True
