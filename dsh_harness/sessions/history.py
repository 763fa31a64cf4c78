"""Derive the model-facing message list from a session's events.

This function is the prefix-cache contract: for the same events it returns the same messages,
byte for byte once serialized, whether the session has been live all along or was just loaded
from disk. Nothing here may depend on time, randomness or dict iteration of unordered data.
"""

from __future__ import annotations

from typing import Any, Literal

from .events import AssistantMessage, Compaction, ToolResult, TurnEnd, UserMessage

ReasoningReplay = Literal["all", "current_turn", "none"]

SUMMARY_PREFIX = ("<conversation_summary>\nThe earlier part of this conversation was compacted "
                  "into this summary:\n\n")
SUMMARY_SUFFIX = "\n</conversation_summary>"
SUMMARY_ACK = "Understood. I will continue from this summary."


def assistant_message(e: AssistantMessage, with_reasoning: bool) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": e.content}
    if with_reasoning and e.reasoning is not None:
        msg["reasoning_content"] = e.reasoning
    if e.tool_calls:
        msg["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for c in e.tool_calls
        ]
    for key in sorted(e.provider_fields):
        msg.setdefault(key, e.provider_fields[key])
    return msg


def latest_compaction(events: list[Any]) -> Compaction | None:
    found = None
    for e in events:
        if isinstance(e, Compaction):
            found = e
    return found


def failed_attempts(events: list[Any]) -> set[int]:
    """Turn numbers whose attempt failed and is never replayed."""
    return {e.turn for e in events if isinstance(e, TurnEnd) and not e.committed}


def summary_messages(summary: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": SUMMARY_PREFIX + summary + SUMMARY_SUFFIX},
            {"role": "assistant", "content": SUMMARY_ACK}]


def model_messages(events: list[Any], reasoning: ReasoningReplay = "all",
                   current_turn: int | None = None) -> list[dict[str, Any]]:
    """Messages after the system prompt, in the order they were exchanged.

    Failed attempts (``TurnEnd.committed`` False) are left out: only committed turns and the
    running one are replayed.
    """
    compaction = latest_compaction(events)
    first_turn = compaction.through_turn + 1 if compaction else 0
    out = summary_messages(compaction.summary) if compaction else []
    failed = failed_attempts(events)
    for e in events:
        turn = getattr(e, "turn", None)
        if turn is None or turn < first_turn or turn in failed:
            continue
        if isinstance(e, UserMessage):
            out.append({"role": "user", "content": e.content})
        elif isinstance(e, AssistantMessage):
            keep = reasoning == "all" or (reasoning == "current_turn" and turn == current_turn)
            out.append(assistant_message(e, keep))
        elif isinstance(e, ToolResult):
            out.append({"role": "tool", "tool_call_id": e.call_id, "content": e.content})
    return out
