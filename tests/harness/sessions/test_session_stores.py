"""One contract, every session store (jsonl, postgres): the bytes a log reads back are the bytes
the JSONL store writes, appends are incremental, stamps change with every append, a released
log resumes from its mark, and ``dsh sessions copy`` moves logs byte for byte both ways."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from dsh_harness.errors import DshError
from dsh_harness.sessions.copy import copy_sessions
from dsh_harness.sessions.events import EVENT_ADAPTER, SessionHeader
from dsh_harness.sessions.jsonl_store import JsonlSessionStore, SessionLogError, dump_line
from dsh_harness.sessions.postgres_store import PostgresSessionStore
from dsh_harness.sessions.store import SessionStore

NAMES = ["jsonl", "postgres"]
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def make_store(request: pytest.FixtureRequest, name: str, home: Path) -> SessionStore:
    if name == "postgres":
        return PostgresSessionStore(request.getfixturevalue("pg_dsn"))
    return JsonlSessionStore(home / "sessions")


@pytest.fixture(params=NAMES)
async def store(request, tmp_path):
    made = make_store(request, request.param, tmp_path)
    yield made
    await made.close()


def header(sid: str = "test:a:1") -> SessionHeader:
    return SessionHeader(id=sid, created_at=T0, meta={"kind": "ünïcode ✓", "n": 1})


def event(seq: int, text: str = "hello") -> object:
    return EVENT_ADAPTER.validate_python({"type": "user_message", "seq": seq, "at": T0, "turn": 1,
                                          "content": f"{text} {seq} — «quoted» \"x\"\n完成"})


def expected_bytes(h: SessionHeader, events: list) -> bytes:
    return dump_line(h) + b"".join(dump_line(e) for e in events)


async def test_create_append_load_reads_back_the_jsonl_bytes(store):
    h = header()
    await store.create(h)
    events = [event(i) for i in range(1, 6)]
    await store.append(h.id, events[:2])
    await store.append(h.id, [])
    await store.append(h.id, events[2:])
    await store.flush(h.id)
    assert await store.exists(h.id) and not await store.exists("test:none")
    loaded = await store.load(h.id)
    assert loaded.header == h and loaded.events == events and loaded.dropped_tail == 0
    raw = await store.read_from(h.id, 0)
    assert raw == expected_bytes(h, events)
    assert await store.read_from(h.id, 17) == raw[17:]
    assert await store.read_from(h.id, len(raw)) == b""
    with pytest.raises(SessionLogError, match="already exists"):
        await store.create(h)
    assert await store.list_ids() == [h.id]


async def test_missing_session_and_unstorable_ids_are_errors(store):
    with pytest.raises(SessionLogError, match="not found"):
        await store.load("test:missing")
    with pytest.raises(SessionLogError, match="cannot be stored"):
        await store.create(header(".hidden"))


async def test_stamps_change_with_every_append_and_end_with_the_size(store):
    h = header()
    await store.create(h)
    first = await store.stamp(h.id)
    await store.append(h.id, [event(1)])
    second = await store.stamp(h.id)
    assert first != second
    size = len(expected_bytes(h, [event(1)]))
    assert isinstance(second, tuple) and second[1] == size, "the web UI reads stamp[1] as size"
    assert dict(await store.list_stamped()) == {h.id: second}
    assert await store.stamp("test:missing") is None


async def test_a_released_log_resumes_from_its_mark_with_what_another_writer_appended(
        store, request, tmp_path):
    h = header()
    await store.create(h)
    await store.append(h.id, [event(1), event(2)])
    mark = await store.mark(h.id)
    assert mark is not None
    await store.release(h.id)
    other = make_store(request, store.name, tmp_path)  # another process, same log
    try:
        await other.load(h.id, repair=True)
        await other.append(h.id, [event(3), event(4)])
        await other.flush(h.id)
    finally:
        await other.close()
    assert await store.load_after(h.id, mark, repair=True) == [event(3), event(4)]
    await store.append(h.id, [event(5)])
    again = await store.mark(h.id)
    assert await store.load_after(h.id, again) == []
    assert (await store.load(h.id)).events == [event(i) for i in range(1, 6)]


async def test_a_replaced_log_is_not_resumed_from_an_old_mark(store):
    h = header()
    await store.create(h)
    await store.append(h.id, [event(1)])
    mark = await store.mark(h.id)
    await store.release(h.id)
    await store.put_raw(h.id, expected_bytes(h, [event(1, "rewritten"), event(2)]))
    assert await store.load_after(h.id, mark) is None
    assert (await store.load(h.id)).events == [event(1, "rewritten"), event(2)]


async def test_put_raw_stores_exactly_the_given_bytes(store):
    h = header("test:raw:ü")
    raw = expected_bytes(h, [event(i) for i in range(1, 40)])
    await store.put_raw(h.id, raw)
    assert await store.read_from(h.id, 0) == raw
    await store.append(h.id, [event(40)])
    assert await store.read_from(h.id, 0) == raw + dump_line(event(40))
    assert (await store.load(h.id)).events[-1] == event(40)


async def test_a_corrupted_line_is_reported_with_its_number(store, request, tmp_path):
    h = header()
    await store.create(h)
    await store.append(h.id, [event(1), event(2), event(3)])
    await store.release(h.id)
    if store.name == "jsonl":
        path = store.path(h.id)
        lines = path.read_bytes().split(b"\n")
        lines[2] = b'{"type":"user_message","broken'
        path.write_bytes(b"\n".join(lines))
    else:
        with psycopg.connect(request.getfixturevalue("pg_dsn")) as conn:
            conn.execute("UPDATE dsh_session_lines SET line = %s WHERE seq = 2",
                         (b'{"type":"user_message","broken\n',))
    with pytest.raises(SessionLogError, match="line 3 is corrupted"):
        await store.load(h.id)


async def test_postgres_appends_from_two_stores_never_share_a_sequence(pg_dsn):
    import asyncio

    a, b = PostgresSessionStore(pg_dsn), PostgresSessionStore(pg_dsn)
    h = header()
    await a.create(h)
    await asyncio.gather(*(s.append(h.id, [event(i)]) for i, s in
                           zip(range(1, 41), [a, b] * 20, strict=True)))
    raw = await b.read_from(h.id, 0)
    assert len(raw.splitlines()) == 41
    loaded = await b.load(h.id)
    assert sorted(e.seq for e in loaded.events) == list(range(1, 41))
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT seq, start, length(line) FROM dsh_session_lines "
                            "ORDER BY seq").fetchall()
    assert [r[0] for r in rows] == list(range(41))
    assert all(rows[i][1] + rows[i][2] == rows[i + 1][1] for i in range(40))
    await a.close()
    await b.close()


# -- dsh sessions copy ----------------------------------------------------------------------------

async def _seed(store: SessionStore, n: int, events: int = 3) -> dict[str, bytes]:
    out = {}
    for i in range(n):
        h = header(f"test:copy:{i}")
        await store.create(h)
        await store.append(h.id, [event(j, f"s{i}") for j in range(1, events + 1)])
        await store.release(h.id)
        out[h.id] = await store.read_from(h.id, 0)
    return out


async def test_copy_jsonl_to_postgres_and_back_is_byte_identical(tmp_path, pg_dsn):
    jsonl, pg = JsonlSessionStore(tmp_path / "a"), PostgresSessionStore(pg_dsn)
    seeded = await _seed(jsonl, 12)
    report = await copy_sessions(jsonl, pg, ids=None, force=False, backup_dir=tmp_path / "bk")
    assert sorted(report.copied) == sorted(seeded) and report.replaced == []
    for sid, raw in seeded.items():
        assert await pg.read_from(sid, 0) == raw
    again = await copy_sessions(jsonl, pg, ids=None, force=False, backup_dir=tmp_path / "bk")
    assert again.copied == [] and len(again.unchanged) == 12
    back = JsonlSessionStore(tmp_path / "b")
    await copy_sessions(pg, back, ids=None, force=False, backup_dir=tmp_path / "bk")
    for sid, raw in seeded.items():
        assert back.path(sid).read_bytes() == raw
    await pg.close()


async def test_copy_brings_a_grown_log_up_to_date_but_never_overwrites_a_different_one(
        tmp_path, pg_dsn):
    jsonl, pg = JsonlSessionStore(tmp_path / "a"), PostgresSessionStore(pg_dsn)
    seeded = await _seed(jsonl, 2)
    await copy_sessions(jsonl, pg, ids=None, force=False, backup_dir=tmp_path / "bk")
    await jsonl.append("test:copy:0", [event(9, "grown")])  # the source grew: a prefix
    await pg.append("test:copy:1", [event(9, "only in postgres")])  # the target diverged
    with pytest.raises(SessionLogError, match=r"holds 1 session\(s\) whose log differs.*"
                                              r"'test:copy:1'.*--force"):
        await copy_sessions(jsonl, pg, ids=None, force=False, backup_dir=tmp_path / "bk")
    assert await pg.read_from("test:copy:0", 0) == seeded["test:copy:0"], "nothing copied"
    diverged = await pg.read_from("test:copy:1", 0)
    report = await copy_sessions(jsonl, pg, ids=None, force=True, backup_dir=tmp_path / "bk")
    assert sorted(report.copied) == ["test:copy:0", "test:copy:1"]
    assert report.replaced == ["test:copy:1"]
    saved = next(report.backups.iterdir())
    assert saved.read_bytes() == diverged and saved.stat().st_mode & 0o777 == 0o600
    assert await pg.read_from("test:copy:0", 0) == jsonl.path("test:copy:0").read_bytes()
    await pg.close()


async def test_copy_refuses_a_corrupted_source_and_copies_nothing(tmp_path, pg_dsn):
    jsonl, pg = JsonlSessionStore(tmp_path / "a"), PostgresSessionStore(pg_dsn)
    await _seed(jsonl, 2)
    path = jsonl.path("test:copy:1")
    path.write_bytes(path.read_bytes().replace(b'"seq":2', b'"seq":"two"'))
    with pytest.raises(SessionLogError, match="line 3 is corrupted"):
        await copy_sessions(jsonl, pg, ids=None, force=False, backup_dir=tmp_path / "bk")
    assert await pg.list_ids() == []
    await pg.close()


async def test_copy_leaves_a_torn_final_line_behind(tmp_path, pg_dsn):
    jsonl, pg = JsonlSessionStore(tmp_path / "a"), PostgresSessionStore(pg_dsn)
    seeded = await _seed(jsonl, 1)
    path = jsonl.path("test:copy:0")
    path.write_bytes(path.read_bytes() + b'{"type":"user_mes')
    report = await copy_sessions(jsonl, pg, ids=["test:copy:0"], force=False,
                                 backup_dir=tmp_path / "bk")
    assert report.dropped_tails == len(b'{"type":"user_mes')
    assert await pg.read_from("test:copy:0", 0) == seeded["test:copy:0"]
    await pg.close()


def test_cli_sessions_copy(tmp_path, pg_dsn, capsys, monkeypatch):
    import asyncio

    from dsh_harness import Harness, cli, parse_config

    toml = f'home = "home"\n[storage]\ndsn = "{pg_dsn}"\n'
    loaded = parse_config(toml, "test.toml", tmp_path)
    seeded = asyncio.run(_seed(JsonlSessionStore(tmp_path / "home" / "sessions"), 3))
    monkeypatch.setattr(cli, "Harness", lambda _: Harness(loaded, load_entry_points=False))
    assert cli.main(["sessions", "copy", "--from", "jsonl", "--to", "postgres"]) == 0
    out = capsys.readouterr().out
    assert "copied 3 sessions from jsonl to postgres; 0 already identical; verified byte for " \
           "byte" in out
    assert 'sessions.store is still jsonl; set it to "postgres"' in out
    assert cli.main(["sessions", "copy", "--from", "jsonl", "--to", "mongo"]) == 1
    assert "--to: unknown session store 'mongo' (available: jsonl, postgres)" \
        in capsys.readouterr().err

    async def read_back():
        store = PostgresSessionStore(pg_dsn)
        try:
            return {sid: await store.read_from(sid, 0) for sid in await store.list_ids()}
        finally:
            await store.close()
    assert asyncio.run(read_back()) == seeded


def test_cli_sessions_copy_is_refused_while_dsh_run_holds_the_home(tmp_path, pg_dsn, capsys,
                                                                  monkeypatch):
    """Like ``storage copy``: a copy into the home's logs under a running ``dsh run`` would
    replace logs the run is appending to (its agents hold their old offsets)."""
    import asyncio
    import os

    from dsh_harness import Harness, cli, parse_config
    from dsh_harness.home_lock import HomeLock

    toml = f'home = "home"\n[storage]\ndsn = "{pg_dsn}"\n'
    loaded = parse_config(toml, "test.toml", tmp_path)
    home = tmp_path / "home"
    asyncio.run(_seed(PostgresSessionStore(pg_dsn), 1, events=4))
    live = asyncio.run(_seed(JsonlSessionStore(home / "sessions"), 1))
    monkeypatch.setattr(cli, "Harness", lambda _: Harness(loaded, load_entry_points=False))
    with HomeLock(home):
        assert cli.main(["sessions", "copy", "--from", "postgres", "--to", "jsonl",
                         "--force"]) == 1
        assert f"another dsh run (pid {os.getpid()}) is using the home {home}" \
            in capsys.readouterr().err
    assert (home / "sessions" / "test%3Acopy%3A0.jsonl").read_bytes() == live["test:copy:0"]
    assert not (home / "backups").exists()
    assert cli.main(["sessions", "copy", "--from", "postgres", "--to", "jsonl",
                     "--force"]) == 0
    assert (home / "sessions" / "test%3Acopy%3A0.jsonl").read_bytes() != live["test:copy:0"]


def test_config_needs_a_dsn_for_the_postgres_store(tmp_path):
    from dsh_harness import parse_config

    with pytest.raises(DshError, match=r'sessions.store is "postgres" but neither sessions.dsn'):
        parse_config('[sessions]\nstore = "postgres"\n', "test.toml", tmp_path)
    loaded = parse_config('[storage]\ndsn = "postgresql://a@h/db"\n[sessions]\n'
                          'store = "postgres"\n', "test.toml", tmp_path)
    assert loaded.config.sessions.dsn is None, "storage.dsn is used"
    json.dumps(loaded.config.model_dump(mode="json"))  # the DSN dumps masked, never raw
    assert "a@h" not in json.dumps(loaded.config.model_dump(mode="json"))


# -- the web UI on a postgres store ---------------------------------------------------------------

async def test_web_catalog_follows_a_postgres_log_by_its_tail(tmp_path, pg_dsn):
    """The index and a live page read only the bytes appended since (``read_from`` at the
    offset they had reached), as they do on JSONL files."""
    from dsh_harness.sessions.events import AssistantMessage, TurnEnd, TurnStart, Usage
    from dsh_harness.testing import ScriptedModelServer
    from dsh_harness.web.catalog import SessionCatalog
    from tests.harness.agent_kit import make_harness

    usage = Usage(uncached_input=100, cache_read=300, output=20, cost_usd=0.001)

    async def turn(h, sid: str, n: int, close: bool = True) -> None:
        s = await h.sessions.resume(sid) if await h.sessions.exists(sid) else \
            await h.sessions.create(sid, {})
        await s.record(TurnStart, turn=n, meta={"flow": "review"})
        await s.record(AssistantMessage, turn=n, content=f"answer {n}", usage=usage)
        if close:
            await s.record(TurnEnd, turn=n, reason="completed", usage=usage)
        await h.sessions.release(sid)

    with ScriptedModelServer() as server:
        h = make_harness(tmp_path, server.base_url,
                         f'[sessions]\nstore = "postgres"\ndsn = "{pg_dsn}"\n')
        store = h.sessions.store
        assert store.name == "postgres"
        reads: list[tuple[str, int]] = []
        real_read_from = store.read_from

        async def spy(sid, offset):
            reads.append((sid, offset))
            return await real_read_from(sid, offset)
        store.read_from = spy

        await turn(h, "t:live", 1, close=False)
        await turn(h, "t:other", 1)
        catalog = SessionCatalog(h)
        live = await catalog.log("t:live")
        first = live.events[0]
        assert len(live.events) == 2 and live.digest["open"]
        size = len(await real_read_from("t:live", 0))
        assert live.offset == size
        s = await h.sessions.resume("t:live")
        await s.record(TurnEnd, turn=1, reason="completed", usage=usage)
        await h.sessions.release("t:live")
        reads.clear()
        same = await catalog.log("t:live")
        assert same is live and same.events[0] is first and not same.digest["open"]
        assert reads == [("t:live", size)], "only the appended tail was read"

        entries = {e.id: e for e in await catalog.refresh()}
        assert entries["t:live"].turns == 1 and entries["t:other"].turns == 1
        at = entries["t:other"].offset
        await turn(h, "t:other", 2)
        reads.clear()
        entries = {e.id: e for e in await catalog.refresh()}
        assert entries["t:other"].turns == 2
        assert reads == [("t:other", at)], "the index reads the changed log's tail only"
        await h.close()


def test_only_the_newest_session_backups_of_a_store_are_kept(tmp_path):
    """``storage.backups_keep`` bounds session-copy backups too (whole logs, one folder each)."""
    from dsh_harness.sessions.copy import _prune_backups

    for day in range(1, 8):
        (tmp_path / f"202612{day:02d}T000000Z.postgres").mkdir()
    (tmp_path / "20261101T000000Z.jsonl").mkdir()
    _prune_backups(tmp_path, "postgres", 5)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["20261101T000000Z.jsonl",
                    *(f"202612{d:02d}T000000Z.postgres" for d in range(3, 8))]


def test_cli_sessions_copy_onto_a_database_with_live_replicas_is_refused(tmp_path, pg_dsn,
                                                                         capsys, monkeypatch):
    """Replicas on other hosts write the shared store (the home lock cannot see them): a copy
    with ``--force`` would replace the turns they wrote since; it is refused, naming them,
    while one is alive (a recent heartbeat) or holds a lease."""
    import asyncio

    from dsh_harness import Harness, cli, parse_config
    from dsh_harness.storage.postgres_backend import PostgresBackend

    toml = f'home = "home"\n[storage]\nbackend = "postgres"\ndsn = "{pg_dsn}"\n'
    loaded = parse_config(toml, "test.toml", tmp_path)
    asyncio.run(_seed(JsonlSessionStore(tmp_path / "home" / "sessions"), 2))
    monkeypatch.setattr(cli, "Harness", lambda _: Harness(loaded, load_entry_points=False))

    async def replica(action: str) -> None:
        backend = PostgresBackend(pg_dsn)
        leases = backend.leases("db-host:4242:abc123")
        try:
            if action == "beat":
                await leases.heartbeat()
            elif action == "lease":
                await leases.acquire("pr:demo:acme/shop#1", 60)
            else:
                await leases.retire()
        finally:
            await backend.close()

    async def copied() -> list[str]:
        store = PostgresSessionStore(pg_dsn)
        try:
            return await store.list_ids()
        finally:
            await store.close()

    for action in ("beat", "lease"):
        asyncio.run(replica(action))
        assert cli.main(["sessions", "copy", "--from", "jsonl", "--to", "postgres",
                         "--force"]) == 1
        err = capsys.readouterr().err
        assert "1 replica(s) are running on the postgres store's database " \
               "(db-host:4242:abc123" in err and "nothing was copied" in err
        assert asyncio.run(copied()) == []
        asyncio.run(replica("retire"))
    assert cli.main(["sessions", "copy", "--from", "jsonl", "--to", "postgres",
                     "--force"]) == 0
    assert len(asyncio.run(copied())) == 2


async def test_read_events_serves_a_released_session_from_memory_until_its_log_changes(
        tmp_path):
    """A reader after every turn (the PR summary) gets an evicted agent's session from memory
    while its log is unchanged, and the log read whole once another writer appended."""
    from dsh_harness.sessions.events import UserMessage
    from dsh_harness.sessions.service import SessionService

    service = SessionService(JsonlSessionStore(tmp_path / "sessions"))
    session = await service.create("test:read:1", {})
    await session.record(UserMessage, turn=1, content="first")
    await session.flush()
    await service.release("test:read:1", session)
    assert await service.read_events("test:read:1") is session.events
    other = JsonlSessionStore(tmp_path / "sessions")  # another process, same log
    try:
        loaded = await other.load("test:read:1", repair=True)
        await other.append("test:read:1", [event(loaded.events[-1].seq + 1, "other")])
        await other.flush("test:read:1")
    finally:
        await other.close()
    events = await service.read_events("test:read:1")
    assert events is not session.events
    assert events[0].content == "first" and events[-1].content.startswith("other")
    assert events == (await service.read("test:read:1")).events
