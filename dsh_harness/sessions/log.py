"""An open session: its header, its events in memory, and appends that go straight to the store.

What turns read per step (title, usage of the running turn, the model transcript) is kept up to
date as events arrive, so a turn costs O(new events), not a walk of the whole history.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..errors import StorageError
from ..storage.fence import OPEN_FENCE, Fence, FencedOut, stop_point
from .events import (
    AssistantMessage,
    EventBase,
    SessionHeader,
    TitleSet,
    TurnEnd,
    TurnStart,
    Usage,
    utcnow,
)
from .history import ReasoningReplay
from .store import SessionStore
from .transcript import Transcript

if TYPE_CHECKING:
    from ..redact import Redactor

log = logging.getLogger(__name__)


class _View(Protocol):
    def apply(self, event: Any) -> None: ...


V = TypeVar("V", bound=_View)


class SessionWriteError(StorageError):
    """Appending to a session log failed; the turn that was writing fails at once. A storage
    error: callers that hold work on a local storage failure (without counting an attempt)
    hold it on this too."""


class SessionFenced(SessionWriteError, FencedOut):
    """An append was refused because its writer is stale (its lease is lost, or the log
    moved on since it last saw it): the turn stops, the session stays as the holder wrote it."""


class Session:
    def __init__(self, store: SessionStore, header: SessionHeader, events: list[Any],
                 redactor: Redactor | None = None, fence: Fence = OPEN_FENCE):
        self.store, self.header, self.events = store, header, []
        self.redactor = redactor
        # The writer's lease fence (replicas): every append carries it and the writer's view
        # of the log (``position``), so a stale writer's append is refused.
        self.fence = fence
        # Why the log cannot be appended to any more (a failed write), or None.
        self.broken: str | None = None
        self._title: tuple[str | None, bool] = (None, False)
        self._transcripts: dict[str, Transcript] = {}
        self._views: dict[str, _View] = {}
        self.extend(events)

    def extend(self, events: list[Any]) -> None:
        """Take events that are already in the log (loaded, or appended since the last load)."""
        for e in events:
            self._apply(e)

    def _apply(self, event: Any) -> None:
        self.events.append(event)
        if isinstance(event, TitleSet) and (event.pinned or not self._title[1]):
            self._title = (event.title, event.pinned)
        for t in self._transcripts.values():
            t.apply(event)
        for v in self._views.values():
            v.apply(event)

    def view(self, name: str, build: Callable[[list[Any]], V]) -> V:
        """A derived index of this session's events under ``name``: built once by ``build``
        from the events so far, then kept up to date by its ``apply(event)`` for every event
        taken after (recorded, or appended by another writer and taken by ``extend``), so a
        reader per turn costs O(new events). A reloaded session is a new ``Session``: its
        views start again from its events."""
        v = self._views.get(name)
        if v is None:
            v = self._views[name] = build(self.events)
        return v  # type: ignore[return-value]

    def transcript(self, reasoning: ReasoningReplay = "all") -> Transcript:
        """The model-facing messages, kept up to date from here on (built once per mode)."""
        t = self._transcripts.get(reasoning)
        if t is None:
            t = self._transcripts[reasoning] = Transcript.of(self.events, reasoning)
        return t

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def position(self) -> int:
        """Lines of the log this writer has seen: the header and every event."""
        return 1 + len(self.events)

    @property
    def next_seq(self) -> int:
        return self.events[-1].seq + 1 if self.events else 1

    async def record(self, cls: type[EventBase], **fields: Any) -> Any:
        """Append one event (numbered and timestamped here, configured secrets in its text
        replaced by ``[REDACTED_SECRET]``) to the store, then to memory.

        A failed write (disk full, I/O error) raises ``SessionWriteError`` and leaves the
        session broken: the file may end in a torn line, so nothing more is appended until the
        session is loaded again (which cuts the torn line off).
        """
        self._check_writable()
        if self.redactor:
            # Once, at entry: the log and every request replayed from it hold the same
            # redacted bytes (a prefix-cache hit), and no logged event is rewritten later.
            fields = {k: self.redactor.deep(v) for k, v in fields.items()}
        event = cls(seq=self.next_seq, at=utcnow(), **fields)
        stop_point(f"session-append:{event.type}")
        try:
            await self.store.append(self.id, [event], expected=self.position, fence=self.fence)
        except FencedOut as exc:
            self.broken = f"a stale writer's append was refused: {exc}"
            if not self.fence.lose(str(exc)) and not self.fence.lost:
                log.warning("session %s: %s", self.id, self.broken)  # else the fence said it
            raise SessionFenced(f"session {self.id!r}: {self.broken}") from exc
        except Exception as exc:
            raise self._broke("writing", exc) from exc
        self._apply(event)
        return event

    async def flush(self) -> None:
        self._check_writable()
        try:
            await self.store.flush(self.id)
        except Exception as exc:
            raise self._broke("flushing", exc) from exc

    def _check_writable(self) -> None:
        if self.broken is not None:
            raise SessionWriteError(f"session {self.id!r} is not writable after an earlier "
                                    f"failure: {self.broken}")

    def _broke(self, action: str, exc: Exception) -> SessionWriteError:
        self.broken = f"{action} the session log failed: {type(exc).__name__}: {exc}"
        return SessionWriteError(f"session {self.id!r}: {self.broken}")

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
        """The newest pinned title, else the newest title; and whether it is pinned."""
        return self._title

    def turn_usage(self, turn: int) -> Usage:
        found = []
        for e in reversed(self.events):  # the turn is the newest one: stop at its start
            if isinstance(e, AssistantMessage) and e.turn == turn:
                found.append(e.usage)
            elif isinstance(e, TurnStart) and e.turn <= turn:
                break
        total = Usage()
        for usage in reversed(found):  # in log order, so rounding matches a forward sum
            total = total + usage
        return total

    # -- closing a turn the same way every time ---------------------------------------------

    async def close_open_turn(self, reason: str, error: str | None = None) -> TurnEnd | None:
        """End the open turn as a failed attempt: kept in the log, never replayed.

        Used after a crash (on resume), on cancel, deadline and errors. The attempt's events
        stay for people (CLI, web UI) but the model never sees them again: the next attempt
        starts from the same committed prefix, so it is a prefix-cache hit and shows the model
        no half turn (two user messages in a row, tool calls without results).
        """
        start = self.open_turn()
        if start is None:
            return None
        end = await self.record(TurnEnd, turn=start.turn, reason=reason, error=error,
                                usage=self.turn_usage(start.turn), committed=False)
        await self.flush()
        return end
