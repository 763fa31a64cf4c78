"""Answers already in a session's log.

A turn can commit and the process die before its answer is acted on (a /bot reply posted, a
persona's report handed to the coordinator). Asking again would put the same user turn into
the replayed history twice, so a retry first looks for the committed answer. Only committed
turns count: a failed attempt is never an answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsh_harness import Harness


async def committed_answer(harness: Harness, session_id: str,
                           match: Callable[[dict[str, Any]], bool]) -> str | None:
    """The final answer of the newest committed turn whose meta ``match``es and whose answer is
    not empty, or None. Reads the log (never resumes it)."""
    if not await harness.sessions.exists(session_id):
        return None
    events = (await harness.sessions.read(session_id)).events
    starts = {e.turn: e.meta for e in events if e.type == "turn_start"}
    done = {e.turn for e in events if e.type == "turn_end" and e.committed}
    answers: dict[int, str] = {}
    for e in events:
        if e.type == "assistant_message" and not e.tool_calls:
            answers[e.turn] = e.content or ""
    for turn in sorted(done, reverse=True):
        if match(starts.get(turn) or {}) and answers.get(turn, "").strip():
            return answers[turn]
    return None
