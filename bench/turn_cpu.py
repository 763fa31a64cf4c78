"""Harness CPU per review turn as a PR's session grows, and resume time by session size.

A review turn here is what the reviewer's turns look like to the harness: a ~1.5 KB user
message, five tool calls whose ~2 KB results come back at once (their work happens elsewhere),
then the findings: six model requests and twelve messages per review. The model is the
scripted model server in a child process, answering instantly, so the CPU measured
(``time.process_time`` of this process, threads included) is the harness's own. As deployed,
the agent is evicted after every turn and resumed from its log for the next one.

Resume: a session of N events written straight through the session API, then resumed cold
(a fresh harness: the whole log is read) and resumed again after an eviction (what every review
turn does).

Usage: python bench/turn_cpu.py [--reviews 2,10,40,100] [--events 1000,5000,20000]
Run it once on unchanged main code too (PYTHONPATH=<a main checkout>) for the "before" column,
or compare with the figures measured when the issue was filed: 130 / 339 / 988 ms per turn at
the 2nd / 10th / 40th review. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dsh_harness import Harness, hookimpl, parse_config
from dsh_harness.agents import AgentWorld, Tool
from dsh_harness.sessions.events import (
    AssistantMessage,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallStarted,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)

SYSTEM = "You review pull requests for correctness, security and clarity. " * 40
TOOLS = ["get_file", "get_diff", "list_files", "search_code", "get_comments"]
TOOL_CALLS_PER_REVIEW = 5
RESULT = "".join(f"{i:4d} | def handler_{i}(request): return render(request, 'page.html')\n"
                 for i in range(28))  # ~2 KB


async def canned(args, ctx) -> str:
    return f"[{args.get('path', '')}]\n" + RESULT


class World:
    @hookimpl
    def dsh_agent_world(self, harness, session_id):
        tools = [Tool(name, f"The {name} tool.",
                      {"type": "object", "properties": {"path": {"type": "string"}}}, canned)
                 for name in TOOLS]
        return AgentWorld(system_prompt=SYSTEM, tools=tools, turn_timeout_s=600)


def review_message(n: int) -> str:
    return (f"Flow: review\nTrigger: push {n:040x}\nPR #7 'Refactor the handlers'\n"
            + "Changed files: " + ", ".join(f"app/handlers_{i}.py" for i in range(40)) + "\n"
            + "Review the new head; post exactly one review. " * 12)


# -- the model, in its own process ----------------------------------------------------------

def model_main() -> None:
    from dsh_harness.testing import Reply, ScriptedModelServer

    def policy(req):
        done = len(req.tool_results())
        if done < TOOL_CALLS_PER_REVIEW:
            return Reply(content=None, reasoning=f"Next I read file {done}.",
                         tool_calls=[(TOOLS[done], {"path": f"app/handlers_{done}.py"})])
        return Reply(content="Findings:\n" + "- app/handlers_3.py:12 looks fine.\n" * 12,
                     reasoning="All read; writing the review.")

    server = ScriptedModelServer(policy=policy).start()
    print(server.base_url, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.stop()


def start_model() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, __file__, "--model-server"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def harness(home: Path, base_url: str) -> Harness:
    cfg = (f'home = "{home}"\ndefault_model = "sim/deepseek-v4-flash"\n'
           f'[providers.sim]\nbase_url = "{base_url}"\napi_key = "bench"\nmax_retries = 0\n')
    return Harness(parse_config(cfg, "bench.toml", home), load_entry_points=False,
                   plugins=[("world", World())])


# -- CPU per review turn -----------------------------------------------------------------------

async def turn_cpu(points: list[int], base_url: str) -> dict[int, float]:
    """CPU ms of the review turn at each point (median of that review and the next two)."""
    last = max(points) + 2
    cpu: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        h = harness(Path(tmp), base_url)
        sid = "bench:pr:7"
        for n in range(1, last + 1):
            start = time.process_time()
            agent = await h.agents.get_or_open(sid)
            outcome = await agent.followup(review_message(n))
            await h.agents.evict(sid)
            cpu.append((time.process_time() - start) * 1000)
            if not outcome.ok:
                raise SystemExit(f"review {n} failed: {outcome.error}")
        await h.close()
    return {p: statistics.median(cpu[p - 1:p + 2]) for p in points}


# -- resume time ---------------------------------------------------------------------------------

async def write_session(h: Harness, sid: str, events: int) -> None:
    session = await h.sessions.create(sid, {"bench": True})
    turn = 0
    while len(session.events) < events:
        turn += 1
        await session.record(TurnStart, turn=turn, meta={"flow": "review"})
        await session.record(UserMessage, turn=turn, content=review_message(turn))
        for step in range(1, TOOL_CALLS_PER_REVIEW + 1):
            call = ToolCall(id=f"call_{turn}_{step}", name=TOOLS[step - 1],
                            arguments=json.dumps({"path": f"app/handlers_{step}.py"}))
            await session.record(StepStart, turn=turn, step=step)
            await session.record(AssistantMessage, turn=turn, reasoning="Reading.",
                                 tool_calls=[call], model="deepseek-v4-flash")
            await session.record(ToolCallStarted, turn=turn, call_id=call.id, name=call.name,
                                 arguments=call.arguments)
            await session.record(ToolResult, turn=turn, call_id=call.id, name=call.name,
                                 content=RESULT)
            await session.record(StepEnd, turn=turn, step=step)
        await session.record(AssistantMessage, turn=turn, content="Findings: fine.",
                             model="deepseek-v4-flash")
        await session.record(TurnEnd, turn=turn, reason="completed")
    await session.flush()
    await h.sessions.release(sid)


async def resume_ms(sizes: list[int], base_url: str) -> dict[int, tuple[float, float]]:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            sid = f"bench:resume:{size}"
            h = harness(Path(tmp), base_url)
            await write_session(h, sid, size)
            await h.close()
            h = harness(Path(tmp), base_url)
            start = time.perf_counter()
            await h.agents.resume(sid)
            cold = (time.perf_counter() - start) * 1000
            warm = []
            for _ in range(3):
                await h.agents.evict(sid)
                start = time.perf_counter()
                await h.agents.resume(sid)
                warm.append((time.perf_counter() - start) * 1000)
            out[size] = (cold, statistics.median(warm))
            await h.close()
    return out


def code_label() -> str:
    import dsh_harness

    root = Path(dsh_harness.__file__).resolve().parents[1]
    rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    return f"{root} @ {rev or '?'}"


async def main(args: argparse.Namespace) -> None:
    points = [int(x) for x in args.reviews.split(",")]
    sizes = [int(x) for x in args.events.split(",")]
    proc, base_url = start_model()
    try:
        cpu = await turn_cpu(points, base_url)
        resume = await resume_ms(sizes, base_url)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    result = {"code": code_label(), "turn_cpu_ms": cpu, "resume_ms": resume}
    if args.json:
        print(json.dumps(result))
        return
    print(f"code: {result['code']}")
    print(f"{'review':>7} | {'harness CPU ms/turn':>19}")
    for p, ms in cpu.items():
        print(f"{p:>7} | {ms:>19.1f}")
    print(f"\n{'events':>7} | {'cold resume ms':>14} | {'resume after evict ms':>21}")
    for n, (cold, warm) in resume.items():
        print(f"{n:>7} | {cold:>14.1f} | {warm:>21.1f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--model-server"]:
        model_main()
        raise SystemExit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", default="2,10,40,100")
    parser.add_argument("--events", default="1000,5000,20000")
    parser.add_argument("--json", action="store_true", help="one JSON line (for comparisons)")
    asyncio.run(main(parser.parse_args()))
