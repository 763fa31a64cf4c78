"""The scheduler's dispatch loop, with a fake store and worker: counted passes, not time."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from dsh_github_reviewer.work.scheduler import Scheduler

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Store:
    def __init__(self, keys):
        self.owed = set(keys)

    async def prs(self):
        return {k: k for k in self.owed}

    async def pr(self, key):
        return key if key in self.owed else None


class Worker:
    """A PR's work blocks until released, like a review waiting for the model."""

    def __init__(self, store):
        self.store, self.release, self.started = store, asyncio.Event(), asyncio.Event()

    def due_at(self, rec):
        return None if rec is None else NOW

    async def run(self, key):
        self.started.set()
        await self.release.wait()
        self.store.owed.discard(key)


def scheduler(keys=("a:o/r#1",)):
    store = Store(keys)
    sched = Scheduler(clock=lambda: NOW)
    worker = sched.add_account("a", store, lambda review, chat: Worker(store), 60, 2)
    return sched, sched.lanes["a"], worker


async def test_drain_does_not_spin_while_a_pr_task_runs():
    sched, lane, worker = scheduler()
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
    assert not worker.store.owed


async def test_drain_returns_once_work_is_done_and_reruns_finished_keys():
    sched, lane, worker = scheduler(("a:o/r#1", "a:o/r#2"))
    worker.release.set()
    sched.start()
    await asyncio.wait_for(sched.drain("a"), 5)
    assert not worker.store.owed and not lane.running
    # A pass per change, not thousands: two tasks, a rescan and their finishing.
    assert lane.passes < 20
    await sched.stop(1)


