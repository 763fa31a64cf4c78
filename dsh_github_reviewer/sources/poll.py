"""One account's poll loop: observe, record, wake — never wait for reviews.

A tick polls each repository with three conditional requests (``github.feeds``), records what
needs work through the ``Inbox`` (one atomic write per repository, feed marks included), and
wakes the scheduler. A failing repository (404, 403, 5xx, bad JSON) is recorded in the
account record and skipped for that tick; the others proceed. The loop is supervised: no
exception — GitHub, storage or a bug — ends it; it logs, records what it can and ticks again
at the next interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dsh_harness import Leases

from ..core.clock import utcnow
from ..core.failures import local_failure, log_failure
from ..core.session_key import PrRef
from ..github.account import ConnectedAccount
from ..github.errors import BadCredentials, RateLimited
from ..github.feeds import FeedMarks, poll_repository
from ..work import pause as account_pause
from ..work.context import short_error
from ..work.inbox import Inbox, Observations
from ..work.records import PRS, AccountRecord, RepoState
from ..work.scheduler import Scheduler
from ..work.store import WorkStore, stored_key
from .repositories import WatchedRepositories

log = logging.getLogger(__name__)

# Pauses that stop polling too: a rejected token, the MCP server's (same token's) rate limit.
# A rejected model key stops only the PR work; polls keep recording it.
POLL_PAUSES = ("github", "rate_limit")

# The earliest a poll asked for by a failed delivery runs after the previous tick started.
RECONCILE_SOON_S = 30.0
PRUNE_EVERY = timedelta(days=1)


@dataclass
class PassResult:
    """What one tick of an account did (``dsh run --once`` reports it)."""

    account: str
    ok: bool = True
    skipped: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    new_work: int = 0


class AccountPoller:
    def __init__(self, acct: ConnectedAccount, store: WorkStore, inbox: Inbox,
                 scheduler: Scheduler, interval_s: float, clock: Callable[[], datetime] = utcnow,
                 pause: account_pause.AccountPause | None = None,
                 leases: Leases | None = None):
        """``interval_s``: seconds between ticks — ``poll_interval_s``, or
        ``webhook.reconcile_interval_s`` when deliveries trigger the work. ``pause``: the
        account's pause, shared with its PR workers."""
        self.acct, self.store, self.inbox, self.scheduler = acct, store, inbox, scheduler
        self.pause = pause or account_pause.AccountPause(acct.key, store)
        self.interval_s, self.clock = interval_s, clock
        # Replicas: each slot's poll runs on the one replica that takes the account's lease.
        self.leases = leases
        self.client = acct.client
        self.cfg = acct.config
        self.watched = WatchedRepositories(acct.key, acct.config, acct.client)
        self._stop = asyncio.Event()
        self._soon = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._tick_lock = asyncio.Lock()
        # Repositories whose last poll in this process was recorded in full: an unchanged (304)
        # listing of one of them holds nothing new. After a failed recording it is observed
        # again in full, since the ETag cache already holds the answer that was never recorded.
        self._recorded: set[str] = set()
        self._pruned_at: dict[str, datetime] = {}

    # -- loop ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self._task = asyncio.create_task(self._loop(), name=f"poller:{self.acct.key}")

    async def stop(self) -> None:
        """Stop after the running tick (a tick only records work, so this is quick)."""
        self._stop.set()
        self._soon.set()
        if self._task is not None:
            await self._task
            self._task = None

    def reconcile_soon(self) -> None:
        """A delivery could not be recorded (GitHub slow or failing, storage failing) and
        GitHub does not retry it: poll early instead of at the next reconciliation slot, so its
        work waits about ``RECONCILE_SOON_S`` rather than up to ``reconcile_interval_s``."""
        self._soon.set()

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.interval_s
        due = loop.time()
        while not self._stop.is_set():
            started = loop.time()
            if await self._poll_lease(interval):
                await self.tick()
            else:
                # Another replica polls this slot and records what it finds; pick up the
                # work it recorded (and work a dead replica left) from the shared records.
                self.scheduler.wake(self.acct.key)
            # A tick that overran skips the slots it covered. With the webhook on, the interval
            # is webhook.reconcile_interval_s: deliveries record work without a poll.
            while due <= loop.time():
                due += interval
            wait = due - loop.time()
            next_at = self.clock() + timedelta(seconds=wait)
            try:
                await self.store.update_account(
                    lambda a, at=next_at: setattr(a, "next_tick_at", at))
            except Exception as exc:
                log_failure(log, exc, "account %s: cannot record the next tick time",
                            self.acct.key)
            try:
                async with asyncio.timeout(wait):
                    await self._soon.wait()
                # Asked early: still at most one early tick per RECONCILE_SOON_S, so failing
                # deliveries (GitHub down) do not turn into a poll per delivery.
                early = min(due, started + RECONCILE_SOON_S)
                async with asyncio.timeout(max(0.0, early - loop.time())):
                    await self._stop.wait()
            except TimeoutError:
                pass
            self._soon.clear()

    async def _poll_lease(self, interval: float) -> bool:
        """Whether this replica polls the current slot: it takes the account's lease for a
        little less than the interval and never releases it, so the next slot is free again
        and one replica polls per interval (no extra GitHub requests for more replicas)."""
        if self.leases is None:
            return True
        try:
            return await self.leases.acquire(f"poll:{self.acct.key}", interval * 0.9) \
                is not None
        except Exception as exc:  # the database is away: polling could not record anyway
            log_failure(log, exc, "account %s: cannot take the poll lease", self.acct.key)
            return False

    async def tick(self) -> PassResult:
        if self._tick_lock.locked():
            log.info("account %s: a tick is still running; skipping", self.acct.key)
            return PassResult(self.acct.key, skipped="a tick was still running")
        async with self._tick_lock:
            try:
                return await self._tick()
            except Exception as exc:
                return await self._failed(exc)
            finally:
                if self.leases is not None:
                    # Replicas: a tick wakes the PRs whose records it changed, but another
                    # replica may have recorded this same work first (its poll, a webhook
                    # delivery) and stopped before doing it (SIGSTOP, a crash). Its records are
                    # the only place that work shows, so rescan them after every tick, as a
                    # replica that does not poll this slot does (``_loop``): the replica left
                    # polling alone would otherwise never see it.
                    self.scheduler.wake(self.acct.key)

    async def _failed(self, exc: Exception) -> PassResult:
        log_failure(log, exc, "account %s: tick failed", self.acct.key)
        message = short_error(exc)
        if local_failure(exc):
            # The store itself failed (a full disk): recording that in the store fails the
            # same way, and the line above already said it, once.
            return PassResult(self.acct.key, ok=False, errors={"": message})
        try:
            await self.store.update_account(lambda a: setattr(a, "last_error", message))
        except Exception:
            log.error("account %s: cannot record the tick's error either", self.acct.key)
        return PassResult(self.acct.key, ok=False, errors={"": message})

    async def _tick(self) -> PassResult:
        now = self.clock()
        result = PassResult(self.acct.key)
        account = await self.store.load_account()
        if not self.pause.loaded:
            account = await account_pause.first_load(self.pause, account, now)
        account_pause.load(self.pause, account)
        if account.pause in POLL_PAUSES and account_pause.paused_until(self.pause, now):
            # Logged once when it paused (work/pause.py), not at every tick.
            log.debug("account %s: paused until %s", self.acct.key, account.paused_until)
            result.skipped = f"paused: {account.pause_reason}"
            return result
        if account.rate_limited_until and account.rate_limited_until > now:
            log.info("account %s: rate limited until %s", self.acct.key,
                     account.rate_limited_until.isoformat())
            result.skipped = "rate limited"
            return result
        if not self.cfg.repositories and not self.watched.from_installation:
            return result  # an idle account makes no GitHub calls
        try:
            for full in await self.watched.current():
                try:
                    result.new_work += await self._poll_repo(full, account, now)
                except (RateLimited, BadCredentials):
                    raise
                except Exception as exc:
                    if local_failure(exc):
                        raise   # this machine's storage, not the repository: the tick says it
                    # One failing repository never blocks the account's other repositories.
                    message = short_error(exc)
                    if not _expected(exc):
                        log.exception("account %s: polling %s failed", self.acct.key, full)
                    else:
                        log.error("account %s: %s: %s", self.acct.key, full, message)
                    result.ok, result.errors[full] = False, message
                    await self._repo_failed(full, message)
        except BadCredentials as exc:
            message = short_error(exc)
            await account_pause.pause(self.pause, "github", message, self.clock())
            result.ok, result.errors["credentials"] = False, message
            return result
        except RateLimited as exc:
            until = self.clock() + timedelta(seconds=exc.wait_s)
            log.warning("account %s: %s; pausing until %s", self.acct.key, exc, until)
            message = short_error(exc)

            def limited(a: AccountRecord) -> None:
                a.rate_limited_until, a.last_error = until, message
            await self.store.update_account(limited)
            result.ok, result.errors["rate limit"] = False, message
            return result
        error = "; ".join(f"{r}: {e}" for r, e in result.errors.items()) or None

        def done(a: AccountRecord) -> None:
            a.last_tick_at, a.last_error, a.rate_limited_until = now, error, None
        await self.store.update_account(done)
        if await account_pause.resume(self.pause, "github"):
            self.scheduler.wake(self.acct.key)   # PR work held by the pause runs again
        return result

    async def _repo_failed(self, full: str, message: str) -> None:
        now = self.clock()

        def apply(a: AccountRecord) -> None:
            state = a.repos.setdefault(full.lower(), RepoState())
            state.last_error, state.last_error_at = message, now
        await self.store.update_account(apply)

    # -- one repository -------------------------------------------------------------------------

    async def _poll_repo(self, full: str, account: AccountRecord, now: datetime) -> int:
        owner, name = full.split("/")
        marks = account.feeds.get(full.lower()) or FeedMarks(issue_comments_since=now,
                                                              review_comments_since=now)
        repo = full.lower()
        clean = repo in self._recorded
        # Not clean until this poll is recorded: a failure anywhere below (even in the feeds,
        # after the listing's ETag was kept) makes the next poll ask without ETags.
        self._recorded.discard(repo)
        snap = await poll_repository(self.client, owner, name, marks, fresh=not clean)
        if snap.unchanged:
            self._recorded.add(repo)
            await self._prune_if_due(repo, now)
            return 0   # an idle repository: three free 304s, no read or write of a record
        comments = [*snap.issue_comments, *snap.review_comments]
        keys: list[PrRef] = []
        if snap.complete:
            # Every open PR, recorded a page at a time with that page's comments; the marks
            # move only after the last page (a crash in between reads it all again).
            open_numbers: set[int] = set()
            async for page in self.client.open_pull_pages(owner, name):
                numbers = {p.number for p in page}
                open_numbers |= numbers
                keys += await self.inbox.record(Observations(
                    repo=full, pulls=page, at=now,
                    comments=[c for c in comments if c.number in numbers]))
            # Comments on PRs missing from the listing are on closed PRs: refused, not work.
            keys += await self.inbox.record(Observations(
                repo=full, marks=snap.marks, at=now, complete=True,
                comments=[c for c in comments if c.number not in open_numbers]))
            await self._mark_closed(full, open_numbers, now)
            self._pruned_at[repo] = now
        else:
            keys = await self.inbox.record(Observations(
                repo=full, pulls=snap.pulls, comments=comments, marks=snap.marks, at=now,
                closed=snap.closed, merged=snap.merged))
        self._recorded.add(repo)
        if keys:
            self.scheduler.wake(self.acct.key, keys)
        return len(keys)

    async def _prune_if_due(self, repo: str, now: datetime) -> None:
        """Housekeeping without GitHub calls: records of PRs closed over 7 days ago go, once a
        day per repository (a scan of the stored records, never on every idle tick)."""
        last = self._pruned_at.get(repo)
        if last is not None and now - last < PRUNE_EVERY:
            return
        self._pruned_at[repo] = now
        async with self.store.domain.transaction() as tx:
            for ref, rec in (await self.store.prs()).items():
                if ref.repo == repo and rec.prunable(now):
                    tx.delete(PRS, stored_key(ref))
                    log.info("account %s: pruned closed PR %s", self.acct.key, ref)

    async def _mark_closed(self, full: str, open_numbers: set[int], now: datetime) -> None:
        """After a full listing: PRs missing from it are closed — noted once; pruned 7 days
        later when nothing is owed."""
        repo = full.lower()
        changed = False
        async with self.store.domain.transaction() as tx:
            for ref, rec in (await self.store.prs()).items():
                if ref.repo != repo or ref.number in open_numbers:
                    continue
                if rec.closed_seen_at is None:
                    rec.closed(now)   # the record's own transition (PrRecord.closed)
                    tx.put(PRS, stored_key(ref), rec)
                    changed = True
                elif rec.prunable(now):
                    tx.delete(PRS, stored_key(ref))
                    log.info("account %s: pruned closed PR %s", self.acct.key, ref)
        if changed:
            self.scheduler.wake(self.acct.key, None)


def _expected(exc: Exception) -> bool:
    """A failure whose message says it all (one log line, no traceback): GitHub's, or the
    storage's (a database connection terminated mid-poll: the next tick recovers)."""
    from dsh_harness import StorageError

    from ..github.errors import GitHubError

    return isinstance(exc, (GitHubError, StorageError))
