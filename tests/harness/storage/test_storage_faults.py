"""Storage under faults: one process never contends with itself, a
database busy in another process is waited for, and a full disk, a damaged page or an empty
file each say so in one line naming the file."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import subprocess
from pathlib import Path

import pytest
from pydantic import BaseModel

from dsh_harness import DomainSpec, StorageError
from dsh_harness.storage import Domain, sqlite_backend
from dsh_harness.storage.sqlite_backend import DB_NAME, SqliteBackend


class Item(BaseModel):
    n: int
    pad: str = ""


def spec(name: str) -> DomainSpec:
    return DomainSpec(name=name, version=1, tables={"items": Item})


@pytest.fixture
def impatient(monkeypatch):
    """No busy timeout and no retries: any contention at all is an error."""
    monkeypatch.setattr(sqlite_backend, "BUSY_TIMEOUT_MS", 0)
    monkeypatch.setattr(sqlite_backend, "BUSY_RETRIES", 0, raising=False)


async def test_domains_of_one_process_never_lock_each_other(tmp_path, impatient):
    backend = SqliteBackend(tmp_path)
    domains = [await Domain.open(spec(f"d{i}"), backend) for i in range(3)]
    try:
        await asyncio.gather(*(d.put("items", f"k{n}", Item(n=n, pad="x" * 2000))
                               for n in range(150) for d in domains))
        for d in domains:
            assert len(await d.all("items")) == 150
    finally:
        for d in domains:
            await d.close()


@pytest.fixture
def holder(tmp_path):
    """Another process's connection holding the write lock (raw sqlite3, not this backend)."""
    conn = sqlite3.connect(tmp_path / DB_NAME, isolation_level=None)
    yield conn
    conn.close()


async def test_a_database_busy_elsewhere_is_waited_for(tmp_path, monkeypatch, holder):
    monkeypatch.setattr(sqlite_backend, "BUSY_TIMEOUT_MS", 20)
    monkeypatch.setattr(sqlite_backend, "BUSY_RETRY_PAUSE_S", 0.05)
    domain = await Domain.open(spec("d"), SqliteBackend(tmp_path))
    try:
        holder.execute("BEGIN IMMEDIATE")
        asyncio.get_running_loop().call_later(0.1, holder.execute, "ROLLBACK")
        await domain.put("items", "k", Item(n=1))     # busy at first, then written
        assert (await domain.get("items", "k")).n == 1
        holder.execute("BEGIN IMMEDIATE")              # held for good: one clear error
        with pytest.raises(StorageError) as exc:
            await domain.put("items", "k", Item(n=2))
        assert str(exc.value).startswith(f"{tmp_path / DB_NAME} is locked by another process")
        holder.execute("ROLLBACK")
    finally:
        await domain.close()


async def test_a_damaged_page_is_one_clear_error_naming_the_file(tmp_path):
    domain = await Domain.open(spec("d"), SqliteBackend(tmp_path))
    await domain.write_many(("items", f"k{n}", Item(n=n, pad="y" * 3000)) for n in range(40))
    await domain.close()
    path = tmp_path / DB_NAME
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 6 * page
    data[3 * page:5 * page] = b"\xff" * (2 * page)      # two table pages destroyed
    path.write_bytes(bytes(data))
    with pytest.raises(StorageError) as exc:
        await Domain.open(spec("d"), SqliteBackend(tmp_path))
    message = str(exc.value)
    assert message.startswith(f"{path} is damaged (SQLite: ") and "\n" not in message


async def test_an_empty_database_file_starts_empty_with_a_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="dsh_harness.storage.sqlite_backend")
    fresh = await Domain.open(spec("d"), SqliteBackend(tmp_path / "fresh"))
    await fresh.close()
    assert not caplog.records, "a first start is no warning"
    (tmp_path / "lost").mkdir()
    (tmp_path / "lost" / DB_NAME).write_bytes(b"")
    domain = await Domain.open(spec("d"), SqliteBackend(tmp_path / "lost"))
    await domain.close()
    [warning] = caplog.records
    assert f"{tmp_path / 'lost' / DB_NAME} is empty (0 bytes)" in warning.getMessage()


@pytest.fixture
def tiny_disk(tmp_path):
    home = tmp_path / "disk"
    home.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(home)],
                             capture_output=True).returncode == 0
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def fill(directory: Path) -> None:
    with open(directory / "ballast", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


async def test_a_full_disk_says_so_and_the_next_write_works_once_freed(tiny_disk):
    domain = await Domain.open(spec("d"), SqliteBackend(tiny_disk))
    try:
        await domain.put("items", "a", Item(n=1))
        fill(tiny_disk)
        with pytest.raises(StorageError) as exc:
            for n in range(50):
                await domain.put("items", f"k{n}", Item(n=n, pad="z" * 20000))
        message = str(exc.value)
        assert message.startswith(f"{tiny_disk / DB_NAME}: the disk is full"), message
        assert "cannot rollback" not in message
        (tiny_disk / "ballast").unlink()
        await domain.put("items", "b", Item(n=2))
        assert (await domain.get("items", "b")).n == 2
    finally:
        await domain.close()


async def test_a_missing_json_file_written_before_starts_empty_with_a_warning(tmp_path, caplog):
    from dsh_harness.storage.json_backend import JsonBackend

    caplog.set_level(logging.WARNING, logger="dsh_harness.storage.json_backend")
    domain = await Domain.open(spec("d"), JsonBackend(tmp_path))
    assert not caplog.records, "a first start is no warning"
    await domain.put("items", "k", Item(n=1))
    await domain.close()
    (tmp_path / "d.json").unlink()                    # lost
    domain = await Domain.open(spec("d"), JsonBackend(tmp_path))
    assert await domain.all("items") == {}
    await domain.close()
    [warning] = caplog.records
    assert f"{tmp_path / 'd.json'} is missing although it was written before" in (
        warning.getMessage())
    assert await JsonBackend(tmp_path).list_domains() == []
