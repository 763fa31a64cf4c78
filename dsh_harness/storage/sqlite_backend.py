"""The ``sqlite`` storage backend: one database under ``<home>/storage/``, WAL mode.

Each declared table becomes ``(key TEXT PRIMARY KEY, value TEXT)``. Writes run in an
``IMMEDIATE`` transaction with ``synchronous=FULL`` so a returned write survives a crash or a
power cut; a busy timeout lets ``dsh web`` read while ``dsh run`` writes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiosqlite

from ..errors import StorageError
from .base import DomainSpec, StorageBackend, StoredDomain, WriteOp

LAYOUT_VERSION = 1
DB_NAME = "dsh.sqlite3"
BUSY_TIMEOUT_MS = 10_000
# "# pragma: no mutate" marks lines of SQL text for scripts/mutation: SQL keywords and names are
# case-insensitive, so mutmut's upper/lower-case mutants of them change nothing. (mutmut reads
# the pragma on the line where a statement starts or inside brackets, not after a closing one.)


def table_name(domain: str, table: str) -> str:
    # Domain and table names are restricted to [A-Za-z0-9_-] by DomainSpec, so quoting is safe.
    return f'"d_{domain}__{table}"'


def _prepare_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        path.touch(mode=0o600)


async def connect(path: Path) -> aiosqlite.Connection:
    await asyncio.to_thread(_prepare_file, path)
    try:
        db = await aiosqlite.connect(path, isolation_level=None)
    except Exception as exc:
        raise StorageError(f"cannot open {path}: {exc}") from None
    try:
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
    except aiosqlite.DatabaseError as exc:
        await db.close()
        raise StorageError(f"{path} is not a usable SQLite database ({exc}); "
                           "it was left untouched") from None
    except BaseException:
        await db.close()
        raise
    return db


class SqliteStoredDomain(StoredDomain):
    def __init__(self, db: aiosqlite.Connection, spec: DomainSpec):
        self.db, self.spec = db, spec

    async def _ensure_tables(self) -> None:
        for table in self.spec.tables:
            await self.db.execute(f"CREATE TABLE IF NOT EXISTS {table_name(self.spec.name, table)}"
                                  " (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    async def stored_version(self) -> int | None:
        sql = "SELECT version FROM dsh_domains WHERE name=?"  # pragma: no mutate
        async with self.db.execute(sql, (self.spec.name,)) as cur:
            row = await cur.fetchone()
        return None if row is None else int(row[0])

    async def get(self, table: str, key: str) -> str | None:
        sql = f"SELECT value FROM {table_name(self.spec.name, table)} WHERE key=?"
        async with self.db.execute(sql, (key,)) as cur:
            row = await cur.fetchone()
        return None if row is None else row[0]

    async def items(self, table: str) -> list[tuple[str, str]]:
        async with self.db.execute(
                f"SELECT key, value FROM {table_name(self.spec.name, table)} ORDER BY key") as cur:
            return [(k, v) async for k, v in cur]

    async def _transaction(self, version: int, ops: list[WriteOp], clear: bool) -> None:
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
            await self.db.execute("ROLLBACK")
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
        stored = SqliteStoredDomain(db, spec)
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
            sql = "SELECT name FROM dsh_domains ORDER BY name"  # pragma: no mutate
            async with db.execute(sql) as cur:
                return [r[0] async for r in cur]
        finally:
            await db.close()
