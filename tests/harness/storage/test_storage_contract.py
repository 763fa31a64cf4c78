"""One contract, every backend (json, sqlite, postgres): each backend must pass this file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from dsh_harness import DomainSpec, StorageError
from dsh_harness.storage import Domain
from dsh_harness.storage.json_backend import JsonBackend
from dsh_harness.storage.sqlite_backend import SqliteBackend
from tests.harness.backend_kit import NAMES, make_backend


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int
    tags: list[str] = []


class Other(BaseModel):
    label: str


SPEC = DomainSpec(name="demo", version=1, tables={"items": Item, "others": Other})


@pytest.fixture(params=NAMES)
async def backend(request, tmp_path: Path):
    made = make_backend(request, request.param, tmp_path / "storage")
    yield made
    await made.close()


async def test_put_get_delete_list(backend):
    d = await Domain.open(SPEC, backend)
    assert await d.get("items", "a") is None
    await d.put("items", "a", Item(n=1))
    await d.put("items", "b", Item(n=2, tags=["x"]))
    await d.put("others", "a", Other(label="same key, other table"))
    assert await d.get("items", "a") == Item(n=1)
    assert list((await d.all("items")).keys()) == ["a", "b"]
    assert await d.delete("items", "a") is True
    assert await d.delete("items", "a") is False
    assert await d.get("items", "a") is None
    assert (await d.get("others", "a")).label == "same key, other table"
    await d.close()


async def test_update_read_modify_write_and_delete(backend):
    d = await Domain.open(SPEC, backend)
    t = d.table("items")
    assert (await t.update("k", lambda cur: Item(n=(cur.n if cur else 0) + 1))).n == 1
    assert (await t.update("k", lambda cur: Item(n=cur.n + 1))).n == 2

    async def async_fn(cur):
        return Item(n=cur.n * 10)
    assert (await t.update("k", async_fn)).n == 20
    assert await t.update("k", lambda cur: None) is None
    assert await t.get("k") is None
    await d.close()


async def test_reads_return_copies_not_aliases(backend):
    d = await Domain.open(SPEC, backend)
    rec = Item(n=1, tags=["a"])
    await d.put("items", "k", rec)
    rec.tags.append("mutated after put")
    got = await d.get("items", "k")
    assert got.tags == ["a"]
    got.tags.append("mutated after get")
    assert (await d.get("items", "k")).tags == ["a"]
    everything = await d.all("items")
    everything["k"].tags.clear()
    assert (await d.get("items", "k")).tags == ["a"]
    await d.close()


async def test_persists_across_reopen(backend):
    d = await Domain.open(SPEC, backend)
    await d.put("items", "k", Item(n=7))
    await d.close()
    d2 = await Domain.open(SPEC, backend)
    assert (await d2.get("items", "k")).n == 7
    await d2.close()


async def test_wrong_record_type_and_unknown_table_rejected(backend):
    d = await Domain.open(SPEC, backend)
    with pytest.raises(StorageError, match="expected Item, got Other"):
        await d.put("items", "k", Other(label="x"))
    with pytest.raises(StorageError, match="no table 'nope'"):
        await d.get("nope", "k")
    await d.close()


async def test_version_mismatch_is_an_error(backend):
    d = await Domain.open(SPEC, backend)
    await d.put("items", "k", Item(n=1))
    await d.close()
    v2 = DomainSpec(name="demo", version=2, tables=SPEC.tables)
    with pytest.raises(StorageError, match="stored version 1 differs from declared version 2"):
        await Domain.open(v2, backend)


class StrictItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int
    required_new_field: str


async def test_invalid_record_at_open_names_domain_table_key_and_keeps_data(backend, tmp_path):
    d = await Domain.open(SPEC, backend)
    await d.put("items", "good", Item(n=1))
    await d.put("items", "bad-one", Item(n=2))
    await d.close()
    stricter = DomainSpec(name="demo", version=1, tables={"items": StrictItem, "others": Other})
    before = {p.name: p.read_bytes() for p in (tmp_path / "storage").iterdir() if p.is_file()}
    with pytest.raises(StorageError) as exc:
        await Domain.open(stricter, backend)
    msg = str(exc.value)
    assert "domain 'demo'" in msg and "table 'items'" in msg and "key 'bad-one'" in msg
    assert "required_new_field" in msg
    after = {p.name: p.read_bytes() for p in (tmp_path / "storage").iterdir() if p.is_file()
             if not p.name.endswith(("-wal", "-shm"))}
    for name, data in after.items():
        if name.endswith(".json"):
            assert before[name] == data, "the file must never be rewritten"
    d = await Domain.open(SPEC, backend)
    assert len(await d.all("items")) == 2
    await d.close()


async def test_concurrent_writers_from_many_tasks(backend):
    d = await Domain.open(SPEC, backend)
    t = d.table("items")
    await t.put("counter", Item(n=0))

    async def bump(i: int):
        await t.update("counter", lambda cur: Item(n=cur.n + 1))
        await t.put(f"k{i:03d}", Item(n=i))

    await asyncio.gather(*(bump(i) for i in range(60)))
    assert (await t.get("counter")).n == 60
    assert len(await t.all()) == 61
    await d.close()
    d2 = await Domain.open(SPEC, backend)
    assert (await d2.get("items", "counter")).n == 60
    await d2.close()


async def test_write_many_is_atomic_batch(backend):
    d = await Domain.open(SPEC, backend)
    await d.write_many([("items", f"k{i}", Item(n=i)) for i in range(100)])
    assert len(await d.all("items")) == 100
    await d.write_many([("items", f"k{i}", None) for i in range(50)])
    assert len(await d.all("items")) == 50
    await d.close()


async def test_list_domains(backend):
    assert await backend.list_domains() == []
    d = await Domain.open(SPEC, backend)
    await d.put("items", "k", Item(n=1))
    await d.close()
    assert await backend.list_domains() == ["demo"]


async def test_json_backend_refuses_corrupted_file_and_never_overwrites(tmp_path):
    backend = JsonBackend(tmp_path)
    d = await Domain.open(SPEC, backend)
    await d.put("items", "k", Item(n=1))
    await d.close()
    path = tmp_path / "demo.json"
    truncated = path.read_bytes()[:-7]
    path.write_bytes(truncated)
    with pytest.raises(StorageError, match="corrupted or truncated"):
        await Domain.open(SPEC, backend)
    assert path.read_bytes() == truncated


async def test_json_file_is_private_and_readable(tmp_path):
    backend = JsonBackend(tmp_path)
    d = await Domain.open(SPEC, backend)
    await d.put("items", "k", Item(n=1))
    await d.close()
    path = tmp_path / "demo.json"
    assert path.stat().st_mode & 0o777 == 0o600
    doc = json.loads(path.read_text())
    assert doc == {"domain": "demo", "version": 1,
                   "tables": {"items": {"k": {"n": 1, "tags": []}}, "others": {}}}


async def test_json_backend_sees_writes_of_another_process_handle(tmp_path):
    # `dsh web` reads while `dsh run` writes: a second handle must notice the replaced file.
    reader = await Domain.open(SPEC, JsonBackend(tmp_path))
    writer = await Domain.open(SPEC, JsonBackend(tmp_path))
    await writer.put("items", "k", Item(n=5))
    assert (await reader.get("items", "k")).n == 5


async def test_sqlite_rejects_non_database_file(tmp_path):
    (tmp_path / "dsh.sqlite3").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StorageError, match="is damaged"):
        await Domain.open(SPEC, SqliteBackend(tmp_path))
    assert (tmp_path / "dsh.sqlite3").read_bytes() == b"this is not sqlite" * 100


def test_domain_spec_rejects_unsafe_names():
    with pytest.raises(StorageError):
        DomainSpec(name='x"; drop', version=1, tables={})
    with pytest.raises(StorageError):
        DomainSpec(name="ok", version=0, tables={})


async def test_transaction_reads_its_own_writes_and_commits_once(backend):
    d = await Domain.open(SPEC, backend)
    await d.put("items", "a", Item(n=1))
    async with d.transaction() as tx:
        a = await tx.get("items", "a")
        tx.put("items", "a", Item(n=a.n + 1))
        assert (await tx.get("items", "a")).n == 2, "reads see the block's own writes"
        assert (await tx.update("items", "b", lambda cur: Item(n=10 if cur is None else 0))).n \
            == 10
        tx.put("others", "x", Other(label="another table, same write"))
        tx.delete("items", "gone")
        assert await d.get("items", "a") == Item(n=1), "nothing is visible before the commit"
    assert (await d.get("items", "a")).n == 2 and (await d.get("items", "b")).n == 10
    assert (await d.get("others", "x")).label.startswith("another")
    await d.close()


async def test_transaction_that_raises_writes_nothing(backend):
    d = await Domain.open(SPEC, backend)
    await d.put("items", "a", Item(n=1))
    with pytest.raises(RuntimeError):
        async with d.transaction() as tx:
            tx.put("items", "a", Item(n=99))
            tx.put("items", "new", Item(n=5))
            raise RuntimeError("the caller changed its mind")
    assert (await d.get("items", "a")).n == 1 and await d.get("items", "new") is None
    with pytest.raises(StorageError, match="expected Item"):
        async with d.transaction() as tx:
            tx.put("items", "a", Other(label="wrong type"))
    await d.close()


async def test_transactions_serialize_with_other_writers(backend):
    d = await Domain.open(SPEC, backend)
    await d.put("items", "counter", Item(n=0))

    async def bump_in_tx(i: int):
        async with d.transaction() as tx:
            cur = await tx.get("items", "counter")
            await asyncio.sleep(0)   # another task runs here; the lock keeps it out
            tx.put("items", "counter", Item(n=cur.n + 1))
            tx.put("items", f"t{i}", Item(n=i))

    async def bump_plain():
        await d.update("items", "counter", lambda cur: Item(n=cur.n + 1))

    await asyncio.gather(*(bump_in_tx(i) for i in range(20)), *(bump_plain() for _ in range(20)))
    assert (await d.get("items", "counter")).n == 40
    await d.close()


class ItemV2(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int
    tags: list[str] = []


def _v1_to_v2(data):
    # v2 renames n -> count and moves every "others" label into a tag of item "labels".
    items = {k: {"count": v["n"], "tags": v.get("tags", [])} for k, v in data["items"].items()}
    items["labels"] = {"count": 0, "tags": sorted(v["label"] for v in data["others"].values())}
    return {"items": items, "others": {}}


SPEC_V2 = DomainSpec(name="demo", version=2, tables={"items": ItemV2, "others": Other},
                     migrations={1: _v1_to_v2})


async def test_migration_runs_on_open_once_and_atomically(backend):
    d = await Domain.open(SPEC, backend)
    await d.put("items", "a", Item(n=3, tags=["t"]))
    await d.put("others", "o", Other(label="moved"))
    await d.close()
    d2 = await Domain.open(SPEC_V2, backend)
    assert await d2.get("items", "a") == ItemV2(count=3, tags=["t"])
    assert (await d2.get("items", "labels")).tags == ["moved"]
    assert await d2.all("others") == {}
    await d2.close()
    d3 = await Domain.open(SPEC_V2, backend)        # already v2: no second migration
    assert (await d3.get("items", "a")).count == 3
    await d3.close()
    with pytest.raises(StorageError, match="stored version 2 differs from declared version 1"):
        await Domain.open(SPEC, backend)           # never downgraded silently


async def test_failed_migration_leaves_the_store_untouched(backend):
    d = await Domain.open(SPEC, backend)
    await d.put("items", "a", Item(n=3))
    await d.close()

    def broken(data):
        return {"items": {"a": {"count": "not a number"}}, "others": {}}
    bad = DomainSpec(name="demo", version=2, tables=SPEC_V2.tables, migrations={1: broken})
    with pytest.raises(StorageError, match="key 'a'"):
        await Domain.open(bad, backend)
    d = await Domain.open(SPEC, backend)
    assert (await d.get("items", "a")).n == 3, "still version 1, data intact"
    await d.close()
