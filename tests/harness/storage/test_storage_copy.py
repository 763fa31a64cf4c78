"""`storage copy` between backends, through the harness and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import stat
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
        {"domain": "bulk", "version": 3, "backend": "json", "tables": {"recs": 1, "meta": 0}},
        {"domain": "web-sessions", "version": 1, "backend": "json", "tables": {"sessions": 0}}]


def _seed_both(tmp_path: Path) -> None:
    async def seed():
        h = make_harness(tmp_path)
        await (await h.storage.domain("bulk")).put("recs", "src", Rec(n=1, text="source"))
        dst = await h.storage.open_on("bulk", "sqlite")
        await dst.put("recs", "live", Rec(n=2, text="what a running dsh run wrote"))
        await dst.close()
        await h.close()
    asyncio.run(seed())


def test_cli_copy_refuses_while_dsh_run_holds_the_home(tmp_path, capsys, monkeypatch):
    """A forced copy under a running dsh run would replace its store and be
    overwritten by it; it is refused, naming the holder, and touches nothing."""
    from dsh_harness import cli
    from dsh_harness.home_lock import HomeLock

    _seed_both(tmp_path)
    monkeypatch.setattr(cli, "Harness", lambda loaded: make_harness(tmp_path))
    home = tmp_path / "home"
    with HomeLock(home):  # what dsh run holds (flock conflicts per open, even in one process)
        assert cli.main(["storage", "copy", "bulk", "--from", "json", "--to", "sqlite",
                         "--force"]) == 1
        err = capsys.readouterr().err
        assert f"another dsh run (pid {os.getpid()}) is using the home {home}" in err
        assert err.rstrip().endswith("stop it first, then run dsh storage copy again"), err
    assert not (home / "storage" / "backups").exists()

    async def target_keys():
        h = make_harness(tmp_path)
        d = await h.storage.open_on("bulk", "sqlite")
        try:
            return set((await d.export())["recs"])
        finally:
            await d.close()
            await h.close()
    assert asyncio.run(target_keys()) == {"live"}
    # Released: the copy goes through, and leaves no lock file behind.
    assert cli.main(["storage", "copy", "bulk", "--from", "json", "--to", "sqlite",
                     "--force"]) == 0
    assert asyncio.run(target_keys()) == {"src"}
    assert not (home / "run.lock").exists()


def test_a_copy_holds_the_home_against_dsh_run(tmp_path, monkeypatch):
    """While a copy runs, the lock names it: a dsh run started then is refused."""
    from dsh_harness.home_lock import HomeLock, HomeLocked

    home = tmp_path / "home"
    with HomeLock(home, "dsh storage copy"):
        with pytest.raises(HomeLocked, match=r"another dsh storage copy \(pid \d+\)"):
            HomeLock(home).acquire()


async def test_backups_are_owner_only_and_only_the_newest_are_kept(tmp_path):
    """Backups hold the deployment's records: 0600 files in a 0700 directory
    whatever the umask; storage.backups_keep bounds how many stay."""
    loaded = parse_config('home = "home"\n[storage]\nbackend = "json"\nbackups_keep = 2\n',
                          "test.toml", tmp_path)
    h = Harness(loaded, load_entry_points=False, plugins=[("bulk", DeclaresDomain())])
    backups = tmp_path / "home" / "storage" / "backups"
    backups.mkdir(parents=True, mode=0o755)
    os.chmod(backups, 0o755)   # an existing, too-open directory is tightened too
    (backups / "other.sqlite.20200101T000000.000000Z.json").write_text("{}")  # not ours
    old_umask = os.umask(0o022)
    try:
        src = await h.storage.domain("bulk")
        made = []
        for i in range(4):
            await src.put("recs", "k", Rec(n=i, text=f"v{i}"))
            dst = await h.storage.open_on("bulk", "sqlite")
            await dst.put("recs", f"stale{i}", Rec(n=-i, text="replaced"))
            await dst.close()
            made.append((await h.storage.copy("bulk", "json", "sqlite", force=True)).backup)
    finally:
        os.umask(old_umask)
        await h.close()
    kept = h.storage.backups("bulk", "sqlite")
    assert kept == made[-2:]
    assert all(not p.exists() for p in made[:2])
    assert (backups / "other.sqlite.20200101T000000.000000Z.json").exists()
    assert stat.S_IMODE(backups.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in kept} == {0o600}
    assert json.loads(kept[-1].read_text())["tables"]["recs"]["stale3"]["text"] == "replaced"


def test_backups_keep_must_be_positive(tmp_path):
    with pytest.raises(Exception, match=r"storage.backups_keep"):
        parse_config("[storage]\nbackups_keep = 0\n", "test.toml", tmp_path)
