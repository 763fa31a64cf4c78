"""``harness.sessions``: create, resume (repairing), and read (never resuming) sessions."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ..errors import DshError
from ..storage.fence import OPEN_FENCE, Fence
from .events import Compaction, SessionHeader, utcnow
from .history import latest_compaction
from .jsonl_store import dump_line
from .log import Session
from .store import LoadedLog, SessionStore
from .summary import SessionSummary, summarize

if TYPE_CHECKING:
    from ..redact import Redactor

log = logging.getLogger(__name__)

# Released sessions kept in memory so the next resume reads only what was appended since
# (the reviewer evicts its agent after every turn). Bounded by log bytes and by count.
CACHE_BYTES = 32 * 1024 * 1024
CACHE_SESSIONS = 64


class SessionService:
    def __init__(self, store: SessionStore, redactor: Redactor | None = None):
        self.store = store
        # Configured secrets are replaced in all a session records, header meta included.
        self.redactor = redactor
        self._released: OrderedDict[str, tuple[Session, object, int]] = OrderedDict()
        self._released_bytes = 0

    async def exists(self, session_id: str) -> bool:
        return await self.store.exists(session_id)

    async def create(self, session_id: str, meta: dict[str, Any], *,
                     fence: Fence = OPEN_FENCE) -> Session:
        if self.redactor:
            meta = self.redactor.deep(meta)
        header = SessionHeader(id=session_id, created_at=utcnow(), meta=meta)
        await self.store.create(header)
        return Session(self.store, header, [], self.redactor, fence)

    async def resume(self, session_id: str, *, fence: Fence = OPEN_FENCE) -> Session:
        """Load for writing: cut a torn tail, close a turn a crash left open. Every append
        from here on carries ``fence`` (the writer's lease, with replicas).

        A session released earlier by this process is taken back from memory with only the
        events appended since (checked by the store's mark); otherwise the log is read whole.
        """
        session = await self._take_back(session_id)
        if session is None:
            loaded = await self.store.load(session_id, repair=True)
            # A repair (a torn final line cut off: a crash mid-write, or a cache entry saved
            # while a process wrote) loses what that line held: say so once, as it happens.
            for note in loaded.notes:
                log.warning("session %s: %s", session_id, note)
            session = Session(self.store, loaded.header, loaded.events, self.redactor)
        session.fence = fence
        await session.close_open_turn("interrupted", "the process stopped during this turn")
        return session

    async def _take_back(self, session_id: str) -> Session | None:
        entry = self._released.pop(session_id, None)
        if entry is None:
            return None
        session, mark, size = entry
        self._released_bytes -= size
        appended = await self.store.load_after(session_id, mark, repair=True)
        if appended is None:
            return None
        session.extend(appended)
        return session

    async def read(self, session_id: str) -> LoadedLog:
        """Read-only: nothing is written, no turn is closed."""
        return await self.store.load(session_id, repair=False)

    async def read_events(self, session_id: str) -> list:
        """Read-only, like ``read``, but only the events: a session this process released
        (an evicted agent's) comes from memory when its log has not changed since (checked
        by the store's mark, reading only what follows it), so a reader after every turn
        does not re-read and re-parse a log that grows with the PR. The list returned is the
        cached session's own (it grows in place when the session is resumed): never change
        it."""
        entry = self._released.get(session_id)
        if entry is not None:
            session, mark, _ = entry
            try:
                appended = await self.store.load_after(session_id, mark)
            except (OSError, DshError):
                appended = None
            if appended == []:
                return session.events
        return (await self.read(session_id)).events

    async def summaries(self) -> list[SessionSummary]:
        out = []
        for sid in await self.store.list_ids():
            out.append(summarize(await self.read(sid)))
        return sorted(out, key=lambda s: s.last_activity, reverse=True)

    async def drop_compacted(self, session_id: str) -> int:
        """Replace a released session's log by one without the events of the turns its latest
        compaction summarized (and earlier compactions), through ``store.put_raw``; returns how
        many were dropped (0: nothing to drop, or a store that cannot replace a log).

        The model's history is the summary plus the turns after it, so every request after
        this is byte for byte what it would have been (the prefix cache still hits); what is
        lost is the old turns' detail for people. For logs that travel, such as a CI job's
        sessions in the Actions cache, whose size would otherwise grow with every run."""
        log = await self.read(session_id)
        compaction = latest_compaction(log.events)
        if compaction is None:
            return 0
        # Earlier compactions go too: history starts at the latest one's summary.
        kept = [e for e in log.events
                if e is compaction or (not isinstance(e, Compaction) and (
                    getattr(e, "turn", None) is None or e.turn > compaction.through_turn))]
        dropped = len(log.events) - len(kept)
        if not dropped:
            return 0
        self._forget(session_id)  # a cached copy would still hold the dropped events
        raw = b"".join([dump_line(log.header), *(dump_line(e) for e in kept)])
        try:
            await self.store.put_raw(session_id, raw)  # atomic: the old log or the new one
        except DshError:
            return 0  # a store that cannot replace a log keeps it whole
        return dropped

    async def release(self, session_id: str, session: Session | None = None) -> None:
        """Close the session's handles. With ``session`` (an evicted agent's, idle and
        healthy) it is kept in a bounded cache for a cheap resume."""
        self._forget(session_id)
        mark = None
        if session is not None and session.broken is None and session.open_turn() is None:
            try:
                mark = await self.store.mark(session_id)
            except OSError:
                mark = None
        await self.store.release(session_id)
        if mark is None or session is None:
            return
        size = getattr(mark, "offset", 0)
        if size > CACHE_BYTES:
            return
        self._released[session_id] = (session, mark, size)
        self._released_bytes += size
        while self._released and (self._released_bytes > CACHE_BYTES
                                   or len(self._released) > CACHE_SESSIONS):
            _, (_, _, dropped) = self._released.popitem(last=False)
            self._released_bytes -= dropped

    def _forget(self, session_id: str) -> None:
        entry = self._released.pop(session_id, None)
        if entry is not None:
            self._released_bytes -= entry[2]

    async def close(self) -> None:
        self._released.clear()
        self._released_bytes = 0
        await self.store.close()
