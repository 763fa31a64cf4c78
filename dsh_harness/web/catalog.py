"""The web UI's view of all sessions, cached by file stamp so 10,000 sessions stay fast.

A session is summarized (title, turns, usage, group, link) once per change of its log; later
requests only compare stamps. Logs of open session pages are cached the same way, so polling a
running session re-reads its file only when it grew. Nothing here writes: reading a session
never resumes it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..sessions.store import LoadedLog
from ..sessions.summary import SessionSummary, summarize

LOG_CACHE_SIZE = 32


@dataclass
class CatalogEntry:
    stamp: Any
    summary: SessionSummary
    group: list[str] = field(default_factory=list)
    link: str | None = None

    def matches(self, text: str) -> bool:
        hay = " ".join([self.summary.id, self.summary.title or "", *self.group]).lower()
        return all(word in hay for word in text.lower().split())


class SessionCatalog:
    def __init__(self, harness: Any):
        self.harness = harness
        self._entries: dict[str, CatalogEntry] = {}
        self._logs: OrderedDict[str, tuple[Any, LoadedLog]] = OrderedDict()
        self._lock = asyncio.Lock()

    @property
    def store(self) -> Any:
        return self.harness.sessions.store

    async def refresh(self) -> list[CatalogEntry]:
        """All sessions, newest activity first; only changed logs are read again."""
        async with self._lock:
            stamps = await self.store.list_stamped()
            live = set()
            for session_id, stamp in stamps:
                live.add(session_id)
                cached = self._entries.get(session_id)
                if cached is not None and stamp is not None and cached.stamp == stamp:
                    continue
                try:
                    log = await self.store.load(session_id)
                except Exception:
                    continue  # a corrupted log is reported on its own page, not in the index
                self._entries[session_id] = self.entry_for(log, stamp)
            for gone in set(self._entries) - live:
                del self._entries[gone]
            return sorted(self._entries.values(), key=lambda e: e.summary.last_activity,
                          reverse=True)

    def entry_for(self, log: LoadedLog, stamp: Any = None) -> CatalogEntry:
        hook = self.harness.plugins.hook
        group = hook.dsh_session_group(harness=self.harness, session=log.header) or []
        link = hook.dsh_session_link(harness=self.harness, session=log.header)
        if not (isinstance(link, str) and link.startswith(("https://", "http://"))):
            link = None
        return CatalogEntry(stamp, summarize(log), [str(g) for g in group], link)

    async def log(self, session_id: str) -> LoadedLog:
        """A session's log, re-read only when its file changed."""
        stamp = await self.store.stamp(session_id)
        cached = self._logs.get(session_id)
        if cached is not None and stamp is not None and cached[0] == stamp:
            self._logs.move_to_end(session_id)
            return cached[1]
        log = await self.store.load(session_id)
        self._logs[session_id] = (stamp, log)
        while len(self._logs) > LOG_CACHE_SIZE:
            self._logs.popitem(last=False)
        return log

    async def exists(self, session_id: str) -> bool:
        try:
            return await self.store.exists(session_id)
        except Exception:
            return False

    def public_error(self, exc: Exception) -> str:
        """An error about a log, fit for a page: file paths replaced by the file's name."""
        text = str(exc)
        directory = getattr(self.store, "directory", None)
        if directory is not None:
            text = text.replace(str(directory) + "/", "")
        return text.replace(str(self.harness.home), "<home>")

    @staticmethod
    def groups(entries: list[CatalogEntry]) -> list[tuple[str, int, int]]:
        """(group path, depth, session count) for the group tree, sorted by path."""
        counts: dict[tuple[str, ...], int] = {}
        for e in entries:
            for depth in range(1, len(e.group) + 1):
                key = tuple(e.group[:depth])
                counts[key] = counts.get(key, 0) + 1
        return [(" / ".join(k), len(k) - 1, n) for k, n in sorted(counts.items())]
