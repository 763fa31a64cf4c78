"""Replicas: schedulers of several processes share PR work through leases in a real PostgreSQL
(each scheduler has its own ``Leases`` owner, as each ``dsh run`` has). Every PR's work runs on
one replica at a time; a replica that loses a lease stops that work, and its late writes are
refused by the fencing token. The tests that need only leases also run on ``LocalLeases``
sharing one table (the same contract in one process): fast, for the mutation tests."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import psycopg
import pytest
from pydantic import BaseModel

from dsh_github_reviewer.work.scheduler import Scheduler
from dsh_harness import DomainSpec, LeaseLost
from dsh_harness.storage import Domain
from dsh_harness.storage.leases import LocalLeases, LocalLeaseTable
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

    async def run(self, key, fence=None):
        if key not in self.store.owed:
            return
        self.runs.append((self.replica, key))
        await self.gate.wait()
        await asyncio.sleep(0)
        self.store.owed.discard(key)


class LocalReplicas:
    """Leases of several "replicas" in one process: one shared table, an owner each."""

    def __init__(self) -> None:
        self.table = LocalLeaseTable()

    def leases(self, owner: str) -> LocalLeases:
        return LocalLeases(owner, self.table)


@pytest.fixture(params=["local", "postgres"])
async def backend(request):
    if request.param == "local":
        yield LocalReplicas()
        return
    made = PostgresBackend(request.getfixturevalue("pg_dsn"))
    yield made
    await made.close()


@pytest.fixture
async def pg_backend(pg_dsn):
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

    async def run(self, key, fence=None):
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


async def test_a_replica_that_cannot_renew_stops_the_work(pg_backend, pg_dsn):
    domain = await Domain.open(SPEC, pg_backend)
    sched = Scheduler(clock=lambda: NOW, leases=pg_backend.leases("r1"), lease_ttl_s=0.6)
    worker = WritingWorker("r1", domain)
    store = Store(["a:o/r#1"])
    sched.add_account("a", store, lambda review, chat: worker, 60, 2)
    sched.start()
    await asyncio.wait_for(worker.first_written.wait(), 10)
    await _expire(pg_dsn, "pr:a:o/r#1")
    taken = await pg_backend.leases("r2").acquire("pr:a:o/r#1", 60)
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


async def test_a_late_write_after_a_takeover_is_refused_by_the_token(pg_backend, pg_dsn):
    domain = await Domain.open(SPEC, pg_backend)
    # A long ttl: the holder does not notice (a GC pause) before it writes again.
    sched = Scheduler(clock=lambda: NOW, leases=pg_backend.leases("r1"), lease_ttl_s=600)
    worker = WritingWorker("r1", domain)
    sched.add_account("a", Store(["a:o/r#1"]), lambda review, chat: worker, 60, 2)
    sched.start()
    await asyncio.wait_for(worker.first_written.wait(), 10)
    await _expire(pg_dsn, "pr:a:o/r#1")
    r2 = pg_backend.leases("r2")
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


async def test_a_delivery_handled_by_one_replica_is_a_duplicate_on_another(pg_backend):
    from dsh_github_reviewer.sources.webhook import deliveries

    spec = deliveries.domain_spec()
    first = await Domain.open(spec, pg_backend)
    second = await Domain.open(spec, pg_backend)
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

    async def run(self, key, fence=None):
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


class GatedSlotWorker:
    """Holds a review slot until ``gate`` opens; counts the turns in a slot, per replica and
    across replicas, and sets ``state['reached']`` once ``state['goal']`` run at once."""

    def __init__(self, replica: str, store: Store, review_slot, state: dict,
                 gate: asyncio.Event):
        self.replica, self.store, self.review_slot = replica, store, review_slot
        self.state, self.gate = state, gate

    def due_at(self, rec):
        return None if rec is None else NOW

    async def run(self, key, fence=None):
        if key not in self.store.owed:
            return
        s = self.state
        s["tried"].setdefault(self.replica, set()).add(key)
        async with self.review_slot():
            s["now"] += 1
            s["max"] = max(s["max"], s["now"])
            mine = s["by"][self.replica] = s["by"].get(self.replica, 0) + 1
            s["most_by"][self.replica] = max(s["most_by"].get(self.replica, 0), mine)
            if s["now"] >= s["goal"]:
                s["reached"].set()
            try:
                await self.gate.wait()
            finally:
                s["now"] -= 1
                s["by"][self.replica] -= 1
        self.store.owed.discard(key)


def _slot_state(goal: int) -> dict:
    return {"now": 0, "max": 0, "by": {}, "most_by": {}, "goal": goal,
            "reached": asyncio.Event(), "tried": {}}


def _counting(leases, refused: list[int]):
    """Count the account-slot leases this replica asked for and was refused (all held)."""
    acquire = leases.acquire

    async def counted(name, ttl_s):
        got = await acquire(name, ttl_s)
        if got is None and name.startswith("slot:reviews:"):
            refused[0] += 1
        return got
    leases.acquire = counted
    return leases


async def _replicas(backend, store, keys, state, gate, *, process_cap, account_cap,
                    refused=None):
    made = []
    for n, name in enumerate(("r1", "r2")):
        view = Slice(store, keys[n::2])
        leases = backend.leases(name)
        if refused is not None:
            leases = _counting(leases, refused)
        sched = Scheduler(process_cap=process_cap, clock=lambda: NOW, leases=leases)
        sched.add_account("a", view, lambda review, chat, view=view, name=name: GatedSlotWorker(
            name, view, review, state, gate), 60, account_cap)
        made.append(sched)
    for sched in made:
        sched.start()
    return made


async def test_each_replica_adds_its_own_process_cap(backend):
    # max_concurrent_turns = 2 per process, max_concurrent_reviews = 8 per account: two
    # replicas run 2 + 2 turns at once (the process cap is per process, not per cluster).
    keys = [f"a:o/r#{i}" for i in range(8)]
    store, gate, state = Store(keys), asyncio.Event(), _slot_state(goal=4)
    replicas = await _replicas(backend, store, keys, state, gate, process_cap=2,
                               account_cap=8)
    try:
        await asyncio.wait_for(state["reached"].wait(), 30)
        assert state["by"] == {"r1": 2, "r2": 2}, state["by"]
    finally:
        gate.set()
        await asyncio.wait_for(asyncio.gather(*(s.drain("a") for s in replicas)), 60)
        for sched in replicas:
            await sched.stop(1)
    assert not store.owed
    assert state["most_by"] == {"r1": 2, "r2": 2}, "no replica passed its own process cap"
    assert state["max"] == 4


async def test_the_account_cap_holds_although_each_replica_has_room(backend):
    # max_concurrent_turns = 4 per process (8 across the two replicas), max_concurrent_reviews
    # = 3: never more than 3 turns of the account at once across both.
    keys = [f"a:o/r#{i}" for i in range(8)]
    store, gate, state = Store(keys), asyncio.Event(), _slot_state(goal=3)
    refused = [0]
    replicas = await _replicas(backend, store, keys, state, gate, process_cap=4,
                               account_cap=3, refused=refused)
    try:
        await asyncio.wait_for(state["reached"].wait(), 30)
        # Turns that have room in their process ask the database for an account slot and are
        # refused: wait for several full rounds of refusals (no clock involved) before looking.
        for _ in range(3000):
            if refused[0] >= 30:
                break
            await asyncio.sleep(0.01)
        assert refused[0] >= 30, "turns beyond the account's cap kept asking for a slot"
        assert state["now"] == 3 and state["max"] == 3, state
    finally:
        gate.set()
        await asyncio.wait_for(asyncio.gather(*(s.drain("a") for s in replicas)), 60)
        for sched in replicas:
            await sched.stop(1)
    assert not store.owed
    assert state["max"] == 3, f"{state['max']} turns of one account at once (cap 3)"


async def test_a_replica_without_a_free_turn_leaves_the_prs_to_others(backend):
    # Replica r1 starts first and sees all 8 PRs owed at once; it has 2 turns. Were it to keep
    # the work lease of every PR it cannot run yet, r2 (started later, 2 turns of its own)
    # would find them all held and the two replicas would review no faster than one.
    keys = [f"a:o/r#{i}" for i in range(8)]
    store, gate, state = Store(keys), asyncio.Event(), _slot_state(goal=4)
    made = {}
    for name in ("r1", "r2"):
        sched = Scheduler(process_cap=2, clock=lambda: NOW, leases=backend.leases(name))
        sched.add_account("a", store, lambda review, chat, name=name: GatedSlotWorker(
            name, store, review, state, gate), 60, 8)
        made[name] = sched
    made["r1"].start()
    try:
        for _ in range(3000):  # r1 has tried every PR and fills its own 2 turns
            if len(state["tried"].get("r1", ())) == len(keys) and state["by"].get("r1") == 2:
                break
            await asyncio.sleep(0.01)
        assert state["by"].get("r1") == 2 and len(state["tried"]["r1"]) == len(keys)
        made["r2"].start()
        await asyncio.wait_for(state["reached"].wait(), 30)
        assert state["by"] == {"r1": 2, "r2": 2}, state["by"]
    finally:
        gate.set()
        for sched in made.values():
            if not sched.lanes["a"].task:
                sched.start()
        await asyncio.wait_for(asyncio.gather(*(s.drain("a") for s in made.values())), 60)
        for sched in made.values():
            await sched.stop(1)
    assert not store.owed, "every PR reviewed, those let go included"
    assert state["most_by"] == {"r1": 2, "r2": 2}


async def test_a_replica_with_a_free_turn_takes_prs_another_replica_let_go(backend):
    # r0 stands for a busy replica: it holds the work leases of 6 PRs when r2 first looks, so
    # r2 holds them back (for a lease's lifetime, 60 s) and runs the 2 others. r0 then lets
    # them go for want of a turn, as a replica does; when r2's turns end it takes them over
    # instead of idling for the rest of the minute.
    keys = [f"a:o/r#{i}" for i in range(8)]
    store, gate, state = Store(keys), asyncio.Event(), _slot_state(goal=2)
    r0 = backend.leases("r0")
    busy = [await r0.acquire(f"pr:{k}", 60) for k in keys[2:]]
    sched = Scheduler(process_cap=2, clock=lambda: NOW, leases=backend.leases("r2"))
    sched.add_account("a", store, lambda review, chat: GatedSlotWorker(
        "r2", store, review, state, gate), 60, 8)
    lane = sched.lanes["a"]
    sched.start()
    try:
        await asyncio.wait_for(state["reached"].wait(), 30)
        for _ in range(3000):
            if len(lane.held) == 6:
                break
            await asyncio.sleep(0.01)
        assert sorted(lane.held) == sorted(keys[2:]), "held back: another replica has them"
        for lease in busy:
            await r0.release(lease)
        gate.set()
        await asyncio.wait_for(sched.drain("a"), 60)
    finally:
        gate.set()
        await sched.stop(1)
    assert not store.owed, f"left for a lease's lifetime: {sorted(store.owed)}"
    assert state["tried"]["r2"] == set(keys) and state["most_by"]["r2"] == 2


async def test_an_idle_replica_takes_let_go_prs_at_its_next_scan(backend):
    # r2 finds every PR leased by r0 at its first look, so no turn of its own ever ends; once
    # r0 lets them go, r2's next scan of the records (each poll interval) takes them.
    keys = [f"a:o/r#{i}" for i in range(4)]
    store, gate, state = Store(keys), asyncio.Event(), _slot_state(goal=2)
    gate.set()
    r0 = backend.leases("r0")
    busy = [await r0.acquire(f"pr:{k}", 60) for k in keys]
    sched = Scheduler(process_cap=2, clock=lambda: NOW, leases=backend.leases("r2"))
    sched.add_account("a", store, lambda review, chat: GatedSlotWorker(
        "r2", store, review, state, gate), 60, 8)
    lane = sched.lanes["a"]
    sched.start()
    try:
        for _ in range(3000):
            if len(lane.held) == 4:
                break
            await asyncio.sleep(0.01)
        assert sorted(lane.held) == sorted(keys)
        for lease in busy:
            await r0.release(lease)
        sched.wake("a")  # the poll interval's rescan
        await asyncio.wait_for(sched.drain("a"), 60)
    finally:
        await sched.stop(1)
    assert not store.owed, f"left for a lease's lifetime: {sorted(store.owed)}"
