"""`storage copy` between backends, through the harness and the CLI."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from dsh_harness import DomainSpec, Harness, StorageError, hookimpl, parse_config


class Rec(BaseModel):
    n: int
    text: str
    nested: dict[str, list[int]] = {}


class DeclaresDomain:
    @hookimpl
    def dsh_storage_domains(self):
        return DomainSpec(name="bulk", version=3, tables={"recs": Rec, "meta": Rec})


def make_harness(tmp_path: Path, backend: str = "json") -> Harness:
    loaded = parse_config(f'home = "home"\n[storage]\nbackend = "{backend}"\n', "test.toml",
                          tmp_path)
    return Harness(loaded, load_entry_points=False, plugins=[("bulk", DeclaresDomain())])


@pytest.mark.slow
async def test_round_trip_10k_records_json_sqlite_json(tmp_path):
    h = make_harness(tmp_path)
    domain = await h.storage.domain("bulk")
    await domain.write_many(
        [("recs", f"key-{i:05d}", Rec(n=i, text=f"ünïcode {i} \"quoted\"", nested={"a": [i]}))
         for i in range(10_000)] + [("meta", "m", Rec(n=-1, text="meta"))])
    original = await domain.export()
    await h.close()

    h = make_harness(tmp_path)
    assert (await h.storage.copy("bulk", "json", "sqlite")).records == 10_001
    (tmp_path / "home/storage/bulk.json").unlink()
    assert (await h.storage.copy("bulk", "sqlite", "json")).records == 10_001
    back = await h.storage.open_on("bulk", "json")
    assert await back.export() == original
    await back.close()
    await h.close()


async def test_copy_replaces_stale_target_records(tmp_path):
    h = make_harness(tmp_path)
    src = await h.storage.domain("bulk")
    await src.put("recs", "a", Rec(n=1, text="a"))
    dst = await h.storage.open_on("bulk", "sqlite")
    await dst.put("recs", "stale", Rec(n=9, text="gone after copy"))
    await dst.close()
    with pytest.raises(StorageError, match=r"sqlite already holds 1 records of 'bulk'.*--force"):
        await h.storage.copy("bulk", "json", "sqlite")
    report = await h.storage.copy("bulk", "json", "sqlite", force=True)
    saved = json.loads(report.backup.read_text())
    assert saved["tables"]["recs"] == {"stale": {"n": 9, "text": "gone after copy", "nested": {}}}
    dst = await h.storage.open_on("bulk", "sqlite")
    assert list(await dst.all("recs")) == ["a"]
    await dst.close()
    await h.close()


async def test_copy_to_same_backend_and_unknown_domain_are_errors(tmp_path):
    h = make_harness(tmp_path)
    with pytest.raises(StorageError, match="same backend"):
        await h.storage.copy("bulk", "json", "json")
    with pytest.raises(StorageError, match="no enabled plugin declares storage domain 'nope'"):
        await h.storage.copy("nope", "json", "sqlite")
    with pytest.raises(StorageError, match="unknown storage backend 'mongo'"):
        await h.storage.copy("bulk", "json", "mongo")
    await h.close()


def test_unknown_backend_in_config_names_the_field(tmp_path):
    h = make_harness(tmp_path, backend="mongo")
    with pytest.raises(StorageError, match=r"storage.backend: unknown storage backend 'mongo'"):
        _ = h.storage


def test_cli_copy_dump_and_ls(tmp_path, capsys, monkeypatch):
    from dsh_harness import cli

    async def seed():
        h = make_harness(tmp_path)
        d = await h.storage.domain("bulk")
        await d.put("recs", "k", Rec(n=5, text="five"))
        await h.close()
    asyncio.run(seed())
    monkeypatch.setattr(cli, "Harness", lambda loaded: make_harness(tmp_path))
    assert cli.main(["storage", "copy", "bulk", "--from", "json", "--to", "sqlite"]) == 0
    out = capsys.readouterr().out
    assert "copied 1 records of bulk from json to sqlite; verified record by record" in out
    assert "still routed to json" in out
    assert cli.main(["storage", "dump", "bulk", "--backend", "sqlite", "--json"]) == 0
    dumped = json.loads(capsys.readouterr().out)
    assert dumped["tables"]["recs"] == {"k": {"n": 5, "text": "five", "nested": {}}}
    assert cli.main(["storage", "ls", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"domain": "bulk", "version": 3, "backend": "json", "tables": {"recs": 1, "meta": 0}}]
