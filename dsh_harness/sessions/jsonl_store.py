"""The ``jsonl`` session store: one file per session under ``<home>/sessions/``.

Line 1 is the session header, then one event per line. Appends go to the OS at once (a killed
process loses nothing it logged); ``flush`` fsyncs, which the agent does at every turn end. A
torn final line (crash mid-write) is dropped on load; a bad line elsewhere is corruption and is
reported with its line number, never silently skipped.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from pydantic import ValidationError

from ..errors import DshError
from ..storage.fence import OPEN_FENCE, Fence
from ..storage.json_backend import atomic_write
from .events import EVENT_ADAPTER, SessionHeader
from .store import LoadedLog, SessionStore, StaleAppend

SUFFIX = ".jsonl"


class SessionLogError(DshError):
    """A session log is missing, corrupted, or its id cannot be stored."""


def file_name(session_id: str) -> str:
    """Reversible, filesystem-safe name: ``github:a:pr:7`` -> ``github%3Aa%3Apr%3A7``."""
    if not session_id or session_id.startswith(".") or len(session_id) > 200:
        raise SessionLogError(f"session id {session_id!r} cannot be stored "
                              "(empty, starts with '.', or longer than 200 characters)")
    return quote(session_id, safe="") + SUFFIX


@functools.lru_cache(maxsize=1 << 16)
def session_id_of(name: str) -> str:
    # Cached: the web UI's scan lists every log every few seconds (10,000 unquotes: ~45 ms).
    return unquote(name[: -len(SUFFIX)])


def dump_line(obj) -> bytes:
    data = obj.model_dump(mode="json", exclude_defaults=False)
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


TAIL_CHECK = 64 * 1024


@dataclass(frozen=True)
class LogMark:
    """Where a log ended when it was released: the file's identity, its length, line count and
    modification time then, and a checksum of the last ``TAIL_CHECK`` bytes before that end.

    A later load that finds the same file untouched (same length and mtime) or only grown,
    with the same bytes before the mark, reads only what follows it; anything else (replaced,
    truncated, rewritten at the same length, a changed tail) means a whole load. What this
    cannot see without re-reading the prefix (which is what it avoids) is an in-place edit
    before the tail window of a file that also grew: the process then keeps what it had
    loaded, the log's own version is what a reader (CLI, web UI) or a restart sees."""

    dev: int
    ino: int
    offset: int
    lines: int
    mtime_ns: int
    tail_sha256: bytes


def _tail_sum(fd: int, offset: int) -> bytes:
    start = max(0, offset - TAIL_CHECK)
    return hashlib.sha256(os.pread(fd, offset - start, start)).digest()


@dataclass
class _Parsed:
    header: SessionHeader | None
    events: list
    good_len: int  # bytes of whole, valid lines
    lines: int  # how many
    dropped: int  # bytes of a torn final line


def _parse(path: Path | str, raw: bytes, first_line: int) -> _Parsed:
    """Lines numbered from ``first_line`` (1 = the header). A torn final line is dropped
    (nothing after it was acknowledged); a bad line anywhere else is corruption."""
    lines = raw.split(b"\n")
    tail = lines.pop()  # b"" when the data ends with a newline
    dropped = len(tail)
    header: SessionHeader | None = None
    events = []
    good_len = 0
    count = 0
    for index, line in enumerate(lines):
        number = first_line + index
        last = index == len(lines) - 1 and not tail
        try:
            if number == 1:
                header = SessionHeader.model_validate_json(line)
            else:
                events.append(EVENT_ADAPTER.validate_json(line))
        except (ValueError, ValidationError) as exc:
            if last and number > 1:
                dropped += len(line) + 1
                break
            raise SessionLogError(f"{path}: line {number} is corrupted ({_reason(exc)}); "
                                  "the file was left untouched") from None
        good_len += len(line) + 1
        count += 1
    return _Parsed(header, events, good_len, count, dropped)


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(e["msg"] for e in exc.errors()[:3])
    return str(exc)


class JsonlSessionStore(SessionStore):
    name = "jsonl"

    def __init__(self, directory: Path):
        self.directory = directory
        self._fds: dict[str, int] = {}
        # Per session opened for writing: (bytes, lines) of the log this process knows, i.e.
        # loaded or appended by it. Dropped on release, like the file descriptor.
        self._ends: dict[str, tuple[int, int]] = {}

    def path(self, session_id: str) -> Path:
        return self.directory / file_name(session_id)

    async def create(self, header: SessionHeader) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.path(header.id)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except FileExistsError:
            raise SessionLogError(f"session {header.id!r} already exists at {path}") from None
        line = dump_line(header)
        os.write(fd, line)
        await asyncio.to_thread(os.fsync, fd)
        self._fds[header.id] = fd
        self._ends[header.id] = (len(line), 1)

    async def exists(self, session_id: str) -> bool:
        return self.path(session_id).exists()

    async def load(self, session_id: str, *, repair: bool = False) -> LoadedLog:
        path = self.path(session_id)
        try:
            raw = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise SessionLogError(f"session {session_id!r} not found ({path})") from None
        parsed = _parse(path, raw, first_line=1)
        header = parsed.header
        if header is None:
            raise SessionLogError(f"{path}: no session header line; the file was left untouched")
        if header.id != session_id:
            raise SessionLogError(f"{path}: header names session {header.id!r}, "
                                  f"expected {session_id!r}")
        if repair:
            if parsed.dropped:
                await asyncio.to_thread(os.truncate, path, parsed.good_len)
            self._ends[session_id] = (parsed.good_len, parsed.lines)
        dropped = parsed.dropped
        notes = [f"dropped a torn final line of {dropped} bytes"] if dropped else []
        return LoadedLog(header=header, events=parsed.events, dropped_tail=dropped, notes=notes)

    async def mark(self, session_id: str) -> LogMark | None:
        known = self._ends.get(session_id)
        if known is None:
            return None
        offset, lines = known

        def read() -> LogMark | None:
            try:
                fd = os.open(self.path(session_id), os.O_RDONLY)
            except FileNotFoundError:
                return None
            try:
                st = os.fstat(fd)
                if st.st_size < offset:
                    return None
                return LogMark(st.st_dev, st.st_ino, offset, lines, st.st_mtime_ns,
                               _tail_sum(fd, offset))
            finally:
                os.close(fd)
        return await asyncio.to_thread(read)

    async def load_after(self, session_id: str, mark: object, *,
                         repair: bool = False) -> list | None:
        if not isinstance(mark, LogMark):
            return None
        path = self.path(session_id)

        def read() -> bytes | None:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                return None
            try:
                st = os.fstat(fd)
                if ((st.st_dev, st.st_ino) != (mark.dev, mark.ino) or st.st_size < mark.offset
                        or (st.st_size == mark.offset and st.st_mtime_ns != mark.mtime_ns)
                        or _tail_sum(fd, mark.offset) != mark.tail_sha256):
                    # Replaced, truncated, rewritten at the same length or in its tail.
                    return None
                return os.pread(fd, st.st_size - mark.offset, mark.offset)
            finally:
                os.close(fd)
        raw = await asyncio.to_thread(read)
        if raw is None:
            return None
        parsed = _parse(path, raw, first_line=mark.lines + 1)
        if repair:
            if parsed.dropped:
                await asyncio.to_thread(os.truncate, path, mark.offset + parsed.good_len)
            self._ends[session_id] = (mark.offset + parsed.good_len, mark.lines + parsed.lines)
        return parsed.events

    def _fd(self, session_id: str) -> int:
        fd = self._fds.get(session_id)
        if fd is None:
            fd = os.open(self.path(session_id), os.O_WRONLY | os.O_APPEND)
            self._fds[session_id] = fd
        return fd

    async def append(self, session_id: str, events: list, *, expected: int | None = None,
                     fence: Fence = OPEN_FENCE) -> None:
        if not events:
            return
        fence.alive(f"appending to session {session_id!r}")
        known = self._ends.get(session_id)
        if expected is not None and known is not None and known[1] != expected:
            # One process owns the files (the home lock): only another writer object of this
            # process (e.g. an agent evicted while it still wrote) can have appended since.
            raise StaleAppend(f"session {session_id!r}: the log has {known[1]} lines, the "
                              f"writer has seen {expected}; the append was refused")
        data = b"".join(dump_line(e) for e in events)
        fd = self._fd(session_id)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if known is not None:
            self._ends[session_id] = (known[0] + len(data), known[1] + len(events))

    async def flush(self, session_id: str) -> None:
        fd = self._fds.get(session_id)
        if fd is not None:
            await asyncio.to_thread(os.fsync, fd)

    async def release(self, session_id: str) -> None:
        self._ends.pop(session_id, None)
        fd = self._fds.pop(session_id, None)
        if fd is not None:
            try:
                await asyncio.to_thread(os.fsync, fd)
            finally:
                os.close(fd)

    async def list_stamped(self) -> list[tuple[str, object | None]]:
        def scan() -> list[tuple[str, object | None]]:
            if not self.directory.is_dir():
                return []
            out: list[tuple[str, object | None]] = []
            with os.scandir(self.directory) as it:
                for entry in it:
                    if entry.name.endswith(SUFFIX) and not entry.name.startswith("."):
                        st = entry.stat()
                        out.append((session_id_of(entry.name), (st.st_mtime_ns, st.st_size)))
            return out
        return await asyncio.to_thread(scan)

    async def stamp(self, session_id: str) -> object | None:
        try:
            st = self.path(session_id).stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    async def read_from(self, session_id: str, offset: int) -> bytes | None:
        return await asyncio.to_thread(self.read_from_sync, session_id, offset)

    def read_from_sync(self, session_id: str, offset: int) -> bytes:
        try:
            with open(self.path(session_id), "rb") as f:
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            raise SessionLogError(f"session {session_id!r} not found") from None

    async def put_raw(self, session_id: str, raw: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.path(session_id)
        await self.release(session_id)
        # Temp file, fsync, rename: a reader sees the old log or the new one, never a mix.
        await asyncio.to_thread(atomic_write, path, raw)

    async def list_ids(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(session_id_of(p.name) for p in self.directory.iterdir()
                      if p.name.endswith(SUFFIX) and not p.name.startswith("."))

    async def close(self) -> None:
        for sid in list(self._fds):
            await self.release(sid)
