"""Runs PR work from the records, decoupled from polling.

A tick (or a webhook delivery) records work through the ``Inbox`` and calls ``wake(account,
keys)``; it never waits for the work. Each account has a dispatcher task holding an index of
PR key -> when its work is next due (built by one scan at start, refreshed for each key that
is woken or finishes). A due PR gets one task, so the work of one PR runs in order and a slow
or stuck PR delays only itself. Model turns are bounded per account (``max_concurrent_reviews``
reviews, and as many ``/bot`` chats in a pool of their own, so a ``/bot`` on an idle PR is
answered while long reviews run) and per process (``max_concurrent_turns`` reviews). With
replicas the per-account caps hold across all of them together, through slot leases in the
database (they protect the account: its GitHub rate limit, its model quota), while the process
cap stays per process (it protects this process's CPU, memory and connections), so each replica
adds its own capacity until the account's cap is reached.

``stop(grace_s)`` waits for running PR tasks up to the bound, then cancels them: their work
stays recorded and resumes at the next start.

Replicas (several ``dsh run`` on one shared database): a PR's work runs under the lease
``pr:<key>`` (``harness.leases``), renewed every third of ``lease_ttl_s`` while it runs. The
work is given the lease's ``LeaseFence``: its storage writes check the token in their
transaction, and every GitHub write and session append first proves the lease (a local
monotonic deadline, then the token in the database), so a replica resumed after a pause writes
nothing once its lease is gone. A PR whose lease another replica holds waits here until about
when that lease would expire. Once the fence learns the lease is lost (the keeper cannot renew
it, or a write was refused) it logs that once and the work is cancelled at once; the PR is held
here, never retried by this replica while the new holder works on it.
A PR owed a review that finds every turn of its process taken lets its lease go at once
(``NoRoom``) and waits in ``lane.waiting`` until a turn here ends, so a replica with free
turns takes it: one replica never sits on every PR's lease.
A PR found leased elsewhere is held back (``lane.elsewhere``) and tried again when a turn here
ends with nothing waiting, so work let go by a busy replica moves to an idle one.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dsh_harness import OPEN_FENCE, Fence, Lease, LeaseFence, LeaseLost, Leases

from ..core.clock import utcnow
from ..core.failures import log_failure
from ..core.session_key import PrRef
from .store import WorkStore
from .worker import PrWorker

log = logging.getLogger(__name__)

DEFAULT_PROCESS_CAP = 16
# How long a PR's work lease lasts without renewal: the delay before another replica takes over
# the work of one that died.
LEASE_TTL_S = 60.0
# How often a replica asks again for a concurrency slot while every slot is held elsewhere.
SLOT_RETRY_S = 0.5


def renew_every(ttl_s: float) -> float:
    """How often a held lease is renewed: three tries before it would expire."""
    return ttl_s / 3


def renewal_overdue(now: float, deadline: float, ttl_s: float) -> bool:
    """After a failed renewal (database away): whether to give the lease up now. The lease is
    still ours until ``deadline`` (the fence's local one); one more try (``renew_every``) would
    come too close to it once less than a sixth of the lease is left."""
    return now >= deadline - ttl_s / 6


@dataclass
class AccountLane:
    key: str
    store: WorkStore
    worker: PrWorker
    poll_interval_s: float
    reviews: asyncio.Semaphore
    chats: asyncio.Semaphore
    due: dict[PrRef, datetime] = field(default_factory=dict)
    running: dict[PrRef, asyncio.Task[None]] = field(default_factory=dict)
    # Reactions added beside a running PR task (``PrWorker.acknowledge``).
    acks: dict[PrRef, asyncio.Task[None]] = field(default_factory=dict)
    dirty: set[PrRef] = field(default_factory=set)
    rescan: bool = True
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    # In-memory retry times of PRs whose run failed outside the records (storage errors).
    held: dict[PrRef, datetime] = field(default_factory=dict)
    # Dispatcher passes and drain rounds: each should follow a change, never a busy loop.
    passes: int = 0
    # Replicas: PRs owed a review that this process had no free turn for; their work lease
    # was let go (another replica with room may take them) and one comes back each time a
    # turn of this process ends.
    waiting: dict[PrRef, None] = field(default_factory=dict)
    # Replicas: PRs held back because another replica held their lease; a turn of this process
    # that ends with nothing waiting here tries them again (another replica may have let them go).
    elsewhere: set[PrRef] = field(default_factory=set)
    # Replicas: the lease fence of each PR whose work runs here (its reactions share it).
    fences: dict[PrRef, Fence] = field(default_factory=dict)


class NoRoom(Exception):
    """A review turn is due but every turn of this process is taken (replicas only)."""


class Scheduler:
    def __init__(self, process_cap: int = DEFAULT_PROCESS_CAP,
                 clock: Callable[[], datetime] | None = None, leases: Leases | None = None,
                 lease_ttl_s: float | None = None):
        # Shared leases (replicas) or None: one process, no lease needed.
        self.leases = leases
        self.lease_ttl_s = lease_ttl_s or (leases.ttl_s if leases is not None else LEASE_TTL_S)

        self.clock = clock or utcnow
        self.process_cap = process_cap
        self._turns = asyncio.Semaphore(process_cap)
        self.lanes: dict[str, AccountLane] = {}
        self._stopping = False

    def add_account(self, key: str, store: WorkStore, make_worker: Callable[..., PrWorker],
                    poll_interval_s: float, max_concurrent_reviews: int) -> PrWorker:
        reviews = asyncio.Semaphore(max_concurrent_reviews)
        chats = asyncio.Semaphore(max_concurrent_reviews)

        cap = max_concurrent_reviews

        @asynccontextmanager
        async def review_slot() -> AsyncIterator[None]:
            if self.leases is not None and self._turns.locked():
                # Replicas: do not sit on the PR's lease while this process has no free turn
                # (one replica would hold every PR and the others none); let it go (``_run``)
                # so a replica with room takes it, and come back when a turn ends here.
                raise NoRoom
            # The local semaphores first: a turn this process has no room for waits here, asking
            # the database nothing; the account's slot lease is taken last.
            try:
                async with reviews, self._turns, \
                        self._shared_slot(f"slot:reviews:{key}", cap):
                    yield
            finally:
                self._readmit(turn_ended=True)

        @asynccontextmanager
        async def chat_slot() -> AsyncIterator[None]:
            async with chats, self._shared_slot(f"slot:chats:{key}", cap):
                yield
        worker = make_worker(review_slot, chat_slot)
        self.lanes[key] = AccountLane(key, store, worker, poll_interval_s, reviews, chats)
        return worker

    # -- control ------------------------------------------------------------------------------

    def start(self) -> None:
        self._stopping = False
        for lane in self.lanes.values():
            if lane.task is None or lane.task.done():
                lane.rescan = True
                lane.task = asyncio.create_task(self._dispatch(lane),
                                                name=f"scheduler:{lane.key}")

    def wake(self, account: str, keys: Iterable[PrRef] | None = None) -> None:
        """New work may be recorded for ``keys`` (None: rescan the account's records)."""
        lane = self.lanes.get(account)
        if lane is None:
            return
        if keys is None:
            lane.rescan = True
        else:
            lane.dirty.update(keys)
        lane.wakeup.set()

    async def drain(self, account: str) -> None:
        """Wait until the account has nothing due now and nothing running (``--once``,
        tests); the caller bounds the wait."""
        lane = self.lanes[account]
        while True:
            lane.passes += 1
            lane.changed.clear()
            pending = lane.rescan or bool(lane.dirty) or bool(self._due_now(lane))
            if not pending and not lane.running and not lane.acks and not lane.waiting:
                return
            # Wake the dispatcher only when it has something to do; while PR tasks merely
            # run, wait for one of them to finish (waking it each round was a busy loop:
            # the dispatcher's pass sets ``changed``, which woke this loop again).
            if pending:
                lane.wakeup.set()
            await lane.changed.wait()

    async def stop(self, grace_s: float) -> None:
        """Stop dispatching; wait up to ``grace_s`` for running PR work, then cancel it."""
        self._stopping = True
        tasks = [lane.task for lane in self.lanes.values() if lane.task is not None]
        for lane in self.lanes.values():
            lane.wakeup.set()
        running = [t for lane in self.lanes.values()
                   for t in (*lane.running.values(), *lane.acks.values())]
        if running:
            _, pending = await asyncio.wait(running, timeout=grace_s)
            for t in pending:
                t.cancel()
            if pending:
                log.warning("stopping: %d PR work item(s) still running after %.0f s were "
                            "interrupted; they resume at the next start", len(pending),
                            grace_s)
                await asyncio.gather(*pending, return_exceptions=True)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for lane in self.lanes.values():
            lane.task = None

    # -- dispatch -------------------------------------------------------------------------

    def _due_now(self, lane: AccountLane) -> list[PrRef]:
        now = self.clock()
        return [k for k, at in lane.due.items()
                if at <= now and k not in lane.running and k not in lane.waiting
                and lane.held.get(k, now) <= now]

    async def _refresh(self, lane: AccountLane) -> None:
        if lane.rescan:
            lane.rescan, lane.dirty = False, set()
            records = await lane.store.prs()
            lane.due = {}
            for key, rec in records.items():
                at = lane.worker.due_at(rec)
                if at is not None:
                    lane.due[key] = at
            if lane.elsewhere and not lane.waiting and not self._turns.locked():
                # Idle turns here (a replica that found every PR leased at its first look has
                # no turn end to wait for): try the PRs leased elsewhere again, once per scan.
                for key in lane.elsewhere:
                    lane.held.pop(key, None)
                lane.elsewhere.clear()
            return
        while lane.dirty:
            key = lane.dirty.pop()
            rec = await lane.store.pr(key)
            fence = lane.fences.get(key, OPEN_FENCE if self.leases is None else None)
            if fence is not None and key in lane.running and rec is not None \
                    and rec.reactions and key not in lane.acks:
                # The PR's work is busy (a long review): acknowledge the new command now,
                # under the work's lease (a PR still taking its lease is acknowledged by it).
                lane.acks[key] = asyncio.create_task(self._acknowledge(lane, key, fence),
                                                     name=f"ack:{key}")
            if key in lane.waiting and (rec is None or rec.reactions):
                # Waiting for a turn: a new command's reaction does not wait (the PR's run
                # adds it first, then waits again); a PR gone from the records stops waiting.
                del lane.waiting[key]
            at = lane.worker.due_at(rec)
            if at is None:
                lane.due.pop(key, None)
            else:
                lane.due[key] = at

    async def _dispatch(self, lane: AccountLane) -> None:
        while not self._stopping:
            lane.passes += 1
            lane.wakeup.clear()
            try:
                await self._refresh(lane)
            except Exception as exc:
                # The store failed (disk full, locked): keep what is known and try again.
                log_failure(log, exc, "account %s: cannot read the work records", lane.key)
                lane.rescan = True
                await self._sleep(lane, lane.poll_interval_s)
                continue
            for key in self._due_now(lane):
                lane.running[key] = asyncio.create_task(self._run(lane, key),
                                                        name=f"pr:{key}")
            lane.changed.set()
            now = self.clock()
            waiting = [max(at, lane.held.get(k, at)) for k, at in lane.due.items()
                       if k not in lane.running and k not in lane.waiting]
            wait = min(((at - now).total_seconds() for at in waiting), default=None)
            await self._sleep(lane, None if wait is None else max(wait, 0.01))

    async def _acknowledge(self, lane: AccountLane, key: PrRef, fence: Fence) -> None:
        try:
            await lane.worker.acknowledge(key, fence)
        finally:
            del lane.acks[key]
            lane.changed.set()

    async def _sleep(self, lane: AccountLane, seconds: float | None) -> None:
        try:
            async with asyncio.timeout(seconds):
                await lane.wakeup.wait()
        except TimeoutError:
            pass

    async def _run(self, lane: AccountLane, key: PrRef) -> None:
        try:
            if self.leases is None:
                await lane.worker.run(key)
            elif not await self._run_leased(lane, key):
                return
            lane.held.pop(key, None)
        except asyncio.CancelledError:
            raise
        except NoRoom:
            lane.waiting[key] = None
        except Exception as exc:
            # Procedures record their own failures; reaching here means the store failed (a
            # local hiccup: no attempt is counted) or recording failed. Hold the PR for one
            # interval, in memory, instead of spinning on it.
            log_failure(log, exc, "%s: work not done, retrying in %.0f s", key,
                        lane.poll_interval_s)
            lane.held[key] = self.clock() + timedelta(seconds=lane.poll_interval_s)
        finally:
            lane.running.pop(key, None)
            lane.dirty.add(key)
            lane.wakeup.set()
            lane.changed.set()
            if key not in lane.waiting:
                # A task that ended without using its turn (done elsewhere, nothing due)
                # leaves the room to a waiting PR.
                self._readmit()

    def _readmit(self, turn_ended: bool = False) -> None:
        """A turn of this process may be free: one waiting PR (of any account) is due again.
        When a turn ended and nothing waits here, the PRs held back because another replica
        held their lease are tried again, once each: that replica may have let them go for
        want of a turn (work goes to the replica with room). Only a turn's end starts such a
        round, so replicas never retry each other's leases in a loop."""
        if self._turns.locked():
            return
        for lane in self.lanes.values():
            if lane.waiting:
                key = next(iter(lane.waiting))
                del lane.waiting[key]
                lane.dirty.add(key)
                lane.wakeup.set()
                lane.changed.set()
                return
        if not turn_ended:
            return
        for lane in self.lanes.values():
            if lane.elsewhere:
                for key in lane.elsewhere:
                    lane.held.pop(key, None)
                lane.dirty.update(lane.elsewhere)
                lane.elsewhere.clear()
                lane.wakeup.set()
                lane.changed.set()

    # -- replicas -------------------------------------------------------------------------

    @asynccontextmanager
    async def _shared_slot(self, prefix: str, cap: int) -> AsyncIterator[None]:
        """With replicas, one of ``cap`` slot leases ``<prefix>:<i>`` in the database, so a
        cap holds across every replica, not per process; waits (polling) while all are held.
        Without shared leases the in-process semaphores already are the cap."""
        if self.leases is None:
            yield
            return
        leases, ttl = self.leases, self.lease_ttl_s
        lease = None
        start = random.randrange(cap)  # replicas probe from different slots
        while lease is None:
            for i in range(cap):
                lease = await leases.acquire(f"{prefix}:{(start + i) % cap}", ttl)
                if lease is not None:
                    break
            else:
                await asyncio.sleep(SLOT_RETRY_S)
        keeper = asyncio.create_task(self._renew_slot(lease), name=f"{prefix}-lease")
        try:
            yield
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            try:
                await leases.release(lease)
            except Exception as exc:  # it expires by itself
                log.warning("cannot release the slot lease %s: %s", lease.name, exc)

    async def _renew_slot(self, lease: Lease) -> None:
        assert self.leases is not None
        while True:
            await asyncio.sleep(renew_every(self.lease_ttl_s))
            try:
                if await self.leases.renew(lease, self.lease_ttl_s) is None:
                    # Taken over after it expired: the cap may be passed by one until this
                    # turn ends; the PR's own lease decides whether the work goes on.
                    log.warning("slot lease %s was taken over", lease.name)
                    return
            except Exception as exc:
                log.warning("cannot renew the slot lease %s: %s", lease.name, exc)

    async def _run_leased(self, lane: AccountLane, key: PrRef) -> bool:
        """Run the PR's work under its lease; False when another replica holds it (the PR is
        held until about when that lease would expire) or the lease was lost mid-way."""
        assert self.leases is not None
        leases, ttl = self.leases, self.lease_ttl_s
        asked = time.monotonic()
        lease = await leases.acquire(f"pr:{key.format()}", ttl)
        if lease is None:
            lane.held[key] = self.clock() + timedelta(seconds=ttl)
            lane.elsewhere.add(key)
            return False
        lane.elsewhere.discard(key)
        work: list[asyncio.Task[None]] = []

        def stop_work() -> None:
            # The fence learnt that the lease is lost. From the keeper (or a reaction task):
            # cancel the work. From the work itself (a refused write), its ``FencedOut`` is
            # already on its way up; a cancel would replace it mid-unwinding.
            for task in work:
                if task is not asyncio.current_task():
                    task.cancel()

        fence = LeaseFence(leases, lease, ttl, granted_at=asked, on_lost=stop_work)
        lane.fences[key] = fence
        with leases.fenced(fence):  # the work's task copies the fence with the context
            work.append(asyncio.create_task(lane.worker.run(key, fence),
                                            name=f"pr-work:{key}"))
        keeper = asyncio.create_task(self._keep(fence, work[0]), name=f"pr-lease:{key}")
        try:
            await asyncio.shield(work[0])
        except asyncio.CancelledError:
            if not fence.lost:  # stop(): cancel the work itself too
                work[0].cancel()
                await asyncio.wait(work)
                raise
        except LeaseLost as exc:  # a write refused before the fence knew: now it does
            fence.lose(str(exc))
        finally:
            del lane.fences[key]
            keeper.cancel()
            await asyncio.wait([keeper])
            try:  # (a lease taken over is not deleted: the token differs)
                await leases.release(fence.lease)
            except Exception as exc:  # it expires by itself
                log.warning("%s: cannot release the work lease: %s", key, exc)
        if fence.lost:
            # The fence logged it once; the new holder does the work, this replica holds the
            # PR until about when a lease would expire.
            lane.held[key] = self.clock() + timedelta(seconds=ttl)
            return False
        return True

    async def _keep(self, fence: LeaseFence, work: asyncio.Task[None]) -> None:
        """Renew the lease while the work runs; once it cannot be renewed the fence is lost
        (which cancels the work)."""
        assert self.leases is not None
        ttl = self.lease_ttl_s
        while not work.done():
            await asyncio.sleep(renew_every(ttl))
            asked = fence.clock()
            try:
                renewed = await self.leases.renew(fence.lease, ttl)
            except Exception as exc:  # database away: still ours until it would expire
                log.warning("%s: cannot renew the work lease: %s", fence.lease.name, exc)
                if not renewal_overdue(fence.clock(), fence.deadline, ttl):
                    continue
                fence.lose("the work lease could not be renewed before it expired")
                return
            if renewed is None:
                fence.lose("the work lease was taken over after it expired")
                return
            fence.renewed(renewed, asked)
