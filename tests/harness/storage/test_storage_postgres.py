"""The postgres backend's own promises, beyond the shared contract (test_storage_contract.py):
writers in different processes are serialized by the database, ``Domain.transaction()`` is one
database transaction, another layout is refused untouched, a server that cannot be reached is
reported without the DSN's password, and a restarted server costs a reconnect, not an error.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psycopg
import pytest
from pydantic import BaseModel

from dsh_harness import DomainSpec, Harness, StorageError, hookimpl, parse_config
from dsh_harness.storage import Domain
from dsh_harness.storage.postgres_backend import PostgresBackend


class Item(BaseModel):
    n: int


SPEC = DomainSpec(name="demo", version=1, tables={"items": Item})


def text(item: Item) -> str:
    return json.dumps(item.model_dump(), sort_keys=True, separators=(",", ":"))


async def test_writers_with_separate_pools_are_serialized_by_the_database(pg_dsn):
    """Two backends are two processes as far as the database knows: their read-modify-writes
    of one record must not lose an update (the advisory lock, not the asyncio lock)."""
    backends = [PostgresBackend(pg_dsn), PostgresBackend(pg_dsn)]
    domains = [await Domain.open(SPEC, b) for b in backends]
    await domains[0].put("items", "counter", Item(n=0))

    async def bump(d: Domain) -> None:
        async with d.transaction() as tx:
            cur = await tx.get("items", "counter")
            await asyncio.sleep(0.001)  # the other "process" runs its transaction here
            tx.put("items", "counter", Item(n=cur.n + 1))

    async def bump_update(d: Domain) -> None:
        await d.update("items", "counter", lambda cur: Item(n=cur.n + 1))

    await asyncio.gather(*(bump(domains[i % 2]) for i in range(30)),
                         *(bump_update(domains[i % 2]) for i in range(30)))
    assert (await domains[1].get("items", "counter")).n == 60
    for d, b in zip(domains, backends, strict=True):
        await d.close()
        await b.close()


async def test_a_transaction_is_invisible_to_other_connections_until_it_commits(pg_dsn):
    backend = PostgresBackend(pg_dsn)
    d = await Domain.open(SPEC, backend)
    await d.put("items", "a", Item(n=1))
    seen_inside: list[int] = []
    async with d.transaction() as tx:
        tx.put("items", "a", Item(n=2))
        tx.put("items", "b", Item(n=3))
        with psycopg.connect(pg_dsn) as other:
            seen_inside = [r[0] for r in other.execute(
                "SELECT value FROM dsh_records WHERE domain = 'demo' ORDER BY key").fetchall()]
    assert seen_inside == [text(Item(n=1))]
    with psycopg.connect(pg_dsn) as other:
        rows = other.execute("SELECT key, value FROM dsh_records WHERE domain = 'demo' "
                             "ORDER BY key").fetchall()
    assert rows == [("a", text(Item(n=2))), ("b", text(Item(n=3)))]
    await d.close()
    await backend.close()


async def test_a_failed_statement_rolls_back_the_whole_write(pg_dsn):
    backend = PostgresBackend(pg_dsn)
    stored = await backend.open(SPEC)
    await stored.write(1, [("items", "k", text(Item(n=1)))])
    with pytest.raises(StorageError, match="demo"):
        # A NUL character cannot be stored in a text column: the second op fails the write.
        await stored.write(1, [("items", "k", text(Item(n=2))), ("items", "bad\x00", "{}")])
    assert await stored.items("items") == [("k", text(Item(n=1)))]
    await stored.write(1, [("items", "j", text(Item(n=3)))])
    assert [k for k, _ in await stored.items("items")] == ["j", "k"]
    await backend.close()


async def test_another_layout_is_refused_and_left_alone(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE dsh_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO dsh_meta VALUES ('storage_layout', '2')")
    backend = PostgresBackend(pg_dsn)
    with pytest.raises(StorageError, match="storage layout 2 is not supported"):
        await backend.open(SPEC)
    await backend.close()
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT value FROM dsh_meta").fetchall() == [("2",)]
        assert conn.execute("SELECT to_regclass('dsh_records')").fetchone() == (None,)


async def test_an_unreachable_server_is_named_without_the_password(postgres_cluster):
    dsn = f"postgresql://someone:s3cret-pass@127.0.0.1:{postgres_cluster.port}/no_such_db"
    backend = PostgresBackend(dsn)
    with pytest.raises(StorageError) as exc:
        await backend.open(SPEC)
    message = str(exc.value)
    assert message.startswith(
        f"cannot connect to PostgreSQL someone@127.0.0.1:{postgres_cluster.port}/no_such_db: ")
    assert "s3cret-pass" not in message and "s3cret-pass" not in repr(exc.value.__cause__)


async def test_terminated_connections_are_replaced_on_next_use(pg_dsn):
    """An operator's pg_terminate_backend (or a server restart) closes the pool's connections;
    the next read gets a fresh one instead of an error."""
    backend = PostgresBackend(pg_dsn)
    d = await Domain.open(SPEC, backend)
    await d.put("items", "k", Item(n=1))
    dbname = pg_dsn.rsplit("/", 1)[1]
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,)).fetchone()[0]
    assert killed >= 1
    assert (await d.get("items", "k")).n == 1
    await d.put("items", "k", Item(n=2))
    assert (await d.get("items", "k")).n == 2
    await d.close()
    await backend.close()


def test_config_requires_a_dsn_for_the_postgres_backend(tmp_path):
    from dsh_harness.config import load_config

    path = tmp_path / "dsh.toml"
    path.write_text('[storage]\nroutes = { reviewer = "postgres" }\n')
    with pytest.raises(Exception, match=r'routes.reviewer is "postgres" but dsn is not set'):
        load_config(path)


# -- storage copy to and from postgres ------------------------------------------------------------

class Rec(BaseModel):
    n: int
    text: str


class DeclaresDomain:
    @hookimpl
    def dsh_storage_domains(self):
        return DomainSpec(name="bulk", version=2, tables={"recs": Rec, "meta": Rec})


def make_harness(tmp_path: Path, dsn: str, backend: str = "sqlite") -> Harness:
    toml = f'home = "home"\n[storage]\nbackend = "{backend}"\ndsn = "${{TEST_DSN}}"\n'
    loaded = parse_config(toml, "test.toml", tmp_path, env={"TEST_DSN": dsn})
    return Harness(loaded, load_entry_points=False, plugins=[("bulk", DeclaresDomain())])


async def test_copy_sqlite_to_postgres_to_json_round_trips_every_record(tmp_path, pg_dsn):
    h = make_harness(tmp_path, pg_dsn)
    domain = await h.storage.domain("bulk")
    await domain.write_many(
        [("recs", f"key-{i:04d}", Rec(n=i, text=f"ünïcode {i} \"q\" \\ 完成")) for i in range(1500)]
        + [("meta", "m", Rec(n=-1, text="meta"))])
    original = await domain.export()
    await h.close()

    h = make_harness(tmp_path, pg_dsn)
    assert (await h.storage.copy("bulk", "sqlite", "postgres")).records == 1501
    assert (await h.storage.copy("bulk", "postgres", "json")).records == 1501
    back = await h.storage.open_on("bulk", "json")
    assert await back.export() == original
    await back.close()
    await h.close()
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT version FROM dsh_domains WHERE name = 'bulk'").fetchone() \
            == (2,)


async def test_copy_onto_a_postgres_domain_that_holds_records_needs_force(tmp_path, pg_dsn):
    h = make_harness(tmp_path, pg_dsn)
    await (await h.storage.domain("bulk")).put("recs", "a", Rec(n=1, text="a"))
    dst = await h.storage.open_on("bulk", "postgres")
    await dst.put("recs", "stale", Rec(n=9, text="gone after copy"))
    await dst.close()
    with pytest.raises(StorageError, match=r"postgres already holds 1 records of 'bulk'"):
        await h.storage.copy("bulk", "sqlite", "postgres")
    report = await h.storage.copy("bulk", "sqlite", "postgres", force=True)
    assert json.loads(report.backup.read_text())["tables"]["recs"] == {
        "stale": {"n": 9, "text": "gone after copy"}}
    dst = await h.storage.open_on("bulk", "postgres")
    assert list(await dst.all("recs")) == ["a"]
    await dst.close()
    await h.close()


def test_cli_copy_to_postgres_then_run_on_it(tmp_path, pg_dsn, capsys, monkeypatch):
    from dsh_harness import cli

    async def seed():
        h = make_harness(tmp_path, pg_dsn)
        await (await h.storage.domain("bulk")).put("recs", "k", Rec(n=5, text="five"))
        await h.close()
    asyncio.run(seed())
    monkeypatch.setattr(cli, "Harness", lambda loaded: make_harness(tmp_path, pg_dsn))
    assert cli.main(["storage", "copy", "bulk", "--from", "sqlite", "--to", "postgres"]) == 0
    out = capsys.readouterr().out
    assert "copied 1 records of bulk from sqlite to postgres; verified record by record" in out

    async def read_on_postgres():
        h = make_harness(tmp_path, pg_dsn, backend="postgres")
        try:
            return await (await h.storage.domain("bulk")).get("recs", "k")
        finally:
            await h.close()
    assert asyncio.run(read_on_postgres()) == Rec(n=5, text="five")


async def test_concurrent_first_uses_open_one_pool(pg_dsn):
    """Tasks that all start with a cold backend (a replica's first tick) share one pool; a
    second pool would be dropped unclosed, its connections and worker tasks leaked."""
    from dsh_harness.sessions.postgres_store import PostgresSessionStore

    backend, store = PostgresBackend(pg_dsn), PostgresSessionStore(pg_dsn)
    pools = await asyncio.gather(*(backend.pool() for _ in range(8)))
    assert len({id(p) for p in pools}) == 1
    got = await asyncio.gather(*(store._get_pool() for _ in range(8)))
    assert len({id(p) for p in got}) == 1
    await backend.close()
    await store.close()


async def test_a_process_frozen_inside_a_transaction_does_not_stall_the_others(pg_dsn,
                                                                              monkeypatch):
    """A replica stopped (SIGSTOP) while its transaction holds the domain's lock: the server
    ends that session after ``IDLE_IN_TRANSACTION_S`` and the other writers go on."""
    from dsh_harness.storage import postgres

    monkeypatch.setattr(postgres, "IDLE_IN_TRANSACTION_S", 0.5)
    frozen, other = PostgresBackend(pg_dsn), PostgresBackend(pg_dsn)
    a, b = await Domain.open(SPEC, frozen), await Domain.open(SPEC, other)
    try:
        with pytest.raises(StorageError):
            async with a.transaction() as tx:
                tx.put("items", "k", Item(n=1))
                # Frozen here, holding the lock: the other replica's write must not wait
                # for it (it waits for the server to end this session).
                await asyncio.wait_for(b.put("items", "k", Item(n=2)), 30)
        assert await b.get("items", "k") == Item(n=2)
    finally:
        await a.close()
        await b.close()
        await frozen.close()
        await other.close()
