"""The ``jsonl`` session store: one file per session under ``<home>/sessions/``.

Line 1 is the session header, then one event per line. Appends go to the OS at once (a killed
process loses nothing it logged); ``flush`` fsyncs, which the agent does at every turn end. A
torn final line (crash mid-write) is dropped on load; a bad line elsewhere is corruption and is
reported with its line number, never silently skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from urllib.parse import quote, unquote

from pydantic import ValidationError

from ..errors import DshError
from .events import EVENT_ADAPTER, SessionHeader
from .store import LoadedLog, SessionStore

SUFFIX = ".jsonl"


class SessionLogError(DshError):
    """A session log is missing, corrupted, or its id cannot be stored."""


def file_name(session_id: str) -> str:
    """Reversible, filesystem-safe name: ``github:a:pr:7`` -> ``github%3Aa%3Apr%3A7``."""
    if not session_id or session_id.startswith(".") or len(session_id) > 200:
        raise SessionLogError(f"session id {session_id!r} cannot be stored "
                              "(empty, starts with '.', or longer than 200 characters)")
    return quote(session_id, safe="") + SUFFIX


def session_id_of(name: str) -> str:
    return unquote(name[: -len(SUFFIX)])


def dump_line(obj) -> bytes:
    data = obj.model_dump(mode="json", exclude_defaults=False)
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


class JsonlSessionStore(SessionStore):
    name = "jsonl"

    def __init__(self, directory: Path):
        self.directory = directory
        self._fds: dict[str, int] = {}

    def path(self, session_id: str) -> Path:
        return self.directory / file_name(session_id)

    async def create(self, header: SessionHeader) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.path(header.id)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except FileExistsError:
            raise SessionLogError(f"session {header.id!r} already exists at {path}") from None
        os.write(fd, dump_line(header))
        await asyncio.to_thread(os.fsync, fd)
        self._fds[header.id] = fd

    async def exists(self, session_id: str) -> bool:
        return self.path(session_id).exists()

    async def load(self, session_id: str, *, repair: bool = False) -> LoadedLog:
        path = self.path(session_id)
        try:
            raw = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise SessionLogError(f"session {session_id!r} not found ({path})") from None
        lines = raw.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        dropped = len(tail)
        events = []
        header: SessionHeader | None = None
        good_len = 0
        for number, line in enumerate(lines, start=1):
            last = number == len(lines) and not tail
            try:
                obj = json.loads(line)
                if number == 1:
                    header = SessionHeader.model_validate(obj)
                else:
                    events.append(EVENT_ADAPTER.validate_python(obj))
            except (json.JSONDecodeError, UnicodeDecodeError, ValidationError) as exc:
                if last and number > 1:
                    # A crash can tear the final line; nothing after it was acknowledged.
                    dropped += len(line) + 1
                    break
                raise SessionLogError(f"{path}: line {number} is corrupted ({exc}); the file was "
                                      "left untouched") from None
            good_len += len(line) + 1
        if header is None:
            raise SessionLogError(f"{path}: no session header line; the file was left untouched")
        if header.id != session_id:
            raise SessionLogError(f"{path}: header names session {header.id!r}, "
                                  f"expected {session_id!r}")
        if repair and dropped:
            await asyncio.to_thread(os.truncate, path, good_len)
        notes = [f"dropped a torn final line of {dropped} bytes"] if dropped else []
        return LoadedLog(header=header, events=events, dropped_tail=dropped, notes=notes)

    def _fd(self, session_id: str) -> int:
        fd = self._fds.get(session_id)
        if fd is None:
            fd = os.open(self.path(session_id), os.O_WRONLY | os.O_APPEND)
            self._fds[session_id] = fd
        return fd

    async def append(self, session_id: str, events: list) -> None:
        if not events:
            return
        data = b"".join(dump_line(e) for e in events)
        fd = self._fd(session_id)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    async def flush(self, session_id: str) -> None:
        fd = self._fds.get(session_id)
        if fd is not None:
            await asyncio.to_thread(os.fsync, fd)

    async def release(self, session_id: str) -> None:
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

    async def list_ids(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(session_id_of(p.name) for p in self.directory.iterdir()
                      if p.name.endswith(SUFFIX) and not p.name.startswith("."))

    async def close(self) -> None:
        for sid in list(self._fds):
            await self.release(sid)
