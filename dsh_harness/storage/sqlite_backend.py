"""The ``sqlite`` storage backend: one database under ``<home>/storage/``, WAL mode.

Each declared table becomes ``(key TEXT PRIMARY KEY, value TEXT)``. Writes run in an
``IMMEDIATE`` transaction with ``synchronous=FULL`` so a returned write survives a crash or a
power cut; a busy timeout lets ``dsh web`` read while ``dsh run`` writes.

One process never contends with itself: every domain has its own connection, but the write
transactions of all connections to one database file in one process (one event loop) take
turns on one lock, so SQLite's busy handler only ever waits for another process (``dsh web``,
``dsh storage``). A write or read that still finds the database busy is retried a few times
before it fails. Every SQLite failure becomes one ``StorageError`` line naming the file and
the cause (full disk, damaged file, locked by another process), never a raw traceback.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import sqlite3
import threading
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import aiosqlite

from ..errors import StorageError
from .base import DomainSpec, StorageBackend, StoredDomain, WriteOp

LAYOUT_VERSION = 1
DB_NAME = "dsh.sqlite3"
BUSY_TIMEOUT_MS = 10_000
# After the busy timeout, a busy database is tried again this many times (another process
# holding a long write) before the operation fails.
BUSY_RETRIES = 3
BUSY_RETRY_PAUSE_S = 0.5
# "# pragma: no mutate" marks lines of SQL text for scripts/mutation: SQL keywords and names are
# case-insensitive, so mutmut's upper/lower-case mutants of them change nothing. (mutmut reads
# the pragma on the line where a statement starts or inside brackets, not after a closing one.)


def table_name(domain: str, table: str) -> str:
    # Domain and table names are restricted to [A-Za-z0-9_-] by DomainSpec, so quoting is safe.
    return f'"d_{domain}__{table}"'


log = logging.getLogger(__name__)
T = TypeVar("T")

# event loop -> database file -> the lock its write transactions take turns on. Keyed by loop
# because an asyncio.Lock belongs to one loop (tests run many).
_WRITE_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary())


def write_lock(path: Path) -> asyncio.Lock:
    """The lock every write transaction on ``path`` in this process (loop) takes."""
    locks = _WRITE_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(str(path.resolve()), asyncio.Lock())


def _busy(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def describe(path: Path, exc: BaseException) -> str:
    """One line naming the file and what is wrong, for an SQLite failure."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    text = str(exc)
    if code == sqlite3.SQLITE_FULL or getattr(exc, "errno", None) == errno.ENOSPC \
            or "database or disk is full" in text:
        return f"{path}: the disk is full (SQLite: {text}); free space and the work resumes"
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or "malformed" in text \
            or "not a database" in text:
        return (f"{path} is damaged (SQLite: {text}); it was left untouched - restore it from "
                "a backup or move it away")
    if _busy(exc):
        return (f"{path} is locked by another process (SQLite: {text}) after "
                f"{BUSY_RETRIES + 1} tries of {BUSY_TIMEOUT_MS // 1000} s")
    if code == sqlite3.SQLITE_IOERR or isinstance(exc, OSError):
        return f"{path}: I/O error ({text})"
    return f"{path}: SQLite error ({type(exc).__name__}: {text})"


async def guarded(path: Path, op: Callable[[], Awaitable[T]]) -> T:
    """Run one SQLite operation: retried while the database is busy, and any SQLite failure
    raised as a one-line ``StorageError``."""
    for attempt in range(BUSY_RETRIES + 1):
        try:
            return await op()
        except sqlite3.Error as exc:
            if _busy(exc) and attempt < BUSY_RETRIES:
                log.info("%s is busy (another process writes); trying again", path)
                await asyncio.sleep(BUSY_RETRY_PAUSE_S * (attempt + 1))
                continue
            raise StorageError(describe(path, exc)) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _prepare_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        path.touch(mode=0o600)
        return
    wal = path.with_name(path.name + "-wal")
    if path.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size > 0):
        # SQLite takes an empty file for an empty database: say so, a lost database should
        # not pass for a first start.
        log.warning("%s is empty (0 bytes): starting with empty storage; if it held data, "
                    "stop dsh and restore it from a backup", path)


def _daemon_thread(conn: aiosqlite.Connection) -> None:
    """aiosqlite runs each connection on a non-daemon thread, so one connection left open (a
    failed test, a forgotten close) kept the interpreter from exiting: a hang instead of an
    error. Made a daemon before it starts; nothing acknowledged is lost when it ends at exit,
    because a write is acknowledged only once its transaction committed."""
    thread = getattr(conn, "_thread", None)
    if isinstance(thread, threading.Thread) and not thread.is_alive():
        thread.daemon = True


async def connect(path: Path) -> aiosqlite.Connection:
    await asyncio.to_thread(_prepare_file, path)
    try:
        pending = aiosqlite.connect(path, isolation_level=None)
        _daemon_thread(pending)
        db = await pending
    except Exception as exc:
        raise StorageError(f"cannot open {path}: {exc}") from None
    try:
        async with write_lock(path):
            await _set_up(db, path)
    except sqlite3.Error as exc:
        await db.close()
        raise StorageError(describe(path, exc)) from None
    except BaseException:
        await db.close()
        raise
    return db


async def _set_up(db: aiosqlite.Connection, path: Path) -> None:
    for attempt in range(BUSY_RETRIES + 1):
        try:
            return await _set_up_once(db, path)
        except sqlite3.Error as exc:
            await _rollback(db)
            if not (_busy(exc) and attempt < BUSY_RETRIES):
                raise
            await asyncio.sleep(BUSY_RETRY_PAUSE_S * (attempt + 1))


async def _set_up_once(db: aiosqlite.Connection, path: Path) -> None:
    await db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    # The layout is checked before anything is set: a database of another layout (a newer
    # dsh's) is refused without switching its journal mode.
    async with db.execute("PRAGMA user_version") as cur:  # pragma: no mutate
        (layout,) = await cur.fetchone()  # type: ignore[misc]
    if layout not in (0, LAYOUT_VERSION):
        raise StorageError(f"{path}: storage layout {layout} is not supported "
                           f"(this dsh reads layout {LAYOUT_VERSION})")
    await db.execute("PRAGMA journal_mode=WAL")  # pragma: no mutate
    await db.execute("PRAGMA synchronous=FULL")  # pragma: no mutate
    if layout == 0:
        await db.execute("BEGIN IMMEDIATE")  # pragma: no mutate
        await db.execute("CREATE TABLE IF NOT EXISTS dsh_domains "  # pragma: no mutate
                         "(name TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        await db.execute(f"PRAGMA user_version={LAYOUT_VERSION}")
        await db.execute("COMMIT")  # pragma: no mutate


async def _rollback(db: aiosqlite.Connection) -> None:
    """Roll back a transaction still open after a failure. SQLite may already have rolled it
    back itself (a full disk does): then there is nothing to do, and a ``cannot rollback``
    error must never replace the failure that caused it."""
    if db.in_transaction:
        try:
            await db.execute("ROLLBACK")  # pragma: no mutate
        except sqlite3.Error as exc:
            log.debug("rollback after a failed write: %s", exc)


class SqliteStoredDomain(StoredDomain):
    def __init__(self, db: aiosqlite.Connection, spec: DomainSpec, path: Path):
        self.db, self.spec, self.path = db, spec, path

    async def _ensure_tables(self) -> None:
        async def create() -> None:
            for table in self.spec.tables:
                await self.db.execute(
                    f"CREATE TABLE IF NOT EXISTS {table_name(self.spec.name, table)}"
                    " (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        async with write_lock(self.path):
            await guarded(self.path, create)

    async def _one(self, sql: str, args: tuple[object, ...]) -> tuple | None:
        async def read() -> tuple | None:
            async with self.db.execute(sql, args) as cur:
                return await cur.fetchone()
        return await guarded(self.path, read)

    async def stored_version(self) -> int | None:
        sql = "SELECT version FROM dsh_domains WHERE name=?"  # pragma: no mutate
        row = await self._one(sql, (self.spec.name,))
        return None if row is None else int(row[0])

    async def get(self, table: str, key: str) -> str | None:
        sql = f"SELECT value FROM {table_name(self.spec.name, table)} WHERE key=?"
        row = await self._one(sql, (key,))
        return None if row is None else row[0]

    async def items(self, table: str) -> list[tuple[str, str]]:
        async def read() -> list[tuple[str, str]]:
            async with self.db.execute(
                    f"SELECT key, value FROM {table_name(self.spec.name, table)} "
                    "ORDER BY key") as cur:  # pragma: no mutate
                return [(k, v) async for k, v in cur]
        return await guarded(self.path, read)

    async def _transaction(self, version: int, ops: list[WriteOp], clear: bool) -> None:
        async with write_lock(self.path):
            await guarded(self.path, lambda: self._transaction_once(version, ops, clear))

    async def _transaction_once(self, version: int, ops: list[WriteOp], clear: bool) -> None:
        await self.db.execute("BEGIN IMMEDIATE")  # pragma: no mutate
        try:
            if clear:
                for table in self.spec.tables:
                    await self.db.execute(f"DELETE FROM {table_name(self.spec.name, table)}")
            await self.db.execute(
                "INSERT INTO dsh_domains(name, version) VALUES(?, ?) "  # pragma: no mutate
                "ON CONFLICT(name) DO UPDATE SET version=excluded.version",  # pragma: no mutate
                (self.spec.name, version))
            by_table: dict[str, list[WriteOp]] = {}
            for op in ops:
                by_table.setdefault(op[0], []).append(op)
            for table, table_ops in by_table.items():
                name = table_name(self.spec.name, table)
                upserts = [(k, t) for _, k, t in table_ops if t is not None]
                deletes = [(k,) for _, k, t in table_ops if t is None]
                if upserts:
                    await self.db.executemany(
                        f"INSERT INTO {name}(key, value) VALUES(?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value=excluded.value",  # pragma: no mutate
                        upserts)
                if deletes:
                    await self.db.executemany(f"DELETE FROM {name} WHERE key=?", deletes)
            await self.db.execute("COMMIT")  # pragma: no mutate
        except BaseException:
            await _rollback(self.db)
            raise

    async def write(self, version: int, ops: list[WriteOp]) -> None:
        await self._transaction(version, ops, clear=False)

    async def replace_all(self, version: int, data: dict[str, dict[str, str]]) -> None:
        ops = [(t, k, v) for t, rows in data.items() for k, v in rows.items()]
        await self._transaction(version, ops, clear=True)

    async def close(self) -> None:
        await self.db.close()


class PendingSqliteDomain(StoredDomain):
    """A domain opened while the database file does not exist yet: it reads as empty and
    creates the file at its first write, so reading an empty home (``status``, ``storage ls``,
    the web UI) never leaves an empty database behind. Once the file exists (this process
    wrote, or another one created it) every call goes to a real connection."""

    def __init__(self, backend: SqliteBackend, spec: DomainSpec):
        self.backend, self.spec = backend, spec
        self._real: SqliteStoredDomain | None = None

    async def _opened(self, create: bool) -> SqliteStoredDomain | None:
        if self._real is None and (create or self.backend.path.exists()):
            self._real = await self.backend.open_existing(self.spec)
        return self._real

    async def stored_version(self) -> int | None:
        real = await self._opened(create=False)
        return None if real is None else await real.stored_version()

    async def get(self, table: str, key: str) -> str | None:
        real = await self._opened(create=False)
        return None if real is None else await real.get(table, key)

    async def items(self, table: str) -> list[tuple[str, str]]:
        real = await self._opened(create=False)
        return [] if real is None else await real.items(table)

    async def write(self, version: int, ops: list[WriteOp]) -> None:
        real = await self._opened(create=True)
        assert real is not None
        await real.write(version, ops)

    async def replace_all(self, version: int, data: dict[str, dict[str, str]]) -> None:
        real = await self._opened(create=True)
        assert real is not None
        await real.replace_all(version, data)

    async def close(self) -> None:
        if self._real is not None:
            await self._real.close()
            self._real = None


class SqliteBackend(StorageBackend):
    name = "sqlite"

    def __init__(self, directory: Path):
        self.path = directory / DB_NAME

    async def open(self, spec: DomainSpec) -> StoredDomain:
        if not self.path.exists():
            return PendingSqliteDomain(self, spec)
        return await self.open_existing(spec)

    async def open_existing(self, spec: DomainSpec) -> SqliteStoredDomain:
        """A connection to the database (created if missing) with the domain's tables."""
        # One connection per domain: transactions of different domains never interleave.
        db = await connect(self.path)
        stored = SqliteStoredDomain(db, spec, self.path)
        try:
            await stored._ensure_tables()
        except BaseException:
            await db.close()
            raise
        return stored

    async def list_domains(self) -> list[str]:
        if not self.path.exists():
            return []
        db = await connect(self.path)
        try:
            async def read() -> list[str]:
                sql = "SELECT name FROM dsh_domains ORDER BY name"  # pragma: no mutate
                async with db.execute(sql) as cur:
                    return [r[0] async for r in cur]
            return await guarded(self.path, read)
        finally:
            await db.close()
