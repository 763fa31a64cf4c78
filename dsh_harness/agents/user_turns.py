"""The user turns the model still sees, kept up to date as a session's events arrive.

``Agent.user_turns`` is asked before every review turn (twice); answering it from the whole
log cost four passes over every event of a session that grows with the PR. This index takes
each event once, as the session applies it (``Session.view``): recorded here, loaded, or
appended by another replica and read back — all go through ``Session._apply`` — and a reload
is a new ``Session``, so a new index. What it answers is exactly the full scan's
(``scan_user_turns``, kept as the reference and for tests):

* a ``compaction`` hides every turn up to the highest ``through_turn`` any compaction names;
* a failed attempt (``turn_end`` not committed) is never replayed, so never listed;
* a turn's meta is that of the last ``turn_start`` of its number.

Compacted turns are dropped from the index when the compaction arrives, so its size is that
of the verbatim part of the conversation, not of the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..sessions.events import Compaction, TurnEnd, TurnStart, UserMessage


@dataclass(frozen=True)
class UserTurn:
    """One turn's user message as the model still sees it, with the turn's meta (read-only:
    the same object is handed to every caller until the turn's meta changes)."""

    turn: int
    meta: MappingProxyType[str, Any]
    content: str


def _frozen(meta: dict[str, Any] | None) -> MappingProxyType[str, Any]:
    return MappingProxyType(dict(meta or {}))


class UserTurnIndex:
    """What ``scan_user_turns`` derives from all events, updated per event."""

    def __init__(self) -> None:
        self.through = 0                        # highest compacted turn
        self.failed: set[int] = set()           # failed attempts (never replayed)
        self._metas: dict[int, MappingProxyType[str, Any]] = {}   # turn -> meta, > through
        # The user messages of turns > through that did not fail, in log order.
        self._entries: list[tuple[int, str]] = []
        self._listed: set[int] = set()          # the turns of _entries
        self._built: list[UserTurn] | None = None   # _entries as UserTurns (lazily)

    @classmethod
    def of(cls, events: Iterable[Any]) -> UserTurnIndex:
        index = cls()
        for e in events:
            index.apply(e)
        return index

    def apply(self, e: Any) -> None:
        if isinstance(e, UserMessage):
            if e.turn > self.through and e.turn not in self.failed:
                self._entries.append((e.turn, e.content))
                self._listed.add(e.turn)
                if self._built is not None:
                    self._built.append(self._make(e.turn, e.content))
        elif isinstance(e, TurnStart):
            if e.turn > self.through:
                self._metas[e.turn] = _frozen(e.meta)
                if e.turn in self._listed:
                    self._built = None   # the meta of a message already listed changed
        elif isinstance(e, TurnEnd):
            if not e.committed and e.turn not in self.failed:
                self.failed.add(e.turn)
                self._keep(lambda t: t != e.turn)
        elif isinstance(e, Compaction):
            if e.through_turn > self.through:
                self.through = e.through_turn
                self._metas = {t: m for t, m in self._metas.items() if t > self.through}
                self._keep(lambda t: t > self.through)

    def _keep(self, wanted) -> None:
        kept = [(t, c) for t, c in self._entries if wanted(t)]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._listed = {t for t, _ in kept}
            self._built = None

    def _make(self, turn: int, content: str) -> UserTurn:
        return UserTurn(turn, self._metas.get(turn, _EMPTY), content)

    def turns(self, through: int = 0) -> list[UserTurn]:
        """The turns after ``through`` (at least the index's own), oldest first."""
        if self._built is None:
            self._built = [self._make(t, c) for t, c in self._entries]
        if through <= self.through:
            return list(self._built)
        return [u for u in self._built if u.turn > through]


_EMPTY: MappingProxyType[str, Any] = MappingProxyType({})


def scan_user_turns(events: list[Any], through: int = 0) -> list[UserTurn]:
    """The reference: the same answer from a walk of every event."""
    through = max([through, *(e.through_turn for e in events if isinstance(e, Compaction))])
    failed = {e.turn for e in events if isinstance(e, TurnEnd) and not e.committed}
    metas = {e.turn: e.meta for e in events if isinstance(e, TurnStart)}
    return [UserTurn(e.turn, _frozen(metas.get(e.turn)), e.content) for e in events
            if isinstance(e, UserMessage) and e.turn > through and e.turn not in failed]
