"""The scheduler's PR leases and fences with in-process leases (``LocalLeases``: the contract of
the shared ones, fast): the work gets its lease's fence; a lease lost (taken over, not
renewable, or a write refused) stops the work, is logged once, and the PR is held; the slot
leases cap an account across schedulers; a PR let go for want of a turn comes back when a turn
ends, and PRs leased elsewhere are tried again then."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.work import scheduler as scheduler_module
from dsh_github_reviewer.work.scheduler import Scheduler
from dsh_harness import OPEN_FENCE, FencedOut, LeaseFence, LeaseLost, StorageError
from dsh_harness.storage.leases import FENCE, Lease, LocalLeases, LocalLeaseTable

NOW = datetime(2026, 1, 1, tzinfo=UTC)
A, B, C = (PrRef("a", "o/r", n) for n in (1, 2, 3))


class Store:
    def __init__(self, keys, reactions=None):
        self.owed = set(keys)
        self.reactions = dict(reactions or {})

    async def prs(self):
        return {k: k for k in self.owed}

    async def pr(self, key):
        if key not in self.owed:
            return None
        return _Rec(self.reactions.get(key, []))


class _Rec(str):
    def __new__(cls, reactions):
        made = super().__new__(cls, "rec")
        made.reactions = reactions
        return made


class Worker:
    """Records the fence each run gets; ``hold`` keeps a run going until set."""

    def __init__(self, store, review_slot=None, *, hold=None, action=None):
        self.store, self.review_slot = store, review_slot
        self.hold = hold
        self.action = action          # called with the fence inside the run
        self.fences: dict[str, object] = {}
        self.context_fences: dict[str, object] = {}
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.acks: list[tuple[str, object]] = []

    def due_at(self, rec):
        return None if rec is None else NOW

    async def acknowledge(self, key, fence=None):
        self.acks.append((key, fence))
        self.store.reactions.pop(key, None)

    async def run(self, key, fence=None):
        if key not in self.store.owed:
            return
        self.fences[key] = fence
        self.context_fences[key] = FENCE.get()
        self.started.set()
        try:
            if self.action is not None:
                await self.action(key, fence)
            if self.hold is not None:
                await self.hold.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        self.store.owed.discard(key)


async def until(cond, what: str, turns: int = 2000) -> None:
    for _ in range(turns):
        if cond():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


def replica(table: LocalLeaseTable, owner: str, store, *, ttl=60.0, cap=16, reviews=2,
            make=None, clock=lambda: NOW):
    leases = LocalLeases(owner, table)
    sched = Scheduler(process_cap=cap, clock=clock, leases=leases, lease_ttl_s=ttl)
    holder = {}

    def build(review, chat):
        holder["w"] = (make or Worker)(store, review)
        return holder["w"]
    sched.add_account("a", store, build, 60, reviews)
    return sched, leases, holder["w"]


async def test_without_leases_the_work_runs_with_the_open_fence():
    store = Store([A])
    sched = Scheduler(clock=lambda: NOW)
    worker = sched.add_account("a", store, lambda r, c: Worker(store, r), 60, 2)
    assert sched.lease_ttl_s == scheduler_module.LEASE_TTL_S
    sched.start()
    await asyncio.wait_for(sched.drain("a"), 5)
    await sched.stop(1)
    assert worker.fences == {A: None} and not store.owed  # the worker's default: OPEN_FENCE


async def test_the_work_gets_its_leases_fence_and_lets_the_lease_go_after():
    table = LocalLeaseTable()
    store = Store([A])
    sched, _leases, worker = replica(table, "r1", store, ttl=30)
    assert sched.lease_ttl_s == 30
    sched.start()
    await asyncio.wait_for(sched.drain("a"), 5)
    fence = worker.fences[A]
    assert isinstance(fence, LeaseFence) and fence.lease.name == "pr:a:o/r#1"
    assert fence.lease.owner == "r1" and fence.ttl_s == 30 and not fence.lost
    assert worker.context_fences[A] is fence, "storage writes of the work are fenced too"
    assert not table.leases, "released after the work"
    lane = sched.lanes["a"]
    assert not lane.fences and A not in lane.held and not store.owed
    await sched.stop(1)


async def test_a_scheduler_takes_the_deployments_lease_ttl():
    leases = LocalLeases("r1")
    leases.ttl_s = 7.0
    assert Scheduler(leases=leases).lease_ttl_s == 7.0
    assert Scheduler(leases=leases, lease_ttl_s=3.0).lease_ttl_s == 3.0


async def test_a_pr_leased_elsewhere_is_held_until_that_lease_would_expire():
    table = LocalLeaseTable()
    other = LocalLeases("r0", table)
    await other.acquire(f"pr:{A}", 60)
    store = Store([A])
    sched, _, worker = replica(table, "r1", store, ttl=45)
    lane = sched.lanes["a"]
    sched.start()
    await until(lambda: A in lane.held, "held")
    assert lane.held[A] == NOW + timedelta(seconds=45)
    assert A in lane.elsewhere and not worker.fences and A in store.owed
    await sched.stop(1)


async def test_a_lease_taken_over_stops_the_work_logs_once_and_holds_the_pr(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    hold = asyncio.Event()
    sched, _, worker = replica(table, "r1", store, ttl=0.9,
                               make=lambda s, r: Worker(s, r, hold=hold))
    lane = sched.lanes["a"]
    with caplog.at_level(logging.INFO):
        sched.start()
        await worker.started.wait()
        # Another replica took it over (the lease expired while this one was paused).
        current = table.leases[f"pr:{A}"]
        table.tokens += 1
        table.leases[f"pr:{A}"] = Lease(current.name, "r2", table.tokens,
                                        current.expires_at + timedelta(hours=1))
        await asyncio.wait_for(worker.cancelled.wait(), 5)
        await until(lambda: A not in lane.running, "the run ended")
    fence = worker.fences[A]
    assert fence.lost and A in lane.held and A in store.owed
    assert lane.held[A] == NOW + timedelta(seconds=0.9)
    assert table.leases[f"pr:{A}"].owner == "r2", "the new holder's lease stays"
    lost = [r for r in caplog.records if "this replica stops the work" in r.getMessage()]
    # (Taken over, found at the next renewal; on a starved machine its deadline may pass
    # first: either way once.)
    assert len(lost) == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    await sched.stop(1)


async def test_a_write_refused_inside_the_work_stops_it_without_cancelling_it(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    seen = {}

    async def refused(key, fence):
        fence.lose("a write was refused in its transaction")
        seen["cancelling"] = asyncio.current_task().cancelling()
        raise FencedOut("POST reviews refused")
    sched, _, worker = replica(table, "r1", store,
                               make=lambda s, r: Worker(s, r, action=refused))
    lane = sched.lanes["a"]
    with caplog.at_level(logging.WARNING):
        sched.start()
        await worker.started.wait()
        await until(lambda: A in lane.held, "held")
    assert seen["cancelling"] == 0, "its own FencedOut unwinds it, no cancel on top"
    assert not worker.cancelled.is_set() and A in store.owed
    assert not table.leases, "a lease still ours is let go"
    assert len(caplog.records) == 1, [r.getMessage() for r in caplog.records]
    await sched.stop(1)


async def test_a_lease_lost_error_from_the_work_marks_the_fence_lost(caplog):
    table = LocalLeaseTable()
    store = Store([A])

    async def lost(key, fence):
        raise LeaseLost("lease 'pr:a:o/r#1' with token 1 is no longer held by r1")
    sched, _, worker = replica(table, "r1", store, make=lambda s, r: Worker(s, r, action=lost))
    lane = sched.lanes["a"]
    with caplog.at_level(logging.WARNING):
        sched.start()
        await until(lambda: A in lane.held, "held")
    assert worker.fences[A].lost
    assert [r.getMessage() for r in caplog.records if "stops the work" in r.getMessage()]
    assert lane.held[A] == NOW + timedelta(seconds=60)
    await sched.stop(1)


class Flaky(LocalLeases):
    """Renewals fail (the database is away) while ``down`` is set."""

    down = False

    async def renew(self, lease, ttl_s):
        if self.down:
            raise StorageError("leases on db: connection refused")
        return await super().renew(lease, ttl_s)


async def test_a_lease_that_cannot_be_renewed_before_it_expires_stops_the_work(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    hold = asyncio.Event()
    leases = Flaky("r1", table)
    sched = Scheduler(clock=lambda: NOW, leases=leases, lease_ttl_s=0.3)
    worker = sched.add_account("a", store, lambda r, c: Worker(store, r, hold=hold), 60, 2)
    with caplog.at_level(logging.WARNING):
        sched.start()
        await worker.started.wait()
        leases.down = True
        await asyncio.wait_for(worker.cancelled.wait(), 5)
    messages = [r.getMessage() for r in caplog.records]
    assert any("cannot renew the work lease: leases on db" in m for m in messages)
    assert sum("stops the work" in m for m in messages) == 1
    assert any("could not be renewed before it expired" in m for m in messages)
    await sched.stop(1)


async def test_a_short_database_hiccup_does_not_stop_the_work(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    hold = asyncio.Event()
    leases = Flaky("r1", table)
    sched = Scheduler(clock=lambda: NOW, leases=leases, lease_ttl_s=1.5)
    renewals = {"failed": 0}
    real = Flaky.renew

    async def once(self, lease, ttl_s):
        if not renewals["failed"]:
            renewals["failed"] += 1
            raise StorageError("leases on db: connection reset")
        renewals["ok"] = renewals.get("ok", 0) + 1
        return await real(self, lease, ttl_s)
    leases.renew = once.__get__(leases)  # type: ignore[method-assign]
    worker = sched.add_account("a", store, lambda r, c: Worker(store, r, hold=hold), 60, 2)
    with caplog.at_level(logging.WARNING):
        sched.start()
        await worker.started.wait()
        await until(lambda: renewals.get("ok", 0) >= 2, "renewed again")
    assert not worker.fences[A].lost and not worker.cancelled.is_set()
    fence = worker.fences[A]
    assert fence.deadline > asyncio.get_running_loop().time(), "the renewal moved it"
    hold.set()
    await asyncio.wait_for(sched.drain("a"), 5)
    assert not store.owed
    await sched.stop(1)


async def test_stop_cancels_leased_work_and_lets_the_lease_go():
    table = LocalLeaseTable()
    store = Store([A])
    hold = asyncio.Event()
    sched, _, worker = replica(table, "r1", store, make=lambda s, r: Worker(s, r, hold=hold))
    sched.start()
    await worker.started.wait()
    await sched.stop(0.01)
    assert worker.cancelled.is_set() and not table.leases
    assert not worker.fences[A].lost


class Unreleasable(LocalLeases):
    async def release(self, lease):
        raise StorageError("leases on db: connection refused")


async def test_a_lease_that_cannot_be_released_expires_by_itself(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    leases = Unreleasable("r1", table)
    sched = Scheduler(clock=lambda: NOW, leases=leases)
    worker = sched.add_account("a", store, lambda r, c: Worker(store, r), 60, 2)
    with caplog.at_level(logging.WARNING):
        sched.start()
        await asyncio.wait_for(sched.drain("a"), 5)
    assert worker.fences[A] is not None and not store.owed
    assert [r.getMessage() for r in caplog.records] == [
        f"{A}: cannot release the work lease: leases on db: connection refused"]
    await sched.stop(1)


async def test_a_command_beside_a_running_pr_is_acknowledged_under_its_fence():
    table = LocalLeaseTable()
    store = Store([A])
    hold = asyncio.Event()
    sched, _, worker = replica(table, "r1", store, make=lambda s, r: Worker(s, r, hold=hold))
    sched.start()
    await worker.started.wait()
    store.reactions[A] = ["eyes"]
    sched.wake("a", [A])
    await until(lambda: worker.acks, "acknowledged")
    assert worker.acks == [(A, worker.fences[A])]
    hold.set()
    await asyncio.wait_for(sched.drain("a"), 5)
    await sched.stop(1)


async def test_a_command_of_a_pr_still_taking_its_lease_waits_for_its_run():
    table = LocalLeaseTable()
    store = Store([A], reactions={A: ["eyes"]})
    sched, _, worker = replica(table, "r1", store)
    lane = sched.lanes["a"]
    lane.rescan = False
    lane.running[A] = asyncio.get_running_loop().create_future()  # started, no fence yet
    lane.dirty.add(A)
    await sched._refresh(lane)
    assert not lane.acks and not worker.acks
    lane.fences[A] = OPEN_FENCE
    lane.dirty.add(A)
    await sched._refresh(lane)
    await until(lambda: worker.acks, "acknowledged")
    assert worker.acks == [(A, OPEN_FENCE)]
    lane.running.pop(A).cancel()


# -- slots across schedulers, turns let go and taken back ---------------------------------------

async def test_the_account_slot_lease_waits_while_every_slot_is_held(monkeypatch):
    monkeypatch.setattr(scheduler_module, "SLOT_RETRY_S", 0.01)
    table = LocalLeaseTable()
    other = LocalLeases("r0", table)
    held = await other.acquire("slot:reviews:a:0", 60)
    store = Store([A])
    sched, _leases, _ = replica(table, "r1", store, reviews=1)
    entered = asyncio.Event()

    async def turn():
        async with sched._shared_slot("slot:reviews:a", 1):
            entered.set()
            assert table.leases["slot:reviews:a:0"].owner == "r1"
    task = asyncio.create_task(turn())
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert not entered.is_set(), "all (one) slots held elsewhere: it waits"
    await other.release(held)
    await asyncio.wait_for(task, 5)
    assert "slot:reviews:a:0" not in table.leases, "let go after the turn"


async def test_a_slot_lease_taken_over_is_logged_and_its_turn_goes_on(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    sched, _leases, _ = replica(table, "r1", store, ttl=0.06)
    with caplog.at_level(logging.WARNING):
        async with sched._shared_slot("slot:chats:a", 1):
            table.tokens += 1
            old = table.leases["slot:chats:a:0"]
            table.leases["slot:chats:a:0"] = Lease(old.name, "r2", table.tokens,
                                                   old.expires_at)
            await until(lambda: caplog.records, "logged")
    assert [r.getMessage() for r in caplog.records] == [
        "slot lease slot:chats:a:0 was taken over"]
    assert table.leases["slot:chats:a:0"].owner == "r2", "not released: not ours"


async def test_slot_renewal_errors_and_release_errors_are_warnings(caplog):
    table = LocalLeaseTable()
    leases = Flaky("r1", table)

    class Both(Flaky):
        async def release(self, lease):
            raise StorageError("gone")
    leases = Both("r1", table)
    sched = Scheduler(clock=lambda: NOW, leases=leases, lease_ttl_s=0.06)
    with caplog.at_level(logging.WARNING):
        async with sched._shared_slot("slot:reviews:a", 2):
            leases.down = True
            await until(lambda: len(caplog.records) >= 2, "two failed renewals")
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("cannot renew the slot lease slot:reviews:a:")
    assert messages[-1].startswith("cannot release the slot lease slot:reviews:a:")
    assert messages[-1].endswith(": gone")


async def test_a_pr_let_go_for_want_of_a_turn_comes_back_when_a_turn_ends():
    table = LocalLeaseTable()
    store = Store([A, B])
    hold = asyncio.Event()

    class SlotWorker(Worker):
        async def run(self, key, fence=None):
            if key not in self.store.owed:
                return
            async with self.review_slot():
                self.fences[key] = fence
                self.started.set()
                await hold.wait()
            self.store.owed.discard(key)
    sched, _, worker = replica(table, "r1", store, cap=1, make=SlotWorker)
    lane = sched.lanes["a"]
    sched.start()
    await worker.started.wait()
    await until(lambda: lane.waiting, "the other PR waits for a turn")
    (waiting,) = lane.waiting
    assert f"pr:{waiting}" not in table.leases, "its lease was let go (NoRoom)"
    hold.set()
    await asyncio.wait_for(sched.drain("a"), 5)
    assert set(worker.fences) == {A, B} and not store.owed and not lane.waiting
    await sched.stop(1)


def _lanes_with(sched, **state):
    lane = sched.lanes["a"]
    for name, value in state.items():
        setattr(lane, name, value)
    lane.wakeup.clear()
    lane.changed.clear()
    return lane


async def test_readmit_wakes_one_waiting_pr_when_a_turn_is_free():
    sched, _, _ = replica(LocalLeaseTable(), "r1", Store([]), cap=1)
    lane = _lanes_with(sched, waiting={A: None, B: None}, elsewhere={C}, held={C: NOW})
    sched._readmit(turn_ended=True)
    assert list(lane.waiting) == [B] and lane.dirty == {A}
    assert lane.wakeup.is_set() and lane.changed.is_set()
    assert lane.elsewhere == {C} and C in lane.held, "a waiting PR goes first"


async def test_readmit_does_nothing_while_every_turn_is_taken():
    sched, _, _ = replica(LocalLeaseTable(), "r1", Store([]), cap=1)
    lane = _lanes_with(sched, waiting={A: None}, elsewhere={C})
    await sched._turns.acquire()
    sched._readmit(turn_ended=True)
    assert list(lane.waiting) == [A] and not lane.dirty and not lane.wakeup.is_set()
    sched._turns.release()


async def test_readmit_retries_prs_leased_elsewhere_only_when_a_turn_ended():
    sched, _, _ = replica(LocalLeaseTable(), "r1", Store([]), cap=2)
    lane = _lanes_with(sched, elsewhere={B, C}, held={B: NOW, C: NOW, A: NOW})
    sched._readmit()
    assert lane.elsewhere == {B, C} and not lane.dirty and not lane.wakeup.is_set()
    sched._readmit(turn_ended=True)
    assert not lane.elsewhere and lane.dirty == {B, C} and lane.held == {A: NOW}
    assert lane.wakeup.is_set() and lane.changed.is_set()


async def test_readmit_covers_every_account():
    store = Store([])
    sched, _, _ = replica(LocalLeaseTable(), "r1", store, cap=2)
    sched.add_account("b", store, lambda r, c: Worker(store, r), 60, 2)
    first = _lanes_with(sched)
    second = sched.lanes["b"]
    second.waiting = {B: None}
    second.elsewhere = {C}
    sched._readmit(turn_ended=True)
    assert second.dirty == {B} and not second.waiting and second.wakeup.is_set()
    assert second.elsewhere == {C}, "one waiting PR is readmitted, nothing more"
    assert not first.dirty
    sched._readmit(turn_ended=True)
    assert second.dirty == {B, C} and not second.elsewhere


async def test_a_scan_with_free_turns_retries_prs_leased_elsewhere():
    store = Store([A, B])
    sched, _, _ = replica(LocalLeaseTable(), "r1", store, cap=1)
    lane = _lanes_with(sched, elsewhere={B}, held={B: NOW + timedelta(hours=1)})
    lane.rescan = True
    await sched._refresh(lane)
    assert not lane.elsewhere and B not in lane.held and set(lane.due) == {A, B}
    lane = _lanes_with(sched, elsewhere={B}, held={B: NOW}, waiting={A: None})
    lane.rescan = True
    await sched._refresh(lane)
    assert lane.elsewhere == {B}, "not while a PR waits for a turn here"
    lane.waiting = {}
    await sched._turns.acquire()
    lane.rescan = True
    await sched._refresh(lane)
    assert lane.elsewhere == {B}, "not while every turn is taken"
    sched._turns.release()


@pytest.mark.parametrize("reactions", [[], ["eyes"]])
async def test_a_waiting_pr_stops_waiting_for_a_command_or_when_gone(reactions):
    store = Store([A], reactions={A: reactions})
    sched, _, _ = replica(LocalLeaseTable(), "r1", store)
    lane = _lanes_with(sched, waiting={A: None, B: None}, rescan=False)
    lane.dirty = {A, B}
    await sched._refresh(lane)
    assert (A in lane.waiting) == (not reactions), "a command does not wait for a turn"
    assert B not in lane.waiting, "a PR gone from the records stops waiting"
    assert set(lane.due) == {A}


# -- details the end-to-end tests cannot see -----------------------------------------------------

def test_a_lease_is_renewed_three_times_per_lease_and_given_up_with_a_sixth_left():
    from dsh_github_reviewer.work.scheduler import renew_every, renewal_overdue

    assert renew_every(3.0) == 1.0 and renew_every(60.0) == 20.0
    # deadline 100, ttl 60: a failed renewal gives up once 10 s (a sixth) or less are left.
    assert not renewal_overdue(89.9, 100.0, 60.0)
    assert renewal_overdue(90.0, 100.0, 60.0) and renewal_overdue(95.0, 100.0, 60.0)


async def test_the_work_proves_its_lease_and_runs_in_named_tasks():
    table = LocalLeaseTable()
    store = Store([A])
    seen = {}

    async def prove(key, fence):
        await fence.check("POST repos/o/r/pulls/1/reviews")  # a renewal with the token
        seen["tasks"] = {t.get_name() for t in asyncio.all_tasks()}
        seen["expires"] = table.leases[f"pr:{A}"].expires_at
    sched, _, worker = replica(table, "r1", store, ttl=30,
                               make=lambda s, r: Worker(s, r, action=prove))
    lane = sched.lanes["a"]
    lane.elsewhere.add(A)  # found leased elsewhere once; now it gets the lease
    sched.start()
    await asyncio.wait_for(sched.drain("a"), 5)
    assert {f"pr-work:{A}", f"pr-lease:{A}"} <= seen["tasks"]
    assert not worker.fences[A].lost and A not in lane.elsewhere and not store.owed
    await sched.stop(1)


async def test_a_renewal_keeps_the_lease_and_moves_the_fences_deadline(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    hold = asyncio.Event()
    leases = LocalLeases("r1", table)
    renewed = []
    real = leases.renew

    async def counted(lease, ttl_s):
        got = await real(lease, ttl_s)
        renewed.append((lease, ttl_s, got))
        return got
    leases.renew = counted  # type: ignore[method-assign]
    sched = Scheduler(clock=lambda: NOW, leases=leases, lease_ttl_s=0.3)
    worker = sched.add_account("a", store, lambda r, c: Worker(store, r, hold=hold), 60, 2)
    with caplog.at_level(logging.WARNING):
        sched.start()
        await worker.started.wait()
        fence = worker.fences[A]
        first = fence.deadline
        await until(lambda: len(renewed) >= 2, "renewed twice")
        assert all(ttl == 0.3 and got is not None for _, ttl, got in renewed)
        assert fence.lease == renewed[-1][2] or fence.lease == renewed[-2][2]
        assert fence.deadline > first and not fence.lost
        hold.set()
        await asyncio.wait_for(sched.drain("a"), 5)
    assert not table.leases and not caplog.records, "released, nothing to warn about"
    await sched.stop(1)


async def test_stopping_cancels_the_leased_work_cleanly(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    hold = asyncio.Event()
    sched, _, worker = replica(table, "r1", store, make=lambda s, r: Worker(s, r, hold=hold))
    with caplog.at_level(logging.WARNING):
        sched.start()
        await worker.started.wait()
        await sched.stop(0.01)
    assert worker.cancelled.is_set() and not sched.lanes["a"].running
    assert [r.getMessage() for r in caplog.records] == [
        "stopping: 1 PR work item(s) still running after 0 s were interrupted; they resume "
        "at the next start"]


async def test_the_exact_words_of_a_lost_work_lease(caplog):
    table = LocalLeaseTable()
    store = Store([A])

    async def lost(key, fence):
        raise LeaseLost("lease 'pr:a:o/r#1' with token 1 is no longer held by r1")
    sched, _, _ = replica(table, "r1", store, make=lambda s, r: Worker(s, r, action=lost))
    with caplog.at_level(logging.WARNING):
        sched.start()
        await until(lambda: A in sched.lanes["a"].held, "held")
    assert [r.getMessage() for r in caplog.records] == [
        "pr:a:o/r#1: lease 'pr:a:o/r#1' with token 1 is no longer held by r1; this replica "
        "stops the work and writes nothing more (the new holder of the lease does it)"]
    await sched.stop(1)


async def test_the_exact_words_when_renewals_fail_until_the_lease_would_expire(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    hold = asyncio.Event()
    leases = Flaky("r1", table)
    leases.down = True
    sched = Scheduler(clock=lambda: NOW, leases=leases, lease_ttl_s=0.3)
    worker = sched.add_account("a", store, lambda r, c: Worker(store, r, hold=hold), 60, 2)
    with caplog.at_level(logging.WARNING):
        sched.start()
        await asyncio.wait_for(worker.cancelled.wait(), 5)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == f"pr:{A}: cannot renew the work lease: leases on db: connection refused"
    assert messages[-1] == (
        f"pr:{A}: the work lease could not be renewed before it expired; this replica stops "
        "the work and writes nothing more (the new holder of the lease does it)")
    await sched.stop(1)


async def test_the_exact_words_when_the_work_lease_was_taken_over(caplog):
    table = LocalLeaseTable()
    store = Store([A])
    hold = asyncio.Event()
    sched, _, worker = replica(table, "r1", store, ttl=3.0,
                               make=lambda s, r: Worker(s, r, hold=hold))
    with caplog.at_level(logging.WARNING):
        sched.start()
        await worker.started.wait()
        current = table.leases[f"pr:{A}"]
        table.leases[f"pr:{A}"] = Lease(current.name, "r2", 99, current.expires_at)
        fence = worker.fences[A]
        fence.deadline += 3600  # (a starved machine must not make it the deadline's words)
        await asyncio.wait_for(worker.cancelled.wait(), 10)
    assert [r.getMessage() for r in caplog.records] == [
        f"pr:{A}: the work lease was taken over after it expired; this replica stops the work "
        "and writes nothing more (the new holder of the lease does it)"]
    await sched.stop(1)


async def test_a_slot_lease_is_renewed_while_its_turn_runs(caplog):
    table = LocalLeaseTable()
    leases = LocalLeases("r1", table)
    sched = Scheduler(clock=lambda: NOW, leases=leases, lease_ttl_s=0.09)
    with caplog.at_level(logging.WARNING):
        async with sched._shared_slot("slot:reviews:a", 1):
            first = table.leases["slot:reviews:a:0"].expires_at
            await until(lambda: table.leases["slot:reviews:a:0"].expires_at > first,
                        "renewed")
            other = await LocalLeases("r2", table).acquire("slot:reviews:a:0", 60)
            assert other is None, "a renewed slot is still ours"
    assert not caplog.records and not table.leases


async def test_the_exact_words_of_a_failed_slot_renewal(caplog):
    table = LocalLeaseTable()
    leases = Flaky("r1", table)
    sched = Scheduler(clock=lambda: NOW, leases=leases, lease_ttl_s=0.06)
    with caplog.at_level(logging.WARNING):
        async with sched._shared_slot("slot:reviews:a", 1):
            leases.down = True
            await until(lambda: caplog.records, "a failed renewal")
            leases.down = False
    assert caplog.records[0].getMessage() == (
        "cannot renew the slot lease slot:reviews:a:0: leases on db: connection refused")


async def test_drain_counts_its_passes_and_waits_for_work_due_now():
    store = Store([])
    sched = Scheduler(clock=lambda: NOW)
    sched.add_account("a", store, lambda r, c: Worker(store, r), 60, 2)
    lane = sched.lanes["a"]
    lane.rescan, lane.passes = False, 5
    await asyncio.wait_for(sched.drain("a"), 1)  # nothing due, nothing running
    assert lane.passes == 6
    lane.due = {A: NOW}  # due now, not yet started (no dispatcher): drain must wait for it
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(sched.drain("a"), 0.05)
    assert lane.wakeup.is_set(), "and it wakes the dispatcher to run it"
    lane.due = {}
    lane.dirty = {A}
    lane.wakeup.clear()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(sched.drain("a"), 0.05)
    assert lane.wakeup.is_set()


async def test_start_runs_one_named_dispatcher_per_account_and_stop_ends_it():
    store = Store([])
    sched = Scheduler(clock=lambda: NOW)
    sched.add_account("a", store, lambda r, c: Worker(store, r), 60, 2)
    for _ in range(2):  # a scheduler starts again after a stop
        sched.start()
        assert sched._stopping is False
        dispatcher = sched.lanes["a"].task
        assert dispatcher is not None and dispatcher.get_name() == "scheduler:a"
        await asyncio.sleep(0)
        await sched.stop(1)
        assert dispatcher.done() and sched.lanes["a"].task is None


async def test_chats_take_a_slot_of_their_own_pool_and_of_the_shared_cap(monkeypatch):
    """``/bot`` chats: at most ``max_concurrent_reviews`` at once per account, in a pool apart
    from the reviews; with replicas each also takes a ``slot:chats:<account>:<i>`` lease."""
    table = LocalLeaseTable()
    seen: dict[str, object] = {}

    class ChatWorker(Worker):
        def __init__(self, store, review_slot, chat_slot):
            super().__init__(store, review_slot)
            self.chat_slot = chat_slot

    sched = Scheduler(clock=lambda: NOW, leases=LocalLeases("r1", table))
    store = Store([])
    worker = sched.add_account("a", store, lambda r, c: ChatWorker(store, r, c), 60, 1)
    async with worker.chat_slot():
        seen["slots"] = sorted(table.leases)
        inner = asyncio.create_task(_enter(worker.chat_slot))
        await asyncio.sleep(0.05)
        seen["second waits"] = not inner.done()
    await asyncio.wait_for(inner, 5)
    assert seen == {"slots": ["slot:chats:a:0"], "second waits": True}
    assert not table.leases


async def _enter(slot) -> None:
    async with slot():
        pass
