"""The ``postgres`` storage backend: every domain in one PostgreSQL database (``storage.dsn``).

Records live in one table keyed by (domain, table, key) as the same canonical JSON text the
other backends store, so copies verify byte for byte. Every write is one transaction that
first takes a transaction-scoped advisory lock on its domain, so the writers of a domain are
serialized across processes and hosts the way the domain's asyncio lock serializes them within
one; ``Domain.transaction()`` and ``update`` read and write inside that same transaction. A
committed write is durable (the server's ``synchronous_commit``). The schema is created on first
use under a global advisory lock and stamped with a layout version; another layout is refused.
To keep several deployments in one database, give each its own schema through the DSN
(``?options=-csearch_path%3Dname``).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..errors import StorageError
from .base import DomainSpec, StorageBackend, StoredDomain, WriteOp
from .fence import FencedOut, TokenFence
from .leases import FENCE, Lease, Leases, Replica
from .postgres import LazyPool, describe, error_text, is_driver_error, prepare_schema

LAYOUT_VERSION = 1
# Arbitrary constant ("dsh" + 1): the advisory lock under which the schema is created.
SCHEMA_LOCK = 0x647368_0001

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS dsh_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dsh_domains (name TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dsh_records (domain TEXT NOT NULL, tbl TEXT NOT NULL, "
    "key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (domain, tbl, key))",
    # Leases (see storage/leases.py): tokens come from one sequence, so a takeover always
    # holds a larger token than every earlier holder of any lease.
    "CREATE SEQUENCE IF NOT EXISTS dsh_lease_tokens",
    "CREATE TABLE IF NOT EXISTS dsh_leases (name TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "token BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dsh_replicas (id TEXT PRIMARY KEY, host TEXT NOT NULL, "
    "pid INTEGER NOT NULL, started_at TIMESTAMPTZ NOT NULL, "
    "heartbeat_at TIMESTAMPTZ NOT NULL, info TEXT NOT NULL)",
]


class _Conn:
    """Reads and writes of one domain on one connection (inside a transaction or not)."""

    def __init__(self, conn: Any, spec: DomainSpec):
        self.conn, self.spec = conn, spec

    async def stored_version(self) -> int | None:
        cur = await self.conn.execute("SELECT version FROM dsh_domains WHERE name = %s",
                                      (self.spec.name,))
        row = await cur.fetchone()
        return None if row is None else int(row[0])

    async def get(self, table: str, key: str) -> str | None:
        cur = await self.conn.execute(
            "SELECT value FROM dsh_records WHERE domain = %s AND tbl = %s AND key = %s",
            (self.spec.name, table, key))
        row = await cur.fetchone()
        return None if row is None else row[0]

    async def items(self, table: str) -> list[tuple[str, str]]:
        # COLLATE "C": byte order of UTF-8 is code point order, how the other backends sort.
        cur = await self.conn.execute(
            'SELECT key, value FROM dsh_records WHERE domain = %s AND tbl = %s '
            'ORDER BY key COLLATE "C"', (self.spec.name, table))
        return [(k, v) for k, v in await cur.fetchall()]

    async def lock(self) -> None:
        await self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                                (f"dsh.storage:{self.spec.name}",))

    async def write(self, version: int, ops: list[WriteOp], *, clear: bool = False) -> None:
        name = self.spec.name
        if clear:
            await self.conn.execute("DELETE FROM dsh_records WHERE domain = %s AND tbl = ANY(%s)",
                                    (name, list(self.spec.tables)))
        await self.conn.execute(
            "INSERT INTO dsh_domains (name, version) VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version", (name, version))
        # Last op per key wins, as in the other backends (a transaction's pending writes).
        final: dict[tuple[str, str], str | None] = {}
        for table, key, text in ops:
            final[(table, key)] = text
        upserts = [(t, k, v) for (t, k), v in final.items() if v is not None]
        deletes = [(t, k) for (t, k), v in final.items() if v is None]
        # One statement each, never ``executemany`` (see ``postgres.py``, "No pipeline").
        if upserts:
            await self.conn.execute(
                "INSERT INTO dsh_records (domain, tbl, key, value) SELECT %s, t, k, v "
                "FROM unnest(%s::text[], %s::text[], %s::text[]) AS u(t, k, v) "
                "ON CONFLICT (domain, tbl, key) DO UPDATE SET value = EXCLUDED.value",
                (name, *map(list, zip(*upserts, strict=True))))
        if deletes:
            await self.conn.execute(
                "DELETE FROM dsh_records WHERE domain = %s AND (tbl, key) IN "
                "(SELECT t, k FROM unnest(%s::text[], %s::text[]) AS u(t, k))",
                (name, *map(list, zip(*deletes, strict=True))))


class _TxView(StoredDomain):
    """The domain as seen inside one open database transaction (``StoredDomain.atomic``)."""

    def __init__(self, conn: _Conn):
        self._c = conn

    async def stored_version(self) -> int | None:
        return await self._c.stored_version()

    async def get(self, table: str, key: str) -> str | None:
        return await self._c.get(table, key)

    async def items(self, table: str) -> list[tuple[str, str]]:
        return await self._c.items(table)

    async def write(self, version: int, ops: list[WriteOp]) -> None:
        await self._c.write(version, ops)

    async def replace_all(self, version: int, data: dict[str, dict[str, str]]) -> None:
        ops = [(t, k, v) for t, rows in data.items() for k, v in rows.items()]
        await self._c.write(version, ops, clear=True)


class PostgresStoredDomain(StoredDomain):
    def __init__(self, backend: PostgresBackend, spec: DomainSpec):
        self.backend, self.spec = backend, spec

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[_Conn]:
        pool = await self.backend.pool()
        try:
            async with pool.connection() as conn:
                yield _Conn(conn, self.spec)
        except Exception as exc:
            if is_driver_error(exc):
                raise StorageError(f"storage domain {self.spec.name!r} on "
                                   f"{self.backend.where}: {error_text(exc)}") from exc
            raise

    @asynccontextmanager
    async def atomic(self) -> AsyncIterator[StoredDomain]:
        fence = FENCE.get()
        if isinstance(fence, Lease):  # ``fenced(lease)``: the token alone
            fence = TokenFence(fence)
        if fence is not None and fence.lease is None:
            fence = None
        if fence is not None:
            fence.alive("a storage write")  # a stale writer takes no lock
        async with self._connection() as c, c.conn.transaction():
            await c.lock()
            if fence is not None:
                fence.alive("a storage write")
                await check_fence(c.conn, fence, "a storage write")
            yield _TxView(c)

    async def stored_version(self) -> int | None:
        async with self._connection() as c:
            return await c.stored_version()

    async def get(self, table: str, key: str) -> str | None:
        async with self._connection() as c:
            return await c.get(table, key)

    async def items(self, table: str) -> list[tuple[str, str]]:
        async with self._connection() as c:
            return await c.items(table)

    async def write(self, version: int, ops: list[WriteOp]) -> None:
        async with self.atomic() as view:
            await view.write(version, ops)

    async def replace_all(self, version: int, data: dict[str, dict[str, str]]) -> None:
        async with self.atomic() as view:
            await view.replace_all(version, data)


class PostgresBackend(StorageBackend):
    name = "postgres"

    def __init__(self, dsn: str):
        self._dsn = dsn
        self.where = describe(dsn)
        self._pools = LazyPool(dsn, "dsh-storage", lambda conn: _prepare(conn, self.where))

    async def pool(self) -> Any:
        """The backend's connection pool, opened (and the schema checked) on first use."""
        return await self._pools.get()

    def leases(self, owner: str) -> PostgresLeases:
        return PostgresLeases(self, owner)

    async def open(self, spec: DomainSpec) -> PostgresStoredDomain:
        await self.pool()
        return PostgresStoredDomain(self, spec)

    async def list_domains(self) -> list[str]:
        pool = await self.pool()
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT name FROM dsh_domains ORDER BY name")
            return [r[0] for r in await cur.fetchall()]

    async def close(self) -> None:
        await self._pools.close()


async def _prepare(conn: Any, where: str) -> None:
    await prepare_schema(conn, lock=SCHEMA_LOCK, schema=SCHEMA, layout_key="storage_layout",
                         layout=LAYOUT_VERSION, what="storage", where=where, error=StorageError)


async def check_fence(conn: Any, fence: Any, what: str = "the write") -> None:
    """Inside a write's transaction: the lease must still hold the writer's token (``fence``:
    a ``fence.Fence`` with a lease). FOR SHARE keeps a takeover (an UPDATE of that row)
    waiting until this write has committed. A refusal marks the fence lost."""
    lease: Lease = fence.lease
    cur = await conn.execute("SELECT token FROM dsh_leases WHERE name = %s FOR SHARE",
                             (lease.name,))
    row = await cur.fetchone()
    if row is None or int(row[0]) != lease.token:
        why = (f"lease {lease.name!r} with token {lease.token} is no longer held by "
               f"{lease.owner} (now: {'free' if row is None else f'token {row[0]}'})")
        fence.lose(why)
        raise FencedOut(f"{why}; {what} was refused")


class PostgresLeases(Leases):
    """Leases in the storage database; all times are the database server's (no clock skew
    between hosts)."""

    shared = True

    def __init__(self, backend: PostgresBackend, owner: str):
        super().__init__(owner)
        self.backend = backend
        self._started: Any = None

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Any]:
        pool = await self.backend.pool()
        try:
            async with pool.connection() as conn:
                yield conn
        except Exception as exc:
            if is_driver_error(exc):
                raise StorageError(f"leases on {self.backend.where}: {error_text(exc)}") \
                    from exc
            raise

    async def acquire(self, name: str, ttl_s: float) -> Lease | None:
        async with self._conn() as conn:
            cur = await conn.execute(
                "INSERT INTO dsh_leases AS l (name, owner, token, expires_at) VALUES "
                "(%s, %s, nextval('dsh_lease_tokens'), now() + %s * interval '1 second') "
                "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, "
                "token = EXCLUDED.token, expires_at = EXCLUDED.expires_at "
                "WHERE l.expires_at <= now() "
                "RETURNING token, expires_at", (name, self.owner, ttl_s))
            row = await cur.fetchone()
        return None if row is None else Lease(name, self.owner, int(row[0]), row[1])

    async def renew(self, lease: Lease, ttl_s: float) -> Lease | None:
        async with self._conn() as conn:
            cur = await conn.execute(
                "UPDATE dsh_leases SET expires_at = now() + %s * interval '1 second' "
                "WHERE name = %s AND token = %s RETURNING expires_at",
                (ttl_s, lease.name, lease.token))
            row = await cur.fetchone()
        return None if row is None else Lease(lease.name, lease.owner, lease.token, row[0])

    async def release(self, lease: Lease) -> None:
        async with self._conn() as conn:
            await conn.execute("DELETE FROM dsh_leases WHERE name = %s AND token = %s",
                               (lease.name, lease.token))

    async def held(self, prefix: str = "") -> list[Lease]:
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT name, owner, token, expires_at FROM dsh_leases WHERE "
                "left(name, length(%s)) = %s AND expires_at > now() ORDER BY name COLLATE \"C\"",
                (prefix, prefix))
            return [Lease(n, o, int(t), e) for n, o, t, e in await cur.fetchall()]

    async def heartbeat(self, info: dict[str, Any] | None = None) -> None:
        async with self._conn() as conn:
            await conn.execute(
                "INSERT INTO dsh_replicas (id, host, pid, started_at, heartbeat_at, info) "
                "VALUES (%s, %s, %s, now(), now(), %s) ON CONFLICT (id) DO UPDATE SET "
                "heartbeat_at = now(), info = EXCLUDED.info",
                (self.owner, socket.gethostname(), os.getpid(),
                 json.dumps(info or {}, sort_keys=True)))

    async def replicas(self) -> list[Replica]:
        async with self._conn() as conn:
            cur = await conn.execute("SELECT id, host, pid, started_at, heartbeat_at, info "
                                     "FROM dsh_replicas ORDER BY heartbeat_at DESC")
            return [Replica(i, h, int(p), s, b, json.loads(info))
                    for i, h, p, s, b, info in await cur.fetchall()]

    async def retire(self) -> None:
        async with self._conn() as conn:
            await conn.execute("DELETE FROM dsh_replicas WHERE id = %s", (self.owner,))
            await conn.execute("DELETE FROM dsh_leases WHERE owner = %s", (self.owner,))
