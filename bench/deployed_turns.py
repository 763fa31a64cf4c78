"""The deployed half of bench/turn_cpu.py: the bot process's CPU per review of one PR.

What runs here is what runs in production: the reviewer's real poller tick (three conditional
polls, the review procedure, the cursor) and runner (guarded tools, the MCP host starting the
real github-mcp-server for the turn, the harness agent resumed from its log and evicted after
the turn). The sandbox GitHub and the scripted reviewer model each run in their own child
process and github-mcp-server is a child too, so ``time.process_time`` of this process (all
its threads, no children) is the bot's own CPU. Between reviews the sandbox pushes a one-line
change to the PR, so every review after the first is a real re-review of a new head.

Every review's CPU is returned; bench/turn_cpu.py takes medians over windows of reviews.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

CART = ("def last_items(items: list, n: int) -> list:\n"
        "    return items[len(items) - n:]\n")


def push_files(n: int) -> dict[str, str]:
    """Review ``n``'s head: the off-by-one fixed (review 2 resolves that thread) and one more
    hard-coded key per push, so every re-review posts one new open thread and the PR's review,
    comment and thread lists grow by one review's worth each time."""
    keys = "".join(f'api_key = "key-{i:04d}"  # key {i}\n' for i in range(2, n + 1))
    return {"shop/cart.py": CART, "shop/keys.py": keys}


# -- the sandbox GitHub and the model, each in its own process ----------------------------------

def sandbox_main(prs: int) -> None:
    """Child process: the sandbox GitHub with ``prs`` shop PRs; answers ``push N [PR]``,
    ``threads [PR]`` and ``reviews [PR]`` (PR 1 by default)."""
    from dsh_github_reviewer.testing import SandboxGitHub
    from dsh_github_reviewer.testing.scenario import REPO, build_shop

    with SandboxGitHub.on_loopback_80() as sb:
        build_shop(sb, prs=prs)
        print(json.dumps({"api_url": sb.api_url, "web_url": sb.web_url}), flush=True)
        for line in sys.stdin:
            cmd = line.split()
            pr = int(cmd[-1]) if len(cmd) > (2 if cmd[0] == "push" else 1) else 1
            if cmd[0] == "push":
                reply = sb.state.commit(REPO, f"feature-{pr}", push_files(int(cmd[1])),
                                        message=f"Revision {cmd[1]}")
            elif cmd[0] == "threads":
                roots = [c.id for c in sb.state.review_comments_of(REPO, pr)
                         if c.in_reply_to is None]
                reply = str(sum(1 for r in roots if r not in sb.state.resolved_threads))
            else:
                reply = str(len(sb.state.reviews_of(REPO, pr)))
            print(reply, flush=True)


def model_main() -> None:
    """Child process: the scripted reviewer model, answering instantly."""
    from dsh_github_reviewer.testing.scenario import model_server

    with model_server() as model:
        print(model.base_url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


class Child:
    """A helper process of this script, talked to by lines on its stdin/stdout."""

    def __init__(self, *role: str):
        self.proc = subprocess.Popen([sys.executable, __file__, *role], stdin=subprocess.PIPE,
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

async def deployed_cpu(last: int, profile: dict[str, range] | None = None,
                       profile_prefix: str = "") -> dict:
    """CPU ms of the bot process for every review 1..``last``: the whole poller tick that ran
    the review (``tick``) and the runner's review turn inside it (``turn``), and the PR's open
    threads at the end. ``profile``: per window name, the reviews whose ticks are cProfiled
    (CPU time) into ``{profile_prefix}{name}.prof``."""
    import cProfile

    from dsh_github_reviewer.testing.deployment import Deployment

    tick_ms: list[float] = []
    turn_ms: list[float] = []
    profilers = {name: cProfile.Profile(time.process_time) for name in profile or {}}
    sandbox, model = Child("--sandbox", "1"), Child("--model")
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
                    prof = next((profilers[name] for name, window in (profile or {}).items()
                                 if n in window), None)
                    if prof is not None:
                        prof.enable()
                    start = time.process_time()
                    await dep.tick()
                    cpu = time.process_time() - start
                    if prof is not None:
                        prof.disable()
                    posted = int(sandbox.ask("reviews"))
                    if posted != n or len(spent) != 1:
                        raise SystemExit(f"review {n}: {posted} review(s) on the PR, "
                                         f"{len(spent)} runner turn(s) in the tick")
                    tick_ms.append(cpu * 1000)
                    turn_ms.append(spent[0] * 1000)
                open_threads = int(sandbox.ask("threads"))
            finally:
                await dep.stop()
    finally:
        sandbox.close()
        model.close()
    for name, prof in profilers.items():
        prof.dump_stats(f"{profile_prefix}{name}.prof")
    return {"tick": tick_ms, "turn": turn_ms, "open_threads": open_threads}


async def paired_cpu(young: range, old: range) -> dict:
    """CPU ms of the bot process per review of two PRs in one deployment, measured side by
    side: PR 2 is first reviewed up to review ``old.start - 1``, then PR 1's reviews ``young``
    and PR 2's reviews ``old`` alternate, one review per tick. Both windows are sampled in the
    same minutes of the same process, so a drift of the machine's speed (a shared host) moves
    both alike; what differs is only the PR's history. Returns each window's tick CPU."""
    from dsh_github_reviewer.testing.deployment import Deployment

    out: dict[str, list[float]] = {"young": [], "old": []}
    sandbox, model = Child("--sandbox", "2"), Child("--model")
    reviewed = {1: 0, 2: 0}

    async def review(dep, pr: int, n: int) -> float:
        if n > 1:
            sandbox.ask(f"push {n} {pr}")
        start = time.process_time()
        await dep.tick()
        cpu = (time.process_time() - start) * 1000
        counts = {p: int(sandbox.ask(f"reviews {p}")) for p in (1, 2)}
        expected = {p: reviewed[p] + (p == pr or n == 1) for p in (1, 2)}
        if counts != expected:
            raise SystemExit(f"PR {pr} review {n}: reviews on the PRs {counts}, "
                             f"expected {expected}")
        reviewed.update(counts)
        return cpu

    try:
        urls = json.loads(sandbox.first)
        with tempfile.TemporaryDirectory() as tmp:
            dep = await Deployment(Path(tmp), SimpleNamespace(**urls),
                                   SimpleNamespace(base_url=model.first)).start()
            try:
                await review(dep, 0, 1)   # both PRs' first reviews, in one tick
                for n in range(2, old.start):
                    await review(dep, 2, n)
                pairs = max(len(young), len(old))
                for i in range(pairs):
                    if i < len(young):
                        out["young"].append(await review(dep, 1, young[i]))
                    if i < len(old):
                        out["old"].append(await review(dep, 2, old[i]))
            finally:
                await dep.stop()
    finally:
        sandbox.close()
        model.close()
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--sandbox":
        sandbox_main(int(sys.argv[2]))
    else:
        model_main()
