"""One-line facts about a session, derived from its log (listings, CLI, web index)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from .events import AssistantMessage, Compaction, TitleSet, TurnEnd, TurnStart, Usage
from .store import LoadedLog


class SessionSummary(BaseModel):
    id: str
    title: str | None
    pinned_title: bool
    created_at: datetime
    last_activity: datetime
    turns: int
    open_turn: bool
    events: int
    usage: Usage
    meta: dict[str, Any]

    @property
    def cache_hit_pct(self) -> float:
        prompt = self.usage.prompt
        return 100.0 * self.usage.cache_read / prompt if prompt else 0.0


def summarize(log: LoadedLog) -> SessionSummary:
    usage = Usage()
    title, pinned = None, False
    turns, open_turn = 0, False
    for e in log.events:
        if isinstance(e, AssistantMessage | Compaction):
            usage = usage + e.usage
        elif isinstance(e, TitleSet):
            if e.pinned or not pinned:
                title, pinned = e.title, e.pinned
        elif isinstance(e, TurnStart):
            turns += 1
            open_turn = True
        elif isinstance(e, TurnEnd):
            open_turn = False
    last = log.events[-1].at if log.events else log.header.created_at
    return SessionSummary(id=log.header.id, title=title, pinned_title=pinned,
                          created_at=log.header.created_at, last_activity=last, turns=turns,
                          open_turn=open_turn, events=len(log.events), usage=usage,
                          meta=log.header.meta)
