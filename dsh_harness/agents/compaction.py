"""Token-budget compaction: summarize the oldest whole turns into one head message.

It runs before a model request whose prompt would exceed the budget. Only whole, ended turns
before the running one are summarized (so a tool call is never split from its result), and a
``compaction`` event records the cut. The cut leaves headroom: the oldest turns are summarized
until the prompt is at most ``compaction.target`` of the budget, so the runs that follow
append to one stable head — a prefix-cache hit — instead of compacting again at every run. No
more than that: every turn kept verbatim stays in the head the next run re-sends from the
cache, while the run's new message is paid uncached, so a head summarized down to a few
turns would make that message a large share of the next request. The newest
``keep_recent_turns`` are summarized only when keeping them would not fit under the target.

The summary request continues the session's prompt (``COMPACTION_INSTRUCTION``), so the
provider reads the head from its prefix cache instead of a transcript it never saw.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..config import CompactionConfig, ModelSpec
from ..sessions.events import TurnEnd
from ..sessions.history import latest_compaction, model_messages

# The summary is asked for as a continuation of the session's own prompt: the same system
# prompt, tools and messages (the head through the cut: a prefix of the requests the provider
# has already seen, so a prefix-cache hit), then this message, with tool calls forbidden
# (``tool_choice: "none"``). It asks for everything above it, which is exactly what folds.
COMPACTION_INSTRUCTION = (
    "Context compaction: every message above this one, after the system prompt, is about to be "
    "replaced by the summary you write now, for your own future reference. Write a faithful, "
    "compact summary of those messages: decisions, findings with file paths and line numbers, "
    "open questions, and anything you promised. Answer with the summary text only: call no "
    "tool, do not continue the task, no preamble.")

# The fallback when that request is rejected or answered without text (or with tool calls):
# a conversation of its own, one user message holding a text transcript of the head.
SUMMARY_SYSTEM = ("You compress conversations. Write a faithful, compact summary of the "
                  "transcript you are given: decisions, findings with file paths and line "
                  "numbers, open questions, and anything the assistant promised. No preamble.")
SUMMARY_INSTRUCTION = "Summarize the transcript above for your own future reference."


def estimate_tokens(payload: Any) -> int:
    """Deterministic estimate: one token per 4 bytes of canonical JSON."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return math.ceil(len(text.encode()) / 4)


def budget(config: CompactionConfig, spec: ModelSpec) -> int:
    limit = int(spec.context_window * config.threshold)
    if config.max_prompt_tokens:
        limit = min(limit, config.max_prompt_tokens)
    return limit


def eligible_through_turn(events: list[Any], current_turn: int, keep_recent: int) -> int | None:
    """The last turn that may be folded into a summary, or None if nothing may be."""
    ended = [e.turn for e in events
             if isinstance(e, TurnEnd) and e.committed and e.turn < current_turn]
    previous = latest_compaction(events)
    floor = previous.through_turn if previous else 0
    candidates = [t for t in ended if t > floor]
    if len(candidates) <= keep_recent:
        return None
    return candidates[-keep_recent - 1] if keep_recent else candidates[-1]


def cut_through_turn(events: list[Any], current_turn: int, keep_recent: int, size: int,
                     target: int) -> int | None:
    """The last turn to summarize so the prompt of ``size`` tokens falls to ``target``: the
    fewest oldest turns that reach it (the newest ``keep_recent`` too only when that is
    needed); when nothing reaches it, the turns ``keep_recent`` allows; None if no whole ended
    turn may be summarized."""
    ended = [e.turn for e in events
             if isinstance(e, TurnEnd) and e.committed and e.turn < current_turn]
    previous = latest_compaction(events)
    floor = previous.through_turn if previous else 0
    candidates = [t for t in ended if t > floor]
    if not candidates:
        return None
    preferred = eligible_through_turn(events, current_turn, keep_recent) or 0
    by_turn: dict[int, list[Any]] = {}
    for e in events:
        turn = getattr(e, "turn", None)
        if turn in candidates:
            by_turn.setdefault(turn, []).append(e)
    left = size
    for t in candidates:
        left -= estimate_tokens(model_messages(by_turn.get(t, []), reasoning="none"))
        if left <= target:
            return t
    # Nothing reaches the target (the new turn alone is that big): summarizing the newest
    # turns too would gain no room to append to, so only what keep_recent allows.
    return preferred or None


def transcript(messages: list[dict[str, Any]]) -> str:
    lines = []
    for m in messages:
        role = m["role"]
        if m.get("content"):
            lines.append(f"[{role}] {m['content']}")
        for call in m.get("tool_calls", []):
            fn = call["function"]
            lines.append(f"[{role} tool call {fn['name']}] {fn['arguments']}")
    return "\n\n".join(lines)


def head_messages(events: list[Any], through_turn: int) -> list[dict[str, Any]]:
    head = [e for e in events if getattr(e, "turn", None) is None or e.turn <= through_turn]
    return model_messages(head, reasoning="none")
