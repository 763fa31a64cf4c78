"""The tool execution pipeline: lookup, argument parsing, budget, timeout, result cap.

Every failure becomes a tool result with the error flag, so the model can correct itself and
the turn goes on; nothing here raises into the agent loop except cancellation and a fenced
write (``FencedOut``: the process lost the work's lease, so the turn stops at once instead of
asking the model to try again).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from ..sessions.events import ToolCall
from ..storage.fence import FencedOut
from .world import Tool, ToolContext, ToolRejected, ToolText

log = logging.getLogger(__name__)

TRUNCATION_NOTE = "\n...[tool result truncated]"


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    note: str | None = None
    ends_turn: bool = False


def cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + TRUNCATION_NOTE


async def execute(tools: dict[str, Tool], call: ToolCall, ctx: ToolContext,
                  timeout_s: float, result_limit: int) -> ToolOutcome:
    tool = tools.get(call.name)
    if tool is None:
        return ToolOutcome(f"unknown tool {call.name!r}; available tools: "
                           f"{', '.join(sorted(tools)) or 'none'}", True, "rejected")
    try:
        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolOutcome(f"arguments of {call.name} are not valid JSON: {exc}", True, "rejected")
    if not isinstance(args, dict):
        return ToolOutcome(f"arguments of {call.name} must be a JSON object", True, "rejected")
    try:
        if not tool.self_budgeted:
            ctx.consume_budget()
        async with asyncio.timeout(timeout_s):
            text = await tool.handler(args, ctx)
    except ToolRejected as exc:
        return ToolOutcome(cap(str(exc), result_limit), True, exc.note or "rejected")
    except TimeoutError:
        return ToolOutcome(f"tool {call.name} timed out after {timeout_s:g}s", True, "timeout")
    except (asyncio.CancelledError, FencedOut):
        raise
    except Exception as exc:
        log.warning("tool %s failed: %s: %s", call.name, type(exc).__name__, exc)
        return ToolOutcome(cap(f"tool {call.name} failed: {type(exc).__name__}: {exc}",
                               result_limit), True, "error")
    note = text.note if isinstance(text, ToolText) else None
    ends = text.ends_turn if isinstance(text, ToolText) else False
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, sort_keys=True, default=str)
    return ToolOutcome(cap(str(text), result_limit), note=note, ends_turn=ends)
