"""Replicas: schedulers of several processes share PR work through leases in a real PostgreSQL
(each scheduler has its own ``Leases`` owner, as each ``dsh run`` has). Every PR's work runs on
one replica at a time; a replica that loses a lease stops that work, and its late writes are
refused by the fencing token."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import psycopg
import pytest
from pydantic import BaseModel

from dsh_github_reviewer.work.scheduler import Scheduler
from dsh_harness import DomainSpec, LeaseLost
from dsh_harness.storage import Domain
from dsh_harness.storage.postgres_backend import PostgresBackend

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Store:
    """The shared PR records: what is owed (both replicas see the same set)."""

    def __init__(self, keys):
        self.owed = set(keys)

    async def prs(self):
        return {k: k for k in self.owed}

    async def pr(self, key):
        return key if key in self.owed else None


class Worker:
    """Reads the shared record like the real worker: work already done is a no-op."""

    def __init__(self, replica: str, store: Store, runs: list, gate: asyncio.Event):
        self.replica, self.store, self.runs, self.gate = replica, store, runs, gate

    def due_at(self, rec):
        return None if rec is None else NOW

    async def run(self, key):
        if key not in self.store.owed:
            return
        self.runs.append((self.replica, key))
        await self.gate.wait()
        await asyncio.sleep(0)
        self.store.owed.discard(key)


@pytest.fixture
async def backend(pg_dsn):
    made = PostgresBackend(pg_dsn)
    yield made
    await made.close()


async def test_every_pr_runs_on_exactly_one_replica(backend):
    keys = [f"a:o/r#{i}" for i in range(30)]
    store, runs, gate = Store(keys), [], asyncio.Event()
    replicas = []
    for name in ("r1", "r2", "r3"):
        sched = Scheduler(clock=lambda: NOW, leases=backend.leases(name))
        sched.add_account("a", store, lambda review, chat, name=name: Worker(name, store, runs,
                                                                             gate), 60, 4)
        replicas.append(sched)
    for sched in replicas:
        sched.start()
    # Every PR's work is started and blocked (a long turn) while all three replicas dispatch
    # what they see as due: without leases each replica would run every PR.
    for _ in range(400):
        await asyncio.sleep(0.01)
        if len(runs) >= len(keys) and all(s.lanes["a"].passes >= 2 for s in replicas):
            break
    gate.set()
    await asyncio.wait_for(asyncio.gather(*(s.drain("a") for s in replicas)), 30)
    for sched in replicas:
        await sched.stop(1)
    assert not store.owed
    ran = [key for _, key in runs]
    assert sorted(ran) == sorted(keys), "each PR's work ran exactly once across the replicas"


class Item(BaseModel):
    by: str


SPEC = DomainSpec(name="work", version=1, tables={"prs": Item})


class WritingWorker:
    """Writes the PR record, waits (a long model turn), then writes again."""

    def __init__(self, replica: str, domain: Domain):
        self.replica, self.domain = replica, domain
        self.first_written, self.resume = asyncio.Event(), asyncio.Event()
        self.cancelled = False
        self.late_write_error: BaseException | None = None

    def due_at(self, rec):
        return NOW

    async def run(self, key):
        await self.domain.put("prs", key, Item(by=f"{self.replica}-first"))
        self.first_written.set()
        try:
            await self.resume.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        try:
            await self.domain.put("prs", key, Item(by=f"{self.replica}-late"))
        except LeaseLost as exc:
            self.late_write_error = exc
            raise


async def _expire(dsn: str, name: str) -> None:
    """What a paused or partitioned holder looks like to the others: its lease ran out."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE dsh_leases SET expires_at = now() - interval '1 second' "
                     "WHERE name = %s", (name,))


async def test_a_replica_that_cannot_renew_stops_the_work(backend, pg_dsn):
    domain = await Domain.open(SPEC, backend)
    sched = Scheduler(clock=lambda: NOW, leases=backend.leases("r1"), lease_ttl_s=0.6)
    worker = WritingWorker("r1", domain)
    store = Store(["a:o/r#1"])
    sched.add_account("a", store, lambda review, chat: worker, 60, 2)
    sched.start()
    await asyncio.wait_for(worker.first_written.wait(), 10)
    await _expire(pg_dsn, "pr:a:o/r#1")
    taken = await backend.leases("r2").acquire("pr:a:o/r#1", 60)
    assert taken is not None, "the expired lease is taken over"
    lane = sched.lanes["a"]
    for _ in range(200):  # the holder's next renewal (a third of its ttl) finds it lost
        await asyncio.sleep(0.05)
        if worker.cancelled and not lane.running:
            break
    assert worker.cancelled, "the work stopped when its lease was lost"
    assert "a:o/r#1" in lane.held, "and waits for the new holder instead of running again"
    await sched.stop(1)
    assert await domain.get("prs", "a:o/r#1") == Item(by="r1-first")
    await domain.close()


async def test_a_late_write_after_a_takeover_is_refused_by_the_token(backend, pg_dsn):
    domain = await Domain.open(SPEC, backend)
    # A long ttl: the holder does not notice (a GC pause) before it writes again.
    sched = Scheduler(clock=lambda: NOW, leases=backend.leases("r1"), lease_ttl_s=600)
    worker = WritingWorker("r1", domain)
    sched.add_account("a", Store(["a:o/r#1"]), lambda review, chat: worker, 60, 2)
    sched.start()
    await asyncio.wait_for(worker.first_written.wait(), 10)
    await _expire(pg_dsn, "pr:a:o/r#1")
    r2 = backend.leases("r2")
    taken = await r2.acquire("pr:a:o/r#1", 60)
    with r2.fenced(taken):
        await domain.put("prs", "a:o/r#1", Item(by="r2"))
    worker.resume.set()
    lane = sched.lanes["a"]
    for _ in range(200):
        await asyncio.sleep(0.02)
        if worker.late_write_error is not None and not lane.running:
            break
    assert isinstance(worker.late_write_error, LeaseLost)
    assert await domain.get("prs", "a:o/r#1") == Item(by="r2"), "the new holder's write stands"
    assert "a:o/r#1" in lane.held
    await sched.stop(1)
    await domain.close()


async def test_a_delivery_handled_by_one_replica_is_a_duplicate_on_another(backend):
    from dsh_github_reviewer.sources.webhook import deliveries

    spec = deliveries.domain_spec()
    first = await Domain.open(spec, backend)
    second = await Domain.open(spec, backend)
    a = await deliveries.DeliveryLog(first, shared=True).load()
    b = await deliveries.DeliveryLog(second, shared=True).load()
    await a.remember("d-1", deliveries.Delivery(received_at=NOW, event="issue_comment",
                                                outcome="recorded"))
    assert await b.known("d-1"), "replica b never saw d-1 but the database did"
    assert not await b.known("d-2")
    alone = await deliveries.DeliveryLog(second).load()  # one process: memory is enough
    await a.remember("d-3", deliveries.Delivery(received_at=NOW, event="push",
                                                outcome="recorded"))
    assert not await alone.known("d-3")
    await first.close()
    await second.close()


class Slice(Store):
    """One replica's view: the shared records, of which it sees only ``keys``."""

    def __init__(self, store: Store, keys):
        self.shared, self.keys = store, set(keys)

    @property
    def owed(self):
        return self.shared.owed

    async def prs(self):
        return {k: k for k in self.shared.owed & self.keys}

    async def pr(self, key):
        return key if key in self.shared.owed and key in self.keys else None


class SlotWorker:
    """Holds a review slot (a model turn) for a while; counts how many run at once."""

    def __init__(self, store: Store, review_slot, state: dict):
        self.store, self.review_slot, self.state = store, review_slot, state

    def due_at(self, rec):
        return None if rec is None else NOW

    async def run(self, key):
        if key not in self.store.owed:
            return
        async with self.review_slot():
            self.state["now"] += 1
            self.state["max"] = max(self.state["max"], self.state["now"])
            await asyncio.sleep(0.05)
            self.state["now"] -= 1
        self.store.owed.discard(key)


async def test_the_review_cap_holds_across_replicas(backend):
    keys = [f"a:o/r#{i}" for i in range(9)]
    store, state = Store(keys), {"now": 0, "max": 0}
    replicas = []
    for n, name in enumerate(("r1", "r2", "r3")):
        # Each replica happens to see three of the PRs first (as when each took its share of
        # a burst of webhooks), so all three run reviews of the same account at once.
        view = Slice(store, keys[n::3])
        sched = Scheduler(clock=lambda: NOW, leases=backend.leases(name))
        # max_concurrent_reviews = 2 per account: each replica alone would allow 2.
        sched.add_account("a", view, lambda review, chat, view=view: SlotWorker(view, review,
                                                                                state), 60, 2)
        replicas.append(sched)
    for sched in replicas:
        sched.start()
    await asyncio.wait_for(asyncio.gather(*(s.drain("a") for s in replicas)), 60)
    for sched in replicas:
        await sched.stop(1)
    assert not store.owed
    assert state["max"] == 2, f"{state['max']} reviews ran at once across 3 replicas (cap 2)"
