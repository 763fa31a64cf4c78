"""The model-facing messages of a live session, extended event by event.

``history.model_messages`` is the reference: for the events applied so far a ``Transcript``
holds exactly its messages (with ``current_turn`` = the open turn), but costs O(new events) per
event instead of a walk of the whole log per request. Each message is kept in provider form
next to its JSON encoding, so a request body is a join of cached bytes and the prompt-size
estimate a running sum. Only a compaction rebuilds (once, from the turns kept verbatim).

The committed encodings are also kept pre-joined in a few runs (``encoded_runs``), so a
provider can send a history-sized body as a handful of buffers it already has instead of
copying the whole history into a fresh one at every request.
"""

from __future__ import annotations

import json
from typing import Any

from .events import AssistantMessage, Compaction, ToolResult, TurnEnd, TurnStart, UserMessage
from .history import ReasoningReplay, assistant_message, summary_messages


def encode(obj: Any) -> bytes:
    """Compact JSON, UTF-8, as the provider SDK serialized request bodies (byte for byte)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class _Turn:
    """One turn's messages: the events (to re-render reasoning) and their encodings."""

    __slots__ = ("encoded", "events", "messages")

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.messages: list[dict[str, Any]] = []
        self.encoded: list[bytes] = []

    def add(self, event: Any, message: dict[str, Any]) -> None:
        self.events.append(event)
        self.messages.append(message)
        self.encoded.append(encode(message))


class Transcript:
    def __init__(self, reasoning: ReasoningReplay = "all"):
        self.reasoning = reasoning
        self._head: list[dict[str, Any]] = []  # the summary pair after a compaction
        self._turns: dict[int, _Turn] = {}  # committed turns kept verbatim, in order
        self._first_turn = 0  # turns before this one were compacted away
        self._open: int | None = None  # the running turn (not yet committed)
        # The committed part, flattened: extended at each commit, rebuilt at a compaction.
        self._messages: list[dict[str, Any]] = []
        self._encoded: list[bytes] = []
        self._bytes = 0
        # The same committed encodings, each preceded by a comma, in runs of consecutive
        # messages: b"".join(self._runs) == b"".join(b"," + e for e in self._encoded).
        # A commit appends a run; the last two merge while the older is under twice the
        # newer's size (a binary counter), so there are O(log messages) runs and each byte is
        # copied O(log messages) times in the session's life, not once per request.
        self._runs: list[bytes] = []

    @classmethod
    def of(cls, events: list[Any], reasoning: ReasoningReplay = "all") -> Transcript:
        t = cls(reasoning)
        for e in events:
            t.apply(e)
        return t

    # -- reading ----------------------------------------------------------------------------

    def messages(self) -> list[dict[str, Any]]:
        running = self._running()
        return self._messages + running.messages if running else list(self._messages)

    def encoded(self) -> list[bytes]:
        running = self._running()
        return self._encoded + running.encoded if running else list(self._encoded)

    def encoded_runs(self) -> list[bytes]:
        """``encoded()`` pre-joined: runs of consecutive encodings, each encoding preceded by
        a comma (b"".join(runs) == b"".join(b"," + e for e in encoded())); the committed
        runs are the very objects of every request until the next commit."""
        running = self._running()
        if running and running.encoded:
            return [*self._runs, comma_run(running.encoded)]
        return list(self._runs)

    def encoded_size(self) -> int:
        """Bytes of all encoded messages, without separators."""
        running = self._running()
        return self._bytes + (sum(map(len, running.encoded)) if running else 0)

    def through(self, turn: int) -> tuple[list[dict[str, Any]], list[bytes]]:
        """The messages and encodings of the head (an earlier summary) and of the committed
        turns up to ``turn``: the first ones of ``messages()``, the very objects and bytes it
        returns (turns commit in order), so a request made of them repeats a prefix of the
        requests already sent."""
        n = len(self._head) + sum(len(t.messages) for number, t in self._turns.items()
                                  if number <= turn and number != self._open)
        return self._messages[:n], self._encoded[:n]

    def __len__(self) -> int:
        running = self._running()
        return len(self._messages) + (len(running.messages) if running else 0)

    def _running(self) -> _Turn | None:
        return self._turns.get(self._open) if self._open is not None else None

    # -- applying events --------------------------------------------------------------------

    def apply(self, e: Any) -> None:
        if isinstance(e, TurnStart):
            self._open = e.turn
        elif isinstance(e, TurnEnd):
            self._end(e)
        elif isinstance(e, Compaction):
            self._compact(e)
        elif isinstance(e, UserMessage | AssistantMessage | ToolResult):
            if e.turn < self._first_turn:
                return
            turn = self._turns.setdefault(e.turn, _Turn())
            turn.add(e, self._render(e, e.turn == self._open))
            if e.turn != self._open:  # not the running turn (only odd logs): it counts now
                self._flatten()

    def _render(self, e: Any, current: bool) -> dict[str, Any]:
        if isinstance(e, UserMessage):
            return {"role": "user", "content": e.content}
        if isinstance(e, AssistantMessage):
            keep = self.reasoning == "all" or (self.reasoning == "current_turn" and current)
            return assistant_message(e, keep)
        return {"role": "tool", "tool_call_id": e.call_id, "content": e.content}

    def _end(self, e: TurnEnd) -> None:
        if e.turn == self._open:
            self._open = None
        turn = self._turns.get(e.turn)
        if turn is None:
            return
        if not e.committed:  # a failed attempt: never replayed
            del self._turns[e.turn]
            return
        if self.reasoning == "current_turn":  # its reasoning is no longer the current turn's
            ended = _Turn()
            for event in turn.events:
                ended.add(event, self._render(event, False))
            self._turns[e.turn] = turn = ended
        self._messages += turn.messages
        self._encoded += turn.encoded
        self._bytes += sum(map(len, turn.encoded))
        if turn.encoded:
            self._add_run(comma_run(turn.encoded))

    def _compact(self, e: Compaction) -> None:
        self._first_turn = e.through_turn + 1
        self._head = summary_messages(e.summary)
        for number in [n for n in self._turns if n < self._first_turn]:
            del self._turns[number]
        self._flatten()

    def _flatten(self) -> None:
        self._messages = list(self._head)
        for number, turn in self._turns.items():
            if number != self._open:
                self._messages += turn.messages
        self._encoded = [encode(m) for m in self._head]
        for number, turn in self._turns.items():
            if number != self._open:
                self._encoded += turn.encoded
        self._bytes = sum(map(len, self._encoded))
        self._runs = []
        if self._encoded:
            self._add_run(comma_run(self._encoded))

    def _add_run(self, run: bytes) -> None:
        runs = self._runs
        runs.append(run)
        while len(runs) >= 2 and len(runs[-2]) < 2 * len(runs[-1]):
            last = runs.pop()
            runs[-1] += last


def comma_run(encoded: list[bytes]) -> bytes:
    """Encodings as one run of a request's messages array: each preceded by its comma."""
    return b"," + b",".join(encoded)
