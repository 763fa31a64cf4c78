"""What an agent is: its world (prompt, tools, limits), as the world owner's hook returns it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import DshError


class ToolRejected(DshError):
    """Raised by a tool handler to refuse a call; the text goes back to the model as an error.

    A rejected call does not use the turn's tool budget. ``note`` (optional) goes to the
    session log's tool result instead of the plain "rejected", so a plugin can record why as
    data (e.g. "rejected: severity missing") for people and counts; the model never sees it.
    """

    def __init__(self, message: str = "", *, note: str | None = None) -> None:
        super().__init__(message)
        self.note = note


class BudgetExhausted(ToolRejected):
    pass


@dataclass
class ToolContext:
    """Per-call view of the running turn, passed to tool handlers."""

    session_id: str
    turn: int
    turn_meta: dict[str, Any]
    call_id: str
    _consume: Callable[[], None]
    _consumed: bool = False

    def consume_budget(self) -> None:
        """Count this call against the turn's budget (raises ``BudgetExhausted`` when spent).

        Handlers of ``self_budgeted`` tools call it after validating their arguments, so
        rejected calls stay free; other tools are charged before they run.
        """
        if not self._consumed:
            self._consume()
            self._consumed = True


class ToolText(str):
    """A tool result with a note for the session log (``ToolResult.note``, shown by the web UI),
    never sent to the model: e.g. the URL of what the call posted, which the model does not
    need but a person reading the session does.

    ``ends_turn``: the call completed the turn's task (e.g. a review was submitted), so the
    turn ends after this step without another model request; the step's own text is the
    turn's answer. A model that still has something to say says it in that step."""

    note: str | None
    ends_turn: bool

    def __new__(cls, text: str, note: str | None = None, ends_turn: bool = False) -> ToolText:
        obj = super().__new__(cls, text)
        obj.note = note
        obj.ends_turn = ends_turn
        return obj


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[str]]


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler
    self_budgeted: bool = False

    def schema(self) -> dict[str, Any]:
        # Round-trip through sorted JSON so the schema bytes never depend on dict build order.
        params = json.loads(json.dumps(self.parameters, sort_keys=True))
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": params}}


@dataclass
class AgentWorld:
    """One complete system prompt, the session's scoped tools and its limits.

    ``hide_global_tools`` restricts the agent to ``tools``; the harness's global tools are then
    invisible. ``model`` is ``provider/model`` (default: the deployment's default model).
    """

    system_prompt: str
    tools: list[Tool] = field(default_factory=list)
    hide_global_tools: bool = True
    model: str | None = None
    max_tool_calls: int | None = None
    tool_timeout_s: float = 30.0
    tool_result_limit: int = 60_000
    turn_timeout_s: float | None = None
    max_steps: int = 100
    # Opaque to the harness: the world owner's per-session state (e.g. the reviewer's guard).
    context: Any = None

    def visible_tools(self, global_tools: list[Tool]) -> list[Tool]:
        tools = {t.name: t for t in ([] if self.hide_global_tools else global_tools)}
        tools.update({t.name: t for t in self.tools})
        # Canonical order: the request bytes must not depend on registration order.
        return [tools[name] for name in sorted(tools)]
