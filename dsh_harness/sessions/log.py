"""An open session: its header, its events in memory, and appends that go straight to the store."""

from __future__ import annotations

from typing import Any

from .events import (
    AssistantMessage,
    EventBase,
    SessionHeader,
    StepEnd,
    StepStart,
    TitleSet,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
    utcnow,
)
from .store import SessionStore

INTERRUPTED_TOOL_RESULT = "[tool call interrupted: no result was recorded]"


class Session:
    def __init__(self, store: SessionStore, header: SessionHeader, events: list[Any]):
        self.store, self.header, self.events = store, header, list(events)

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def next_seq(self) -> int:
        return self.events[-1].seq + 1 if self.events else 1

    async def record(self, cls: type[EventBase], **fields: Any) -> Any:
        """Append one event (numbered and timestamped here) to memory and to the store."""
        event = cls(seq=self.next_seq, at=utcnow(), **fields)
        self.events.append(event)
        await self.store.append(self.id, [event])
        return event

    async def flush(self) -> None:
        await self.store.flush(self.id)

    # -- derived state --------------------------------------------------------------------

    @property
    def last_turn(self) -> int:
        for e in reversed(self.events):
            if isinstance(e, TurnStart):
                return e.turn
        return 0

    def open_turn(self) -> TurnStart | None:
        """The turn that started and never ended (a crash or a running turn)."""
        for e in reversed(self.events):
            if isinstance(e, TurnEnd):
                return None
            if isinstance(e, TurnStart):
                return e
        return None

    def title(self) -> tuple[str | None, bool]:
        pinned = [e for e in self.events if isinstance(e, TitleSet) and e.pinned]
        if pinned:
            return pinned[-1].title, True
        titles = [e for e in self.events if isinstance(e, TitleSet)]
        return (titles[-1].title, False) if titles else (None, False)

    def turn_usage(self, turn: int) -> Usage:
        total = Usage()
        for e in self.events:
            if isinstance(e, AssistantMessage) and e.turn == turn:
                total = total + e.usage
        return total

    # -- closing a turn the same way every time ---------------------------------------------

    async def close_open_turn(self, reason: str, error: str | None = None) -> TurnEnd | None:
        """End the open turn: a result for every unanswered tool call, the open step, the turn.

        Used after a crash (on resume), on cancel, deadline and errors, so the next request's
        history is always balanced and identical however the turn was cut off.
        """
        start = self.open_turn()
        if start is None:
            return None
        turn = start.turn
        in_turn = [e for e in self.events if e.seq >= start.seq]
        answered = {e.call_id for e in in_turn if isinstance(e, ToolResult)}
        for msg in (e for e in in_turn if isinstance(e, AssistantMessage)):
            for call in msg.tool_calls:
                if call.id not in answered:
                    await self.record(ToolResult, turn=turn, call_id=call.id, name=call.name,
                                      content=INTERRUPTED_TOOL_RESULT, is_error=True,
                                      note="synthesized")
        steps = [e for e in in_turn if isinstance(e, StepStart | StepEnd)]
        if steps and isinstance(steps[-1], StepStart):
            await self.record(StepEnd, turn=turn, step=steps[-1].step)
        end = await self.record(TurnEnd, turn=turn, reason=reason, error=error,
                                usage=self.turn_usage(turn))
        await self.flush()
        return end
