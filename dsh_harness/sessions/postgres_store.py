"""The ``postgres`` session store: append-only session logs in a PostgreSQL database.

One row per line of what the ``jsonl`` store would write, keyed by (session, sequence) — the
header is line 0 — holding the exact bytes of that line, newline included. A log read back is
therefore byte for byte the JSONL file (``read_from`` serves the same byte offsets), so a
session replays to the same request bytes on either store and after ``dsh sessions copy``.
Each ``append`` is one transaction (the session row's counters are bumped under its row lock,
so two writers can never take the same sequence); a committed append is durable, ``flush`` has
nothing left to do. ``mark``/``load_after`` resume a released session by reading only the lines
after the mark; a log replaced since (a forced copy) has a new ``generation`` and is read whole.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import StorageError
from ..storage.fence import OPEN_FENCE, Fence
from ..storage.postgres import LazyPool, describe, error_text, is_driver_error, prepare_schema
from ..storage.postgres_backend import check_fence
from .events import SessionHeader
from .jsonl_store import SessionLogError, _parse, dump_line, file_name
from .store import LoadedLog, SessionStore, StaleAppend

LAYOUT_VERSION = 1
# Arbitrary constant ("dsh" + 2): the advisory lock under which the schema is created.
SCHEMA_LOCK = 0x647368_0002

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS dsh_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dsh_sessions (id TEXT PRIMARY KEY, generation BIGINT NOT NULL, "
    "lines INTEGER NOT NULL, bytes BIGINT NOT NULL, "
    "updated_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS dsh_session_lines (session_id TEXT NOT NULL "
    "REFERENCES dsh_sessions (id) ON DELETE CASCADE, seq INTEGER NOT NULL, "
    "start BIGINT NOT NULL, line BYTEA NOT NULL, PRIMARY KEY (session_id, seq))",
]


@dataclass(frozen=True)
class PgMark:
    """Where this process's view of a log ended: the log's generation, its line count (header
    included) and byte length then."""

    generation: int
    lines: int
    offset: int


def _generation() -> int:
    return secrets.randbits(62)


class PostgresSessionStore(SessionStore):
    name = "postgres"
    shared = True

    def __init__(self, dsn: str, *, leases_here: bool = False):
        self._dsn = dsn
        # The storage backend's leases live in this database (the same DSN): an append checks
        # the writer's fencing token inside its own transaction. Otherwise it asks the fence
        # (a renewal on the storage database) just before.
        self.leases_here = leases_here
        self.where = describe(dsn)
        self._pools = LazyPool(dsn, "dsh-sessions", lambda conn: _prepare(conn, self.where))
        # Per session opened for writing: the PgMark of what this process knows.
        self._known: dict[str, PgMark] = {}

    def _label(self, session_id: str) -> str:
        return f"session {session_id!r} on {self.where}"

    async def _get_pool(self) -> Any:
        try:
            return await self._pools.get()
        except SessionLogError:
            raise
        except StorageError as exc:   # the server cannot be reached: a session-log error
            raise SessionLogError(str(exc)) from None

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Any]:
        pool = await self._get_pool()
        try:
            async with pool.connection() as conn:
                yield conn
        except Exception as exc:
            if is_driver_error(exc):
                raise SessionLogError(f"session store on {self.where}: "
                                      f"{error_text(exc)}") from exc
            raise

    async def create(self, header: SessionHeader) -> None:
        file_name(header.id)  # the same ids as the jsonl store, so logs copy both ways
        line = dump_line(header)
        generation = _generation()
        async with self._conn() as conn, conn.transaction():
            cur = await conn.execute(
                "INSERT INTO dsh_sessions (id, generation, lines, bytes) VALUES (%s, %s, 1, %s) "
                "ON CONFLICT (id) DO NOTHING", (header.id, generation, len(line)))
            if cur.rowcount != 1:
                raise SessionLogError(f"{self._label(header.id)} already exists")
            await conn.execute("INSERT INTO dsh_session_lines (session_id, seq, start, line) "
                               "VALUES (%s, 0, 0, %s)", (header.id, line))
        self._known[header.id] = PgMark(generation, 1, len(line))

    async def exists(self, session_id: str) -> bool:
        async with self._conn() as conn:
            cur = await conn.execute("SELECT 1 FROM dsh_sessions WHERE id = %s", (session_id,))
            return await cur.fetchone() is not None

    async def _head(self, conn: Any, session_id: str) -> PgMark | None:
        cur = await conn.execute("SELECT generation, lines, bytes FROM dsh_sessions "
                                 "WHERE id = %s", (session_id,))
        row = await cur.fetchone()
        return None if row is None else PgMark(int(row[0]), int(row[1]), int(row[2]))

    async def _lines_from(self, conn: Any, session_id: str, seq: int) -> bytes:
        cur = await conn.execute("SELECT line FROM dsh_session_lines WHERE session_id = %s "
                                 "AND seq >= %s ORDER BY seq", (session_id, seq))
        return b"".join(bytes(r[0]) for r in await cur.fetchall())

    async def load(self, session_id: str, *, repair: bool = False) -> LoadedLog:
        async with self._conn() as conn, conn.transaction():
            head = await self._head(conn, session_id)
            if head is None:
                raise SessionLogError(f"{self._label(session_id)} not found")
            raw = await self._lines_from(conn, session_id, 0)
        label = self._label(session_id)
        parsed = _parse(label, raw, first_line=1)  # type: ignore[arg-type]
        header = parsed.header
        if header is None:
            raise SessionLogError(f"{label}: no session header line; it was left untouched")
        if header.id != session_id:
            raise SessionLogError(f"{label}: header names session {header.id!r}")
        if repair:
            self._known[session_id] = PgMark(head.generation, head.lines, head.offset)
        notes = ([f"dropped a torn final line of {parsed.dropped} bytes"]
                 if parsed.dropped else [])
        return LoadedLog(header=header, events=parsed.events, dropped_tail=parsed.dropped,
                         notes=notes)

    async def mark(self, session_id: str) -> PgMark | None:
        return self._known.get(session_id)

    async def load_after(self, session_id: str, mark: object, *,
                         repair: bool = False) -> list | None:
        if not isinstance(mark, PgMark):
            return None
        async with self._conn() as conn, conn.transaction():
            head = await self._head(conn, session_id)
            if head is None or head.generation != mark.generation or head.lines < mark.lines:
                return None  # gone, replaced, or shorter: the caller loads it whole
            raw = await self._lines_from(conn, session_id, mark.lines)
        parsed = _parse(self._label(session_id), raw,  # type: ignore[arg-type]
                        first_line=mark.lines + 1)
        if repair:
            self._known[session_id] = PgMark(head.generation, head.lines, head.offset)
        return parsed.events

    async def append(self, session_id: str, events: list, *, expected: int | None = None,
                     fence: Fence = OPEN_FENCE) -> None:
        if not events:
            return
        what = f"appending to {self._label(session_id)}"
        fence.alive(what)
        in_tx = fence.lease is not None and self.leases_here
        if fence.lease is not None and not in_tx:
            await fence.check(what)
        lines = [dump_line(e) for e in events]
        size = sum(len(line) for line in lines)
        async with self._conn() as conn, conn.transaction():
            if in_tx:
                await check_fence(conn, fence, what)
            # The row lock taken here orders concurrent appenders; sequences never collide;
            # with ``expected`` a writer whose view is out of date changes nothing.
            cur = await conn.execute(
                "UPDATE dsh_sessions SET lines = lines + %s, bytes = bytes + %s, "
                "updated_at = now() WHERE id = %s AND (%s::int IS NULL OR lines = %s::int) "
                "RETURNING generation, lines, bytes",
                (len(lines), size, session_id, expected, expected))
            row = await cur.fetchone()
            if row is None:
                head = await self._head(conn, session_id)
                if head is None:
                    raise SessionLogError(f"{self._label(session_id)} not found")
                raise StaleAppend(f"{self._label(session_id)}: the log has {head.lines} "
                                  f"lines, the writer has seen {expected}; the append was "
                                  "refused")
            generation, total_lines, total_bytes = int(row[0]), int(row[1]), int(row[2])
            seq, start = total_lines - len(lines), total_bytes - size
            await _insert_lines(conn, session_id, seq, start, lines)
        if session_id in self._known:
            self._known[session_id] = PgMark(generation, total_lines, total_bytes)

    async def flush(self, session_id: str) -> None:
        """Nothing to do: every append was committed (durably) before it returned."""

    async def release(self, session_id: str) -> None:
        self._known.pop(session_id, None)

    async def list_ids(self) -> list[str]:
        async with self._conn() as conn:
            cur = await conn.execute('SELECT id FROM dsh_sessions ORDER BY id COLLATE "C"')
            return [r[0] for r in await cur.fetchall()]

    async def list_stamped(self) -> list[tuple[str, object | None]]:
        async with self._conn() as conn:
            cur = await conn.execute("SELECT id, generation, bytes FROM dsh_sessions")
            return [(sid, (int(g), int(b))) for sid, g, b in await cur.fetchall()]

    async def stamp(self, session_id: str) -> object | None:
        """``(generation, byte length)``: changes with every append and every replacement;
        the second item is the log's size, as the web UI expects of a stamp."""
        async with self._conn() as conn:
            head = await self._head(conn, session_id)
        return None if head is None else (head.generation, head.offset)

    async def read_from(self, session_id: str, offset: int) -> bytes | None:
        async with self._conn() as conn, conn.transaction():
            if await self._head(conn, session_id) is None:
                raise SessionLogError(f"{self._label(session_id)} not found")
            cur = await conn.execute(
                "SELECT start, line FROM dsh_session_lines WHERE session_id = %s "
                "AND start + length(line) > %s ORDER BY seq", (session_id, offset))
            rows = await cur.fetchall()
        if not rows:
            return b""
        data = b"".join(bytes(line) for _, line in rows)
        return data[max(0, offset - int(rows[0][0])):]

    async def put_raw(self, session_id: str, raw: bytes) -> None:
        lines = raw.splitlines(keepends=True)
        generation = _generation()
        async with self._conn() as conn, conn.transaction():
            await conn.execute("DELETE FROM dsh_sessions WHERE id = %s", (session_id,))
            await conn.execute("INSERT INTO dsh_sessions (id, generation, lines, bytes) "
                               "VALUES (%s, %s, %s, %s)",
                               (session_id, generation, len(lines), len(raw)))
            await _insert_lines(conn, session_id, 0, 0, lines)
        self._known.pop(session_id, None)

    async def close(self) -> None:
        self._known.clear()
        await self._pools.close()


async def _insert_lines(conn: Any, session_id: str, seq: int, start: int,
                        lines: list[bytes]) -> None:
    """The lines from sequence ``seq`` and byte offset ``start`` on, in one statement: never
    ``executemany`` inside a transaction (see ``storage/postgres.py``, "No pipeline")."""
    seqs, starts = [], []
    for line in lines:
        seqs.append(seq)
        starts.append(start)
        seq, start = seq + 1, start + len(line)
    await conn.execute("INSERT INTO dsh_session_lines (session_id, seq, start, line) "
                       "SELECT %s, s, b, l FROM unnest(%s::int[], %s::bigint[], %s::bytea[]) "
                       "AS u(s, b, l)", (session_id, seqs, starts, lines))


async def _prepare(conn: Any, where: str) -> None:
    await prepare_schema(conn, lock=SCHEMA_LOCK, schema=SCHEMA, layout_key="sessions_layout",
                         layout=LAYOUT_VERSION, what="session", where=where, error=SessionLogError)
