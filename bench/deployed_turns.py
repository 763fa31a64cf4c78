"""The deployed half of bench/turn_cpu.py: the bot process's CPU per review of one PR.

What runs here is what runs in production: the reviewer's real poller tick (three conditional
polls, the review procedure, the cursor) and runner (guarded tools, the MCP host starting the
real github-mcp-server for the turn, the harness agent resumed from its log and evicted after
the turn). The sandbox GitHub and the scripted reviewer model each run in their own child
process and github-mcp-server is a child too, so ``time.process_time`` of this process (all
its threads, no children) is the bot's own CPU. Between reviews the sandbox pushes a one-line
change to the PR, so every review after the first is a real re-review of a new head.

The figures are the median of three consecutive reviews at each point (review p, p+1, p+2).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

CART = ("def last_items(items: list, n: int) -> list:\n"
        "    return items[len(items) - n:]\n")


def push_files(n: int) -> dict[str, str]:
    """Review ``n``'s head: a one-line change to the PR, different at every push."""
    return {"shop/cart.py": CART + f"\n# revision {n}\n"}


# -- the sandbox GitHub and the model, each in its own process ----------------------------------

def sandbox_main() -> None:
    """Child process: the sandbox GitHub with the shop PR; answers ``push N`` / ``reviews``."""
    from dsh_github_reviewer.testing import SandboxGitHub
    from dsh_github_reviewer.testing.scenario import REPO, build_shop

    with SandboxGitHub.on_loopback_80() as sb:
        build_shop(sb)
        print(json.dumps({"api_url": sb.api_url, "web_url": sb.web_url}), flush=True)
        for line in sys.stdin:
            cmd = line.split()
            if cmd[0] == "push":
                reply = sb.state.commit(REPO, "feature-1", push_files(int(cmd[1])),
                                        message=f"Revision {cmd[1]}")
            else:
                reply = str(len(sb.state.reviews_of(REPO, 1)))
            print(reply, flush=True)


def model_main() -> None:
    """Child process: the scripted reviewer model, answering instantly."""
    from dsh_github_reviewer.testing.scenario import model_server

    with model_server() as model:
        print(model.base_url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


class Child:
    """A helper process of this script, talked to by lines on its stdin/stdout."""

    def __init__(self, role: str):
        self.proc = subprocess.Popen([sys.executable, __file__, role], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=os.environ.copy())
        self.first = self.ask(None)

    def ask(self, line: str | None) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if line is not None:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if not answer:
            raise SystemExit(f"{self.proc.args[-1]} child process died")
        return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


# -- the measurement (runs on whichever checkout is first on sys.path) --------------------------

async def deployed_cpu(points: list[int]) -> dict[str, dict[int, float]]:
    """CPU ms of the bot process per review at each point: the whole poller tick that ran
    the review, and the runner's review turn inside it."""
    from dsh_github_reviewer.testing.deployment import Deployment

    last = max(points) + 2
    wanted = {p + k for p in points for k in range(3)}
    tick_ms: dict[int, float] = {}
    turn_ms: dict[int, float] = {}
    sandbox, model = Child("--sandbox"), Child("--model")
    try:
        urls = json.loads(sandbox.first)
        with tempfile.TemporaryDirectory() as tmp:
            dep = await Deployment(Path(tmp), SimpleNamespace(**urls),
                                   SimpleNamespace(base_url=model.first)).start()
            runner = dep.runner
            review = runner.review
            spent: list[float] = []

            async def timed_review(*args, **kwargs):
                start = time.process_time()
                try:
                    return await review(*args, **kwargs)
                finally:
                    spent.append(time.process_time() - start)
            runner.review = timed_review
            try:
                for n in range(1, last + 1):
                    if n > 1:
                        sandbox.ask(f"push {n}")
                    spent.clear()
                    start = time.process_time()
                    await dep.tick()
                    cpu = time.process_time() - start
                    posted = int(sandbox.ask("reviews"))
                    if posted != n or len(spent) != 1:
                        raise SystemExit(f"review {n}: {posted} review(s) on the PR, "
                                         f"{len(spent)} runner turn(s) in the tick")
                    if n in wanted:
                        tick_ms[n], turn_ms[n] = cpu * 1000, spent[0] * 1000
            finally:
                await dep.stop()
    finally:
        sandbox.close()
        model.close()
    return {"turn": {p: statistics.median(turn_ms[p + k] for k in range(3)) for p in points},
            "tick": {p: statistics.median(tick_ms[p + k] for k in range(3)) for p in points}}


if __name__ == "__main__":
    {"--sandbox": sandbox_main, "--model": model_main}[sys.argv[1]]()
