"""Shared pieces for agent tests: a world-owning test plugin and a harness on a scripted model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from dsh_harness import Harness, ToolText, hookimpl, parse_config
from dsh_harness.agents import AgentWorld, Tool

SYSTEM = "You are a test agent. Use tools when asked."


async def echo(args: dict[str, Any], ctx) -> str:
    return f"echo:{args.get('text', '')}"


async def slow(args: dict[str, Any], ctx) -> str:
    await asyncio.sleep(float(args.get("seconds", 10)))
    return "slow done"


async def big(args: dict[str, Any], ctx) -> str:
    return "x" * int(args.get("n", 1000))


async def done(args: dict[str, Any], ctx) -> str:
    """The turn's task is complete (like the reviewer's submit): the turn ends here."""
    return ToolText("submitted", ends_turn=True)


def tool(name: str, handler, desc: str = "") -> Tool:
    return Tool(name=name, description=desc or f"the {name} tool",
                parameters={"type": "object", "properties": {"text": {"type": "string"},
                                                             "seconds": {"type": "number"},
                                                             "n": {"type": "integer"}}},
                handler=handler)


class WorldsPlugin:
    """Owns session ids ``test:*``; ``test:open:*`` sessions may see global tools."""

    def __init__(self, **world_kw: Any):
        self.world_kw = world_kw
        self.calls: list[str] = []
        self.inputs: list[Any] = []

    @hookimpl
    def dsh_agent_world(self, harness, session_id, inputs):
        if not session_id.startswith("test:"):
            return None
        self.calls.append(session_id)
        self.inputs.append(inputs)
        if session_id.startswith("test:inputs") and inputs is not None:
            # A per-turn world input: the model of this attempt.
            return AgentWorld(system_prompt=SYSTEM, model=inputs["model"])
        tools = [tool("echo", echo), tool("slow", slow), tool("big", big)]
        if session_id.startswith("test:done"):
            tools.append(tool("done", done))
        if session_id.startswith("test:private"):
            tools.append(tool("private_only", echo))
        return AgentWorld(system_prompt=SYSTEM, tools=tools,
                          hide_global_tools=not session_id.startswith("test:open"),
                          **self.world_kw)

    @hookimpl
    async def dsh_session_title(self, harness, session):
        if session.id.startswith("test:pinned"):
            return f"Pinned {session.id}"
        return None


def config_text(base_url: str, extra: str = "") -> str:
    return (f'home = "home"\ndefault_model = "scripted/deepseek-v4-flash"\n'
            f'[providers.scripted]\nbase_url = "{base_url}"\napi_key = "test-key"\n'
            f'retry_base_s = 0.01\nmax_retries = 3\n{extra}')


def make_harness(tmp_path: Path, base_url: str, extra: str = "", **world_kw: Any) -> Harness:
    loaded = parse_config(config_text(base_url, extra), "test.toml", tmp_path)
    return Harness(loaded, load_entry_points=False, plugins=[("worlds", WorldsPlugin(**world_kw))])


def canon(messages: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(m, sort_keys=False, ensure_ascii=False) for m in messages]
