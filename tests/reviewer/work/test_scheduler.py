"""The scheduler's dispatch loop with a fake store and worker: counted passes and runs, never
time (``drain`` and the dispatcher woke each other without sleeping)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dsh_github_reviewer.core import failures
from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.work.scheduler import Scheduler
from dsh_harness import StorageError

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# The PRs as the real scheduler gets them: typed references (the lease is named by the
# stored form).
A, B = PrRef.parse("a:o/r#1"), PrRef.parse("a:o/r#2")


@dataclass
class Rec:
    due: datetime | None
    reactions: list = field(default_factory=list)


class Clock:
    def __init__(self):
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class Store:
    def __init__(self, owed: dict[str, datetime]):
        self.owed = dict(owed)
        self.reactions: dict[str, list] = {}
        self.broken = 0            # the next N scans fail (a locked or full database)

    async def prs(self):
        if self.broken:
            self.broken -= 1
            raise StorageError("dsh.sqlite3 is locked by another process")
        return {k: Rec(at, self.reactions.get(k, [])) for k, at in self.owed.items()}

    async def pr(self, key):
        return Rec(self.owed[key], self.reactions.get(key, [])) if key in self.owed else None


class Worker:
    """A PR's work: blocks until released (a review waiting for the model), then is done."""

    def __init__(self, store, review_slot, chat_slot):
        self.store, self.review_slot = store, review_slot
        self.release, self.started = asyncio.Event(), asyncio.Event()
        self.runs: list[str] = []
        self.acknowledged: list[str] = []
        self.failures = 0          # the next N runs raise a storage error
        self.active = self.most_active = 0

    def due_at(self, rec):
        return None if rec is None else rec.due

    async def acknowledge(self, key, fence=None):
        self.acknowledged.append(key)
        self.store.reactions.pop(key, None)

    async def run(self, key, fence=None):
        self.runs.append(key)
        async with self.review_slot():
            self.active += 1
            self.most_active = max(self.most_active, self.active)
            self.started.set()
            try:
                await self.release.wait()
            finally:
                self.active -= 1
        if self.failures:
            self.failures -= 1
            raise StorageError("dsh.sqlite3: the disk is full")
        self.store.owed.pop(key, None)


def scheduler(owed, *, reviews=2, cap=16, interval=60.0):
    clock = Clock()
    store = Store(owed)
    sched = Scheduler(process_cap=cap, clock=clock)
    worker = sched.add_account("a", store, lambda r, c: Worker(store, r, c), interval, reviews)
    return sched, sched.lanes["a"], worker, clock


async def test_drain_does_not_spin_while_a_pr_task_runs():
    sched, lane, worker, _ = scheduler({A: NOW})
    sched.start()
    drained = asyncio.create_task(sched.drain("a"))
    await worker.started.wait()
    before = lane.passes
    for _ in range(2000):          # the event loop turns while the review "waits for the model"
        await asyncio.sleep(0)
    spun = lane.passes - before
    worker.release.set()
    await asyncio.wait_for(drained, 5)
    await sched.stop(1)
    assert spun <= 2, f"{spun} scheduler passes while one PR task was running"
    assert worker.runs == [A] and not worker.store.owed


async def test_drain_returns_once_work_is_done():
    sched, lane, worker, _ = scheduler({A: NOW, B: NOW})
    worker.release.set()
    sched.start()
    await asyncio.wait_for(sched.drain("a"), 5)
    assert sorted(worker.runs) == [A, B] and not worker.store.owed and not lane.running
    assert lane.passes < 20, "a pass per change, not thousands"
    await sched.stop(1)


async def test_work_due_later_waits_for_its_time():
    sched, _, worker, clock = scheduler({A: NOW + timedelta(minutes=5)})
    worker.release.set()
    sched.start()
    await asyncio.wait_for(sched.drain("a"), 5)
    assert worker.runs == [], "not due yet"
    clock.now += timedelta(minutes=5)
    sched.wake("a")
    await asyncio.wait_for(sched.drain("a"), 5)
    assert worker.runs == [A]
    await sched.stop(1)


async def test_a_woken_key_is_read_again_and_run():
    sched, _, worker, _ = scheduler({})
    worker.release.set()
    sched.start()
    await asyncio.wait_for(sched.drain("a"), 5)
    worker.store.owed[B] = NOW                 # recorded by a delivery
    sched.wake("a", [B])
    sched.wake("nobody", [B])                  # an unknown account: ignored
    await asyncio.wait_for(sched.drain("a"), 5)
    assert worker.runs == [B]
    await sched.stop(1)


async def test_a_run_the_store_failed_is_held_for_an_interval_then_retried(caplog, monkeypatch):
    monkeypatch.setattr(failures, "_last_logged", {})   # said once per process: start afresh
    caplog.set_level(logging.ERROR, logger="dsh_github_reviewer.work.scheduler")
    sched, lane, worker, clock = scheduler({A: NOW})
    worker.release.set()
    worker.failures = 1
    sched.start()
    await asyncio.wait_for(sched.drain("a"), 5)
    assert worker.runs == [A] and lane.held[A] == NOW + timedelta(seconds=60)
    assert [r.getMessage() for r in caplog.records] == [
        "a:o/r#1: work not done, retrying in 60 s: dsh.sqlite3: the disk is full"]
    assert not any(r.exc_info for r in caplog.records)
    await asyncio.wait_for(sched.drain("a"), 5)
    assert worker.runs == [A], "held, not retried at once"
    clock.now += timedelta(seconds=60)
    sched.wake("a")
    await asyncio.wait_for(sched.drain("a"), 5)
    assert worker.runs == [A, A] and A not in lane.held and not worker.store.owed
    await sched.stop(1)


async def test_reviews_are_bounded_per_account_and_per_process():
    for reviews, cap, most in ((1, 16, 1), (3, 2, 2)):
        sched, _, worker, _ = scheduler({PrRef("a", "o/r", n): NOW for n in range(1, 6)},
                                        reviews=reviews, cap=cap)
        sched.start()
        drained = asyncio.create_task(sched.drain("a"))
        await worker.started.wait()
        for _ in range(50):
            await asyncio.sleep(0)
        worker.release.set()
        await asyncio.wait_for(drained, 5)
        assert worker.most_active == most and len(worker.runs) == 5
        await sched.stop(1)


async def test_stop_interrupts_work_after_the_grace_and_says_so(caplog):
    caplog.set_level(logging.WARNING, logger="dsh_github_reviewer.work.scheduler")
    sched, lane, worker, _ = scheduler({A: NOW})
    sched.start()
    await worker.started.wait()
    task = lane.running[A]
    await sched.stop(0.01)
    assert task.cancelled() and lane.task is None
    assert worker.store.owed == {A: NOW}, "its work stays recorded"
    assert "1 PR work item(s) still running after 0 s were interrupted" in caplog.text


async def test_a_scan_the_store_refused_is_tried_again(caplog, monkeypatch):
    monkeypatch.setattr(failures, "_last_logged", {})
    caplog.set_level(logging.ERROR, logger="dsh_github_reviewer.work.scheduler")
    sched, _, worker, _ = scheduler({A: NOW}, interval=0.01)
    worker.store.broken = 2
    worker.release.set()
    sched.start()
    await asyncio.wait_for(sched.drain("a"), 5)
    assert worker.runs == [A] and worker.store.broken == 0
    assert [r.getMessage() for r in caplog.records] == [
        "account a: cannot read the work records: dsh.sqlite3 is locked by another process"]
    await sched.stop(1)


async def test_a_new_command_is_acknowledged_while_the_prs_work_runs():
    sched, lane, worker, _ = scheduler({A: NOW})
    sched.start()
    drained = asyncio.create_task(sched.drain("a"))
    await worker.started.wait()
    worker.store.reactions[A] = ["eyes"]       # a /bot recorded while the review runs
    sched.wake("a", [A])
    for _ in range(100):
        await asyncio.sleep(0)
        if worker.acknowledged:
            break
    assert worker.acknowledged == [A] and worker.runs == [A], "at once, beside the review"
    worker.release.set()
    await asyncio.wait_for(drained, 5)
    assert not lane.acks
    await sched.stop(1)
