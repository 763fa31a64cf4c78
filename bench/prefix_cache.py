"""Prefix-cache economics of one persistent session vs. a stateless baseline.

A 5-turn session (each turn reads a large tool result, then answers) runs through the harness
against the scripted model server's DeepSeek-style cache simulator. The baseline runs each
turn's same content in a fresh session (same system prompt and tools, no history). Prices:
the deployment defaults for deepseek-v4-flash. Prints a table; asserts nothing.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from dsh_harness import Harness, hookimpl, parse_config
from dsh_harness.agents import AgentWorld, Tool
from dsh_harness.sessions.events import AssistantMessage
from dsh_harness.testing import ModelRequest, Reply, ScriptedModelServer

TURNS = 5
SYSTEM = "You review code changes carefully. " * 120


async def read_chunk(args, ctx) -> str:
    n = int(args.get("part", 0))
    return "".join(f"line {n}.{i}: some code that changed in this revision\n" for i in range(600))


class World:
    @hookimpl
    def dsh_agent_world(self, harness, session_id):
        tool = Tool("read_part", "Read part N of the change.",
                    {"type": "object", "properties": {"part": {"type": "integer"}}}, read_chunk)
        return AgentWorld(system_prompt=SYSTEM, tools=[tool])


def policy(req: ModelRequest) -> Reply:
    if not req.tool_results():
        part = int(req.last_user_text().split()[-1])
        return Reply(tool_calls=[("read_part", {"part": part})])
    return Reply(content="Findings: " + "the change looks fine overall. " * 20)


async def run(stateless: bool) -> list:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(policy=policy) as server:
        cfg = (f'home = "{tmp}"\ndefault_model = "sim/deepseek-v4-flash"\n'
               f'[providers.sim]\nbase_url = "{server.base_url}"\napi_key = "bench"\n')
        h = Harness(parse_config(cfg, "bench.toml", Path(tmp)), load_entry_points=False,
                    plugins=[("world", World())])
        rows = []
        agent = None
        for turn in range(1, TURNS + 1):
            if stateless or agent is None:
                agent = await h.agents.create(f"bench:{turn if stateless else 0}")
            outcome = await agent.followup(f"Review part {turn}")
            msgs = [e for e in agent.session.events
                    if isinstance(e, AssistantMessage) and e.turn == outcome.turn]
            prompt = sum(m.usage.prompt for m in msgs)
            hit = sum(m.usage.cache_read for m in msgs)
            rows.append((turn, prompt, hit, outcome.usage.cost_usd))
        await h.close()
        return rows


async def main() -> None:
    persistent, stateless = await run(False), await run(True)
    print(f"{'turn':>4} | {'session prompt':>14} {'cache hit':>10} {'hit %':>6} {'cost $':>10} | "
          f"{'stateless prompt':>16} {'cache hit':>10} {'hit %':>6} {'cost $':>10}")
    totals = [0.0, 0.0]
    for (t, p, h, c), (_, bp, bh, bc) in zip(persistent, stateless, strict=True):
        totals[0] += c
        totals[1] += bc
        print(f"{t:>4} | {p:>14} {h:>10} {100 * h / p:>5.1f}% {c:>10.6f} | "
              f"{bp:>16} {bh:>10} {100 * bh / bp:>5.1f}% {bc:>10.6f}")
    print(f"{'sum':>4} | {'':>14} {'':>10} {'':>6} {totals[0]:>10.6f} | "
          f"{'':>16} {'':>10} {'':>6} {totals[1]:>10.6f}")
    print("\nThe persistent session carries all earlier turns (more context for the model); its "
          "turns after the first are billed mostly at the cache price.")


if __name__ == "__main__":
    asyncio.run(main())
