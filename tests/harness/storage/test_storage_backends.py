"""The storage backends' own promises, beyond the shared contract (test_storage_contract.py).

What a backend refuses (and leaves untouched), the exact bytes and modes it leaves on disk,
that ``replace_all`` replaces only the declared tables, that deleting a missing key is a no-op,
and that a failed SQLite write rolls back.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pydantic import BaseModel

from dsh_harness import DomainSpec, StorageError
from dsh_harness.storage import Domain
from dsh_harness.storage.json_backend import JsonBackend
from dsh_harness.storage.sqlite_backend import SqliteBackend
from tests.harness.backend_kit import NAMES, make_backend


class Item(BaseModel):
    n: int
    tags: list[str] = []


SPEC = DomainSpec(name="demo", version=1, tables={"items": Item})
# The same domain as a newer (or older) release declares it: one more table.
WIDE = DomainSpec(name="demo", version=1, tables={"items": Item, "legacy": Item})


@pytest.fixture(params=NAMES)
async def backend(request, tmp_path: Path):
    made = make_backend(request, request.param, tmp_path / "storage")
    yield made
    await made.close()


def text(item: Item) -> str:
    return json.dumps(item.model_dump(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# -- both backends ------------------------------------------------------------------------------

async def test_replace_all_replaces_declared_tables_and_keeps_undeclared_ones(backend):
    wide = await Domain.open(WIDE, backend)
    await wide.write_many([("items", "a", Item(n=1)), ("items", "b", Item(n=2)),
                           ("legacy", "x", Item(n=9))])
    await wide.close()

    narrow = await Domain.open(SPEC, backend)   # knows nothing of "legacy"
    await narrow.replace_all({"items": {"c": text(Item(n=3))}})
    assert await narrow.all("items") == {"c": Item(n=3)}
    await narrow.put("items", "d", Item(n=4))   # an ordinary write keeps "legacy" as well
    await narrow.close()

    again = await Domain.open(WIDE, backend)
    assert await again.all("items") == {"c": Item(n=3), "d": Item(n=4)}
    assert await again.all("legacy") == {"x": Item(n=9)}
    await again.replace_all({})                 # a declared table left out becomes empty
    assert await again.all("items") == {} and await again.all("legacy") == {}
    await again.close()


async def test_replace_all_stamps_the_version_on_an_empty_store(backend):
    stored = await backend.open(SPEC)
    assert await stored.stored_version() is None
    await stored.replace_all(1, {"items": {"k": text(Item(n=1))}})
    assert await stored.stored_version() == 1
    assert await stored.items("items") == [("k", text(Item(n=1)))]
    await stored.close()
    reopened = await backend.open(SPEC)
    assert await reopened.stored_version() == 1
    await reopened.close()


async def test_deleting_a_missing_key_changes_nothing(backend):
    stored = await backend.open(SPEC)
    await stored.write(1, [("items", "k", text(Item(n=1)))])
    await stored.write(1, [("items", "missing", None)])
    await stored.write(1, [("items", "k", None), ("items", "k", None)])
    assert await stored.items("items") == []
    await stored.write(1, [("items", "k", text(Item(n=2))), ("items", "gone", None)])
    assert await stored.items("items") == [("k", text(Item(n=2)))]
    await stored.close()
    d = await Domain.open(SPEC, backend)
    assert await d.delete("items", "missing") is False
    await d.write_many([("items", "missing", None)])
    assert await d.all("items") == {"k": Item(n=2)}
    await d.close()


async def test_storage_directory_is_private_and_created_with_parents(tmp_path):
    for name, cls in {"json": JsonBackend, "sqlite": SqliteBackend}.items():
        directory = tmp_path / name / "deep" / "storage"
        stored = await cls(directory).open(SPEC)
        await stored.write(1, [("items", "k", text(Item(n=1)))])
        await stored.close()
        assert directory.stat().st_mode & 0o777 == 0o700, name
        files = [p for p in directory.iterdir() if p.suffix in (".json", ".sqlite3")]
        assert [p.name for p in files] == [{"json": "demo.json", "sqlite": "dsh.sqlite3"}[name]]
        assert files[0].stat().st_mode & 0o777 == 0o600, name


# -- json ---------------------------------------------------------------------------------------

NOT_A_DOMAIN_FILE = ("domain 'demo': {path} is not a dsh domain file for this domain (expected "
                     "keys domain, version, tables); it was left untouched")


@pytest.mark.parametrize("content", [
    "[]",
    '"demo"',
    "null",
    '{"domain": "other", "version": 1, "tables": {}}',
    '{"version": 1, "tables": {}}',
    '{"domain": "demo", "version": "1", "tables": {}}',
    '{"domain": "demo", "version": 1.5, "tables": {}}',
    '{"domain": "demo", "tables": {}}',
    '{"domain": "demo", "version": 1}',
    '{"domain": "demo", "version": 1, "tables": []}',
    '{"domain": "demo", "version": 1, "tables": {"items": []}}',
    '{"domain": "demo", "version": 1, "tables": {"items": {}, "other": "x"}}',
])
async def test_json_refuses_valid_json_of_the_wrong_shape(tmp_path, content):
    path = tmp_path / "demo.json"
    path.write_text(content)
    with pytest.raises(StorageError) as exc:
        await JsonBackend(tmp_path).open(SPEC)
    assert str(exc.value) == NOT_A_DOMAIN_FILE.format(path=path)
    assert path.read_text() == content


@pytest.mark.parametrize("content", [b'{"domain": "demo", "vers', b"\xff\xfe{}", b""])
async def test_json_refuses_a_file_that_does_not_parse(tmp_path, content):
    path = tmp_path / "demo.json"
    path.write_bytes(content)
    with pytest.raises(StorageError) as exc:
        await JsonBackend(tmp_path).open(SPEC)
    msg = str(exc.value)
    assert msg.startswith(f"domain 'demo': {path} is corrupted or truncated (")
    assert msg.endswith("); it was left untouched - restore it from a backup or move it away")
    assert path.read_bytes() == content


async def test_json_file_layout_is_exact(tmp_path):
    # One record per line, sorted tables and keys, UTF-8 kept as is: files diff well.
    stored = await JsonBackend(tmp_path).open(WIDE)
    await stored.write(1, [("items", "é", text(Item(n=2, tags=["ü"]))),
                           ("items", "a", text(Item(n=1)))])
    assert (tmp_path / "demo.json").read_text(encoding="utf-8") == (
        '{"domain": "demo", "version": 1, "tables": {\n'
        '"items": {\n'
        '  "a": {"n":1,"tags":[]},\n'
        '  "é": {"n":2,"tags":["ü"]}\n'
        '},\n'
        '"legacy": {}\n'
        '}}\n')


async def test_json_reads_hand_written_files_as_canonical_text(tmp_path):
    (tmp_path / "demo.json").write_text(
        '{"domain": "demo", "version": 1, "tables": {"items": '
        '{"k": {"tags": ["ü", "a"], "n": 1}}}}', encoding="utf-8")
    stored = await JsonBackend(tmp_path).open(SPEC)
    assert await stored.get("items", "k") == '{"n":1,"tags":["ü","a"]}'
    assert await stored.items("items") == [("k", '{"n":1,"tags":["ü","a"]}')]


async def test_json_notices_a_file_removed_behind_its_back(tmp_path):
    writer = await JsonBackend(tmp_path).open(SPEC)
    await writer.write(1, [("items", "k", text(Item(n=1)))])
    reader = await JsonBackend(tmp_path).open(SPEC)   # loaded the file at open
    (tmp_path / "demo.json").unlink()
    for stored in (writer, reader):
        assert await stored.get("items", "k") is None
        assert await stored.stored_version() is None


async def test_json_lists_only_visible_domain_files(tmp_path):
    backend = JsonBackend(tmp_path)
    await (await backend.open(SPEC)).write(1, [])
    (tmp_path / ".demo.json.tmp-1").write_text("{}")
    (tmp_path / ".hidden.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("x")
    assert await backend.list_domains() == ["demo"]


# -- sqlite -------------------------------------------------------------------------------------

async def test_sqlite_database_is_in_wal_mode_with_its_layout_stamped(tmp_path):
    stored = await SqliteBackend(tmp_path).open(SPEC)
    # Opening (and reading) an absent database creates nothing; the first write creates it.
    assert await stored.items(next(iter(SPEC.tables))) == []
    assert not (tmp_path / "dsh.sqlite3").exists()
    await stored.write(SPEC.version, [])
    await stored.close()
    db = sqlite3.connect(tmp_path / "dsh.sqlite3")
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA user_version").fetchone() == (1,)
        assert db.execute("SELECT name, version FROM dsh_domains").fetchall() == [
            (SPEC.name, SPEC.version)]
    finally:
        db.close()


async def test_sqlite_refuses_another_layout_and_leaves_it_alone(tmp_path):
    path = tmp_path / "dsh.sqlite3"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=2")
    db.close()
    before = path.read_bytes()
    with pytest.raises(StorageError) as exc:
        await SqliteBackend(tmp_path).open(SPEC)
    assert str(exc.value) == f"{path}: storage layout 2 is not supported (this dsh reads layout 1)"
    assert path.read_bytes() == before


async def test_sqlite_refuses_a_non_database_file(tmp_path):
    path = tmp_path / "dsh.sqlite3"
    path.write_bytes(b"not sqlite" * 200)
    with pytest.raises(StorageError) as exc:
        await SqliteBackend(tmp_path).open(SPEC)
    assert str(exc.value) == (f"{path} is damaged (SQLite: file is not a database); it was left"
                              " untouched - restore it from a backup or move it away")


async def test_sqlite_reports_a_path_it_cannot_open(tmp_path):
    (tmp_path / "dsh.sqlite3").mkdir()
    with pytest.raises(StorageError) as exc:
        await SqliteBackend(tmp_path).open(SPEC)
    assert str(exc.value) == f"cannot open {tmp_path / 'dsh.sqlite3'}: unable to open database file"


async def test_sqlite_failed_write_rolls_back_and_the_next_one_works(tmp_path):
    stored = await SqliteBackend(tmp_path).open(SPEC)
    await stored.write(1, [("items", "k", text(Item(n=1)))])
    with pytest.raises(StorageError, match="no such table"):
        # The first op succeeds inside the transaction, the second fails: neither may stay.
        await stored.write(1, [("items", "k", text(Item(n=2))), ("undeclared", "x", "{}")])
    assert await stored.items("items") == [("k", text(Item(n=1)))]
    await stored.write(1, [("items", "j", text(Item(n=3)))])
    assert [k for k, _ in await stored.items("items")] == ["j", "k"]
    await stored.close()


@pytest.mark.parametrize("backend_cls", [SqliteBackend, JsonBackend])
async def test_a_reader_of_an_absent_store_sees_what_a_writer_creates_later(tmp_path,
                                                                             backend_cls):
    """A reader (dsh web, status) opened before the store exists creates
    nothing, reads empty, and then sees the records a later writer (dsh run) stores."""
    directory = tmp_path / "storage"
    reader = await Domain.open(SPEC, backend_cls(directory))
    assert await reader.all("items") == {}
    assert not directory.exists()
    writer = await Domain.open(SPEC, backend_cls(directory))
    await writer.put("items", "a", Item(n=1))
    await writer.close()
    assert set(await reader.all("items")) == {"a"}
    await reader.close()


LEAKER = """
import asyncio, sys
from pathlib import Path
from dsh_harness.storage import Domain
from dsh_harness.storage.sqlite_backend import SqliteBackend
from tests.harness.storage.test_storage_backends import SPEC, Item

async def main():
    domain = await Domain.open(SPEC, SqliteBackend(Path(sys.argv[1])))
    await domain.put("items", "a", Item(n=1))
    leaked.append(domain)   # never closed, still referenced: its thread outlives the loop

leaked = []
asyncio.run(main())
print("loop done", flush=True)
"""


def test_an_unclosed_sqlite_connection_cannot_keep_the_process_alive(tmp_path):
    """Aiosqlite's worker thread was not a daemon, so a test (or a command)
    that failed before closing its store hung at interpreter exit instead of ending."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    try:
        proc = subprocess.run([sys.executable, "-c", LEAKER, str(tmp_path)], cwd=root,
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the process hung at exit on an unclosed aiosqlite connection")
    assert proc.returncode == 0 and "loop done" in proc.stdout, proc.stderr
