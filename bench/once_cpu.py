"""CPU of one review through the scheduler (``dsh run --once``'s path) while the model thinks.

One PR, one review, driven by ``Deployment.tick`` (one poll, then the scheduler's ``drain``
until no work is due: what ``dsh run --once`` does), against the sandbox GitHub, the scripted
reviewer model answering each request after 2 s, and the real github-mcp-server. Measured: the
wall time of the tick, the CPU of the event-loop thread (``time.thread_time``: the scheduler's
own loop; the sandbox GitHub and the model server run on their own threads) and of the whole
process (those threads included), and the scheduler's passes (dispatcher passes + drain rounds;
``0`` means the code has no counter).

Usage: python bench/once_cpu.py [--before-code CHECKOUT]
With ``--before-code`` the same measurement also runs on another checkout (e.g. ``git worktree
add /tmp/before <commit>``) and both columns are printed. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL_DELAY_S = 2.0


async def measure() -> dict[str, float]:
    from dsh_github_reviewer.testing import SandboxGitHub
    from dsh_github_reviewer.testing.deployment import Deployment
    from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
    from dsh_github_reviewer.testing.scenario import build_shop
    from dsh_harness.testing import ScriptedModelServer

    def policy(req):
        time.sleep(MODEL_DELAY_S)   # on the model server's thread: the model "thinks"
        return reviewer_policy(req)

    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub() as sb, \
            ScriptedModelServer(policy=policy) as model:
        build_shop(sb)
        dep = await Deployment(Path(tmp), sb, model).start()
        try:
            wall, cpu, proc = time.perf_counter(), time.thread_time(), time.process_time()
            await dep.tick()
            wall = time.perf_counter() - wall
            cpu, proc = time.thread_time() - cpu, time.process_time() - proc
            lanes = dep.work.scheduler.lanes.values() if hasattr(dep.work, "scheduler") else ()
            passes = sum(getattr(lane, "passes", 0) for lane in lanes)
            reviews = len(dep.reviews(1))
        finally:
            await dep.stop(grace_s=0)
    return {"wall": wall, "loop_cpu": cpu, "process_cpu": proc, "passes": passes,
            "reviews": reviews, "model_requests": len(model.requests)}


def run_on(code: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(code))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--measure"],
                         env=env, cwd=code, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before-code", type=Path)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(asyncio.run(measure())))
        return
    cols = {}
    if args.before_code:
        cols["before"] = run_on(args.before_code.resolve())
    cols["after"] = run_on(ROOT)
    print(f"One review, model answering each request in {MODEL_DELAY_S:.0f} s "
          f"({cols['after']['model_requests']} requests)\n")
    print("| | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    rows = [("wall time of the tick", "wall", "{:.1f} s"),
            ("CPU, event-loop thread", "loop_cpu", "{:.2f} s"),
            ("CPU, whole process (sandbox + model threads too)", "process_cpu", "{:.2f} s"),
            ("scheduler passes (0: no counter)", "passes", "{:.0f}"),
            ("reviews posted", "reviews", "{:.0f}")]
    for label, key, fmt in rows:
        print(f"| {label} | " + " | ".join(fmt.format(c[key]) for c in cols.values()) + " |")


if __name__ == "__main__":
    main()
