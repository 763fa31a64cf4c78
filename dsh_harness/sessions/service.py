"""``harness.sessions``: create, resume (repairing), and read (never resuming) sessions."""

from __future__ import annotations

from typing import Any

from .events import SessionHeader, utcnow
from .log import Session
from .store import LoadedLog, SessionStore
from .summary import SessionSummary, summarize


class SessionService:
    def __init__(self, store: SessionStore):
        self.store = store

    async def exists(self, session_id: str) -> bool:
        return await self.store.exists(session_id)

    async def create(self, session_id: str, meta: dict[str, Any]) -> Session:
        header = SessionHeader(id=session_id, created_at=utcnow(), meta=meta)
        await self.store.create(header)
        return Session(self.store, header, [])

    async def resume(self, session_id: str) -> Session:
        """Load for writing: cut a torn tail, close a turn a crash left open."""
        loaded = await self.store.load(session_id, repair=True)
        session = Session(self.store, loaded.header, loaded.events)
        await session.close_open_turn("interrupted", "the process stopped during this turn")
        return session

    async def read(self, session_id: str) -> LoadedLog:
        """Read-only: nothing is written, no turn is closed."""
        return await self.store.load(session_id, repair=False)

    async def summaries(self) -> list[SessionSummary]:
        out = []
        for sid in await self.store.list_ids():
            out.append(summarize(await self.read(sid)))
        return sorted(out, key=lambda s: s.last_activity, reverse=True)

    async def release(self, session_id: str) -> None:
        await self.store.release(session_id)

    async def close(self) -> None:
        await self.store.close()
