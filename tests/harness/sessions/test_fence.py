"""Fences (storage/fence.py): a lease's holder proves it before each side effect; a stale
writer (paused past its lease, or taken over) is refused, logged once, and stays refused. The
session stores (every backend) refuse an append from a stale writer."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from dsh_harness import OPEN_FENCE, FencedOut, LeaseFence, LeaseLost, stop_point
from dsh_harness.sessions.events import EVENT_ADAPTER, SessionHeader
from dsh_harness.sessions.jsonl_store import JsonlSessionStore
from dsh_harness.sessions.log import Session, SessionFenced, SessionWriteError
from dsh_harness.sessions.postgres_store import PostgresSessionStore
from dsh_harness.sessions.store import StaleAppend
from dsh_harness.storage.fence import STOP_ENV
from dsh_harness.storage.leases import LocalLeases
from dsh_harness.storage.postgres_backend import PostgresBackend

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class CountingLeases(LocalLeases):
    def __init__(self) -> None:
        super().__init__("r1")
        self.renewals = 0

    async def renew(self, lease, ttl_s):
        self.renewals += 1
        return await super().renew(lease, ttl_s)


async def held(ttl: float = 10.0):
    leases, clock = CountingLeases(), Clock()
    lease = await leases.acquire("pr:1", ttl)
    stopped: list[bool] = []
    fence = LeaseFence(leases, lease, ttl, granted_at=clock(), clock=clock,
                       on_lost=lambda: stopped.append(True))
    return leases, clock, fence, stopped


async def test_the_open_fence_always_passes_and_asks_nobody():
    OPEN_FENCE.alive("x")
    await OPEN_FENCE.check("x")
    assert OPEN_FENCE.lease is None and not OPEN_FENCE.lost
    assert OPEN_FENCE.lose("why") is False and not OPEN_FENCE.lost


async def test_check_renews_with_the_token_and_moves_the_local_deadline():
    leases, clock, fence, stopped = await held(ttl=10)
    assert fence.deadline == pytest.approx(100 + 10 - 1)  # less the margin (ttl/10, ≤ 1 s)
    clock.now = 105
    await fence.check("POST reviews")
    assert leases.renewals == 1 and fence.deadline == pytest.approx(105 + 9)
    fence.renewed(fence.lease, 90)  # an older renewal never shortens the deadline
    assert fence.deadline == pytest.approx(114)
    clock.now = 113.9
    fence.alive("a session append")  # before the deadline: no database round trip
    assert leases.renewals == 1 and not stopped and not fence.lost


async def test_a_resumed_process_sees_its_deadline_passed_without_asking(caplog):
    leases, clock, fence, stopped = await held(ttl=10)
    clock.now = 109.0  # paused (SIGSTOP) past the deadline: the database may still say ours
    with caplog.at_level(logging.WARNING, "dsh_harness.storage.fence"):
        with pytest.raises(FencedOut, match=r"POST .* refused: pr:1: the lease .* expired here"):
            await fence.check("POST repos/o/r/pulls/1/reviews")
        with pytest.raises(FencedOut):  # latched: even a renewal that would pass is not tried
            await fence.check("PATCH comment")
        with pytest.raises(FencedOut):
            fence.alive("a session append")
    assert leases.renewals == 0, "a stale fence never asks the database again"
    assert stopped == [True], "the work's owner was told once"
    assert len(caplog.records) == 1, "logged once, however many writes were refused"
    assert fence.lost and isinstance(FencedOut("x"), LeaseLost)


async def test_a_lease_taken_over_is_refused_by_the_synchronous_renewal():
    leases, _clock, fence, stopped = await held(ttl=10)
    del leases._leases["pr:1"]
    taken = await leases.acquire("pr:1", 10)  # another holder: a larger token
    assert taken.token > fence.lease.token
    with pytest.raises(FencedOut, match="taken over"):
        await fence.check("POST reviews")
    assert stopped == [True] and fence.lost


async def test_a_pause_during_the_renewal_itself_is_refused():
    leases, clock, fence, _ = await held(ttl=10)

    real = leases.renew

    async def slow(lease, ttl):
        renewed = await real(lease, ttl)
        clock.now += 30  # the process was stopped while the answer was on its way
        return renewed
    leases.renew = slow  # type: ignore[method-assign]
    with pytest.raises(FencedOut):
        await fence.check("POST reviews")


async def test_lose_reports_whether_it_was_news():
    _, _, fence, stopped = await held()
    assert fence.lose("a write was refused in its transaction") is True
    assert fence.lose("again") is False and stopped == [True]
    fence.renewed(fence.lease, 1e9)  # a renewal after the loss changes nothing
    with pytest.raises(FencedOut, match="refused in its transaction"):
        fence.alive("x")


def test_stop_point_does_nothing_without_the_variable(monkeypatch):
    monkeypatch.delenv(STOP_ENV, raising=False)
    stop_point("github:GET repos/o/r/pulls/1/reviews")  # returns: nobody is stopped
    monkeypatch.setenv(STOP_ENV, "github:POST *")
    stop_point("github:GET repos/o/r/pulls/1/reviews")  # no match: still running
    import os
    assert os.environ[STOP_ENV] == "github:POST *"


# -- session stores: a stale writer's append is refused (every backend) ----------------------

def header(sid: str = "test:fence:1") -> SessionHeader:
    return SessionHeader(id=sid, created_at=T0, meta={})


def message(text: str) -> dict:
    return {"turn": 1, "content": text}


@pytest.fixture(params=["jsonl", "postgres"])
async def store(request, tmp_path):
    if request.param == "postgres":
        made = PostgresSessionStore(request.getfixturevalue("pg_dsn"))
    else:
        made = JsonlSessionStore(tmp_path / "sessions")
    yield made
    await made.close()


async def test_an_append_from_a_writer_whose_view_is_out_of_date_is_refused(store, caplog):
    from dsh_harness.sessions.events import UserMessage

    h = header()
    await store.create(h)
    holder = Session(store, h, [])
    await holder.record(UserMessage, **message("one"))
    loaded = await store.load(h.id, repair=True)
    stale = Session(store, loaded.header, loaded.events)  # saw 2 lines
    await holder.record(UserMessage, **message("two"))  # the log moves on: 3 lines
    with caplog.at_level(logging.WARNING, "dsh_harness.sessions.log"):
        with pytest.raises(SessionFenced, match="has 3 lines, the writer has seen 2"):
            await stale.record(UserMessage, **message("stale"))
        with pytest.raises(SessionWriteError):  # and nothing more from it
            await stale.record(UserMessage, **message("stale again"))
    assert len(caplog.records) == 1
    await store.flush(h.id)
    texts = [e.content for e in (await store.load(h.id)).events]
    assert texts == ["one", "two"], "no line of the stale writer"
    await holder.record(UserMessage, **message("three"))  # the holder goes on
    assert isinstance(StaleAppend("x"), FencedOut)


async def test_an_append_whose_fence_expired_writes_nothing(store):
    from dsh_harness.sessions.events import UserMessage

    _leases, clock, fence, stopped = await held(ttl=10)
    h = header("test:fence:2")
    await store.create(h)
    session = Session(store, h, [], fence=fence)
    await session.record(UserMessage, **message("before the pause"))
    clock.now = 200
    with pytest.raises(SessionFenced):
        await session.record(UserMessage, **message("after the pause"))
    assert await session.close_open_turn("aborted") is None  # no turn_end either
    await store.flush(h.id)
    texts = [e.content for e in (await store.load(h.id)).events]
    assert texts == ["before the pause"] and stopped == [True]


async def test_postgres_checks_the_token_inside_the_append_transaction(pg_dsn):
    from dsh_harness.sessions.events import UserMessage

    backend = PostgresBackend(pg_dsn)
    store = PostgresSessionStore(pg_dsn, leases_here=True)
    try:
        r1, r2 = backend.leases("r1"), backend.leases("r2")
        lease = await r1.acquire("pr:fence", 0)  # expires at once: another may take it
        fence = LeaseFence(r1, lease, 60, granted_at=0, clock=lambda: 1.0)  # deadline: ok
        h = header("test:fence:pg")
        await store.create(h)
        stale = Session(store, h, [], fence=fence)
        await stale.record(UserMessage, **message("held"))
        assert await r2.acquire("pr:fence", 60) is not None
        with pytest.raises(SessionFenced, match="no longer held"):
            await stale.record(UserMessage, **message("after the takeover"))
        assert fence.lost
        texts = [e.content for e in (await store.load(h.id)).events]
        assert texts == ["held"]
    finally:
        await store.close()
        await backend.close()


async def test_old_callers_without_a_position_still_append(store):
    h = header("test:fence:3")
    await store.create(h)
    event = EVENT_ADAPTER.validate_python({"type": "user_message", "seq": 1, "at": T0,
                                           "turn": 1, "content": "x"})
    await store.append(h.id, [event])
    await store.append(h.id, [event], expected=None)
    assert len((await store.load(h.id)).events) == 2
