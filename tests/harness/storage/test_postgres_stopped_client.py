"""A replica stopped in the middle of a write must not stall the others past
``IDLE_IN_TRANSACTION_S``, wherever inside the write it stopped.

The server times out a silent transaction only while the timer it arms on answering a Sync
runs; the next message disarms it. psycopg's pipelined ``executemany`` ends with a Sync and a
Flush: the Flush disarmed the timer for good (the session still shows "idle in transaction"),
so a writer stopped after its batch and before its COMMIT kept its locks — the domain's
advisory lock, a session row, the lease row it checked ``FOR SHARE`` — until it resumed. That
was the replicas' late takeover (issue 27's liveness gap). The proxy (``freeze_proxy``) stops
the writer right after it sent the statement that writes the rows; the other writer must get
through once the server has ended the stopped one's session."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from dsh_harness import DomainSpec, StorageError
from dsh_harness.sessions.events import EVENT_ADAPTER, SessionHeader
from dsh_harness.sessions.jsonl_store import SessionLogError
from dsh_harness.sessions.postgres_store import PostgresSessionStore
from dsh_harness.storage import Domain
from dsh_harness.storage.postgres_backend import PostgresBackend
from tests.harness.storage.freeze_proxy import FreezingProxy

# Bounds only a failure (the other writer stalled for good); a pass takes about the idle
# timeout set below.
STALLED_S = 20.0
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class Item(BaseModel):
    n: int


SPEC = DomainSpec(name="demo", version=1, tables={"items": Item})


@pytest.fixture(autouse=True)
def short_idle_timeout(monkeypatch):
    from dsh_harness.storage import postgres

    monkeypatch.setattr(postgres, "IDLE_IN_TRANSACTION_S", 0.5)


def text(n: int) -> str:
    return json.dumps({"n": n}, sort_keys=True, separators=(",", ":"))


def event(seq: int, words: str) -> object:
    return EVENT_ADAPTER.validate_python({"type": "user_message", "seq": seq, "at": T0,
                                          "turn": 1, "content": words})


@pytest.mark.parametrize("ops", [
    pytest.param([("items", "k", "1")], id="upsert"),
    pytest.param([("items", "k", None)], id="delete"),
    pytest.param([("items", "k", "1"), ("items", "j", None), ("items", "m", "2")], id="both"),
])
async def test_a_writer_stopped_inside_a_storage_write_releases_the_domain(pg_dsn, ops):
    other = PostgresBackend(pg_dsn)
    b = await Domain.open(SPEC, other)
    await b.put("items", "k", Item(n=0))
    await b.put("items", "j", Item(n=0))
    marker = b"INSERT INTO dsh_records" if ops[0][2] is not None else b"DELETE FROM dsh_records"
    async with FreezingProxy(pg_dsn, marker) as proxy:
        stopped = PostgresBackend(proxy.proxied_dsn)
        stored = await stopped.open(SPEC)
        writing = asyncio.create_task(stored.write(1, [
            (t, k, None if v is None else text(int(v))) for t, k, v in ops]))
        await asyncio.wait_for(proxy.frozen.wait(), STALLED_S)
        # The stopped writer holds the domain's lock: the other writer waits for the server
        # to end that session, not for the stopped process to resume.
        await asyncio.wait_for(b.put("items", "k", Item(n=2)), STALLED_S)
        await proxy.close()
        with pytest.raises(StorageError):
            await writing
        await stopped.close()
    assert await b.get("items", "k") == Item(n=2)
    assert await b.get("items", "j") == Item(n=0), "the stopped write was rolled back whole"
    assert await b.get("items", "m") is None
    await b.close()
    await other.close()


async def test_a_writer_stopped_inside_a_session_append_releases_the_session(pg_dsn):
    other = PostgresSessionStore(pg_dsn)
    header = SessionHeader(id="test:stopped:1", created_at=T0, meta={})
    await other.create(header)
    async with FreezingProxy(pg_dsn, b"INSERT INTO dsh_session_lines") as proxy:
        stopped = PostgresSessionStore(proxy.proxied_dsn)
        appending = asyncio.create_task(stopped.append(header.id, [
            event(1, "stale"), event(2, "stale")]))
        await asyncio.wait_for(proxy.frozen.wait(), STALLED_S)
        # The stopped appender holds the session's row lock.
        await asyncio.wait_for(other.append(header.id, [event(1, "live")]), STALLED_S)
        await proxy.close()
        with pytest.raises(SessionLogError):
            await appending
        await stopped.close()
    loaded = await other.load(header.id)
    assert [e.content for e in loaded.events] == ["live"]
    await other.close()
