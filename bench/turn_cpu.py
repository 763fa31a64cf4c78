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

Deployed: the bot process's CPU per review of one PR through the reviewer's real poller and
runner, with the sandbox GitHub, the scripted reviewer model and github-mcp-server in other
processes and a push before every re-review (see bench/deployed_turns.py).

Usage: python bench/turn_cpu.py [--reviews 2,10,40,100] [--events 1000,5000,20000]
                                 [--sections harness,deployed] [--before-code CHECKOUT]
The "before" column is, with ``--before-code``, this same bench run live on another checkout
(e.g. ``git worktree add /tmp/before b99c1b0``; the deployed section then takes a few minutes
more, the old code being quadratic); without it, the figures this bench measured on main
b99c1b0 (the code before issue 10) on the 2-core shared development machine. The issue's own
figures (130 / 339 / 988 ms per deployed review turn at the 2nd / 10th / 40th review) are
quoted beside them. Prints tables; asserts nothing.
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

from deployed_turns import deployed_cpu

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


# This bench on main b99c1b0 (before issue 10), 2-core shared machine, 2026-11-30.
RECORDED_BEFORE = {
    "code": "main b99c1b0 (recorded)",
    "turn_cpu_ms": {2: 66.7, 10: 159.9, 40: 580.6, 100: 1427.4},
    "resume_ms": {1000: (16.0, 12.5), 5000: (43.8, 127.7), 20000: (285.4, 495.7)},
    "deployed_ms": {"turn": {2: 53.7, 10: 95.6, 40: 250.5, 100: 673.2},
                    "tick": {2: 68.2, 10: 106.7, 40: 263.0, 100: 686.5}},
}
# The issue's figures: harness CPU per review turn as deployed (quoted, not measured here).
ISSUE_DEPLOYED_MS = {2: 130.0, 10: 339.0, 40: 988.0}


def run_before(checkout: str, args: argparse.Namespace) -> dict:
    """This bench, run on another checkout's code (PYTHONPATH) in a child process."""
    env = {**os.environ, "PYTHONPATH": checkout}
    out = subprocess.run([sys.executable, __file__, "--json", "--reviews", args.reviews,
                          "--events", args.events, "--sections", args.sections], env=env,
                         capture_output=True, text=True, check=True, cwd=checkout).stdout
    return parse_result(json.loads(out.strip().splitlines()[-1]))


def parse_result(data: dict) -> dict:
    """A --json line back into numbers (JSON keys are strings)."""
    return {"code": data["code"],
            "turn_cpu_ms": {int(k): v for k, v in data["turn_cpu_ms"].items()},
            "resume_ms": {int(k): tuple(v) for k, v in data["resume_ms"].items()},
            "deployed_ms": {part: {int(k): v for k, v in rows.items()}
                            for part, rows in data["deployed_ms"].items()}}


def code_label() -> str:
    import dsh_harness

    root = Path(dsh_harness.__file__).resolve().parents[1]
    rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    return f"{root} @ {rev or '?'}"


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_harness(result: dict, before: dict) -> None:
    old_cpu, old_resume = before["turn_cpu_ms"], before["resume_ms"]
    print("Harness: review-like turns driven on the harness directly")
    print(f"{'review':>7} | {'CPU ms/turn before':>18} | {'after':>8}")
    for p, ms in result["turn_cpu_ms"].items():
        print(f"{p:>7} | {fmt(old_cpu.get(p)):>18} | {ms:>8.1f}")
    print(f"\n{'events':>7} | {'resume after evict ms before':>28} | {'after':>8} | "
          f"{'cold resume ms before':>21} | {'after':>8}")
    for n, (cold, warm) in result["resume_ms"].items():
        old_cold, old_warm = old_resume.get(n, (None, None))
        print(f"{n:>7} | {fmt(old_warm):>28} | {warm:>8.1f} | {fmt(old_cold):>21} | "
              f"{cold:>8.1f}")
    print("CPU: time.process_time of the harness process (model server in a child process);"
          "\nresume: wall time of harness.agents.resume (cold = first resume in a process).\n")


def print_deployed(result: dict, before: dict) -> None:
    new, old = result["deployed_ms"], before["deployed_ms"]
    print("Deployed: one PR reviewed again after every push, through the reviewer's poller and "
          "runner")
    print(f"{'review':>7} | {'turn CPU ms before':>18} | {'after':>8} | "
          f"{'tick CPU ms before':>18} | {'after':>8} | {'issue (quoted)':>14}")
    for p, ms in new["turn"].items():
        print(f"{p:>7} | {fmt(old['turn'].get(p)):>18} | {ms:>8.1f} | "
              f"{fmt(old['tick'].get(p)):>18} | {new['tick'][p]:>8.1f} | "
              f"{fmt(ISSUE_DEPLOYED_MS.get(p)):>14}")
    print("CPU: time.process_time of the bot process (sandbox GitHub, model server and "
          "github-mcp-server\nare other processes); turn = SingleReviewer.review, tick = the whole "
          "poller tick that ran it\n(polls, review procedure, cursor); median of reviews "
          "p, p+1, p+2. Goal: < 50 ms per turn.")


async def main(args: argparse.Namespace) -> None:
    points = [int(x) for x in args.reviews.split(",")]
    sizes = [int(x) for x in args.events.split(",")]
    sections = set(args.sections.split(","))
    result: dict = {"code": code_label(), "turn_cpu_ms": {}, "resume_ms": {},
                    "deployed_ms": {"turn": {}, "tick": {}}}
    if "harness" in sections:
        proc, base_url = start_model()
        try:
            result["turn_cpu_ms"] = await turn_cpu(points, base_url)
            result["resume_ms"] = await resume_ms(sizes, base_url)
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
    if "deployed" in sections:
        result["deployed_ms"] = await deployed_cpu(points)
    if args.json:
        print(json.dumps(result))
        return
    before = run_before(args.before_code, args) if args.before_code else RECORDED_BEFORE
    print(f"before: {before['code']}\nafter:  {result['code']}\n")
    if "harness" in sections:
        print_harness(result, before)
    if "deployed" in sections:
        print_deployed(result, before)


if __name__ == "__main__":
    if sys.argv[1:] == ["--model-server"]:
        model_main()
        raise SystemExit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", default="2,10,40,100")
    parser.add_argument("--events", default="1000,5000,20000")
    parser.add_argument("--sections", default="harness,deployed",
                        help="which tables: harness, deployed or both")
    parser.add_argument("--json", action="store_true", help="one JSON line (for comparisons)")
    parser.add_argument("--before-code", metavar="CHECKOUT",
                        help="measure the 'before' column live on this checkout's code")
    asyncio.run(main(parser.parse_args()))
