"""The long SIGKILL loop of issue 11: ``dsh run`` killed at random moments (default 30 times)
with pushes, /bot and /review arriving between restarts; then every trigger must be answered
exactly once, every recorded head reviewed by a review of that head, and no pending review
left. Run: ``.venv/bin/python scripts/sigkill_loop.py [--kills 30] [--seed 11]`` (as root: the
sandbox GitHub binds 127.0.0.N:80). The suite runs a 10-kill version
(tests/e2e/test_kill_loop.py)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.kill_loop import run_loop
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_harness.testing import ScriptedModelServer


def paced(req):
    reply = reviewer_policy(req)
    reply.chunk_delay_s = 0.02
    return reply


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--max-pause", type=float, default=4.0,
                        help="longest run before a kill, seconds (start-up takes ~1-2 s)")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            ScriptedModelServer(policy=paced) as model:
        report = run_loop(Path(tmp), sb, model, kills=args.kills, seed=args.seed,
                          max_pause_s=args.max_pause)
    print(f"kills {report.kills}, pushes {report.pushes}, /bot {len(report.bots)}, "
          f"/review {len(report.review_cmds)}, reviews posted {report.reviews}, "
          f"replies {report.replies}, {time.monotonic() - started:.0f} s")
    for problem in report.problems:
        print("PROBLEM:", problem)
    print("ok" if not report.problems else f"{len(report.problems)} problem(s)")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
