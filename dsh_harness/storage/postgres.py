"""Connections to PostgreSQL shared by the ``postgres`` storage backend and session store.

psycopg 3 is an optional dependency (the ``postgres`` extra): it is imported only when a
PostgreSQL backend or store is opened, and its absence is a clear error naming the extra.
Errors name the server as ``user@host:port/dbname``, never the DSN itself (it may hold a
password).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import StorageError

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

# Longest a transaction may sit idle (no statement running) before the server ends it: far
# above any transaction of ours (milliseconds between statements), far below a lease.
#
# No pipeline: the server arms that timer only when it answers a Sync (ReadyForQuery) and
# disarms it on reading the next message. psycopg's pipeline mode (``executemany``,
# ``conn.pipeline()``) ends a batch with a Sync *and a Flush*: the Flush disarms the timer and
# gets no ReadyForQuery of its own, so it is never armed again (pg_stat_activity still says
# "idle in transaction"); before the Sync (a long batch) the session is "active" with no timer
# at all. A process stopped (SIGSTOP, a VM pause) after an ``executemany`` and before its
# COMMIT kept its transaction's locks (a domain's advisory lock, a session row, the lease row a
# write checked FOR SHARE) and every other replica waited until it resumed: the late takeovers
# of the pause loop. So every statement is sent on its own, and a batch of rows is one
# statement over arrays (``unnest``); tests/harness/storage/test_postgres_stopped_client.py
# stops a writer there.
IDLE_IN_TRANSACTION_S = 10.0
CONNECT_TIMEOUT_S = 10
# Connections a process keeps per pool at most; asyncio tasks beyond it wait for one.
POOL_MAX = 10


def describe(dsn: str) -> str:
    """``user@host:port/dbname`` of a libpq DSN (URL or key=value), without the password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:  # an unparsable DSN is reported by connect; never echo it
        return "PostgreSQL (unparsable DSN)"
    user = parts.get("user") or ""
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    db = parts.get("dbname") or parts.get("user") or ""
    return f"PostgreSQL {user + '@' if user else ''}{host}:{port}/{db}"


DRIVER_MISSING = ("needs psycopg 3 and psycopg-pool, which are not installed here: install "
                  "them with pip install 'dsh-github-reviewer[postgres]' (or "
                  "pip install 'psycopg[binary,pool]')")


def driver_missing() -> bool:
    """Whether psycopg 3 or psycopg-pool cannot be imported (checked without importing them
    for good: ``dsh config check`` must say so, not ``dsh run`` at its first query)."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return True
    return False


def _driver() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise StorageError(f"the postgres backend {DRIVER_MISSING}") from None
    return psycopg, psycopg_pool


def error_text(exc: BaseException) -> str:
    """One line for a driver error: its class and first message line (no DSN in it)."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


async def open_pool(dsn: str, *, name: str,
                    configure: Callable[[Any], Any] | None = None) -> AsyncConnectionPool:
    """A pool of autocommit connections, opened only after one direct connection succeeded
    (so a wrong DSN or a server that is down gives its real reason at once, not a pool
    timeout). Connections are checked before each use, so a server restart or a terminated
    backend costs the next caller a reconnect, not an error."""
    psycopg, psycopg_pool = _driver()
    where = describe(dsn)
    try:
        probe = await psycopg.AsyncConnection.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S,
                                                      autocommit=True)
    except psycopg.Error as exc:
        raise StorageError(f"cannot connect to {where}: {error_text(exc)}") from None
    await probe.close()

    async def prepared(conn: Any) -> None:
        # A process frozen inside a transaction (SIGSTOP, a VM pause) would hold its locks —
        # a domain's advisory lock, a lease row — and stall every replica until it resumed:
        # the server ends such a session after IDLE_IN_TRANSACTION_S instead.
        await conn.execute(f"SET idle_in_transaction_session_timeout = "
                           f"{int(IDLE_IN_TRANSACTION_S * 1000)}")
        if configure is not None:
            await configure(conn)
    pool = psycopg_pool.AsyncConnectionPool(
        dsn, min_size=1, max_size=POOL_MAX, open=False, name=name,
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
        check=psycopg_pool.AsyncConnectionPool.check_connection, configure=prepared)
    try:
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except psycopg_pool.PoolTimeout as exc:
        await pool.close()
        raise StorageError(f"cannot open a connection pool to {where}: {error_text(exc)}") \
            from None
    return pool


def is_driver_error(exc: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, psycopg.Error)


async def prepare_schema(conn: Any, *, lock: int, schema: Sequence[str], layout_key: str,
                         layout: int, what: str, where: str,
                         error: type[Exception]) -> None:
    """Create a schema once (several processes may start together, hence the advisory lock)
    and check the layout version it records under ``layout_key`` in ``dsh_meta``; a database of
    another layout raises ``error`` and is left untouched. ``what``: "storage" or "session"."""
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
            for statement in schema:
                await conn.execute(statement)
            cur = await conn.execute("SELECT value FROM dsh_meta WHERE key = %s", (layout_key,))
            row = await cur.fetchone()
            if row is None:
                await conn.execute("INSERT INTO dsh_meta (key, value) VALUES (%s, %s)",
                                   (layout_key, str(layout)))
            elif row[0] != str(layout):
                raise error(f"{where}: {what} layout {row[0]} is not supported (this dsh reads "
                            f"layout {layout}); it was left untouched")
    except error:
        raise
    except Exception as exc:
        if is_driver_error(exc):
            raise error(f"{where}: cannot prepare the {what} schema: {error_text(exc)}") from None
        raise


class LazyPool:
    """A connection pool opened, and its schema prepared, on first use — once, however many
    first uses run concurrently; a failed preparation closes the pool it opened."""

    def __init__(self, dsn: str, name: str, prepare: Callable[[Any], Awaitable[None]]):
        self._dsn, self._name, self._prepare = dsn, name, prepare
        self._pool: Any = None
        self._opening = asyncio.Lock()

    async def get(self) -> Any:
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                pool = await open_pool(self._dsn, name=self._name)
                try:
                    async with pool.connection() as conn:
                        await self._prepare(conn)
                except BaseException:
                    await pool.close()
                    raise
                self._pool = pool
            return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
