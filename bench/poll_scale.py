"""Idle polling at 10 to 10,000 open PRs: requests, counted requests, CPU and memory per tick.

Each row runs a real ``dsh run`` process (the bot as deployed) against the sandbox GitHub with
one repository of N open PRs, all already reviewed (their records are written before the bot
starts, so no model runs). After the bot's first tick (which lists every open PR once) it
measures K idle ticks: GitHub requests and counted requests (not 304) per tick, the bot
process's CPU per tick (/proc utime + stime), its RSS, and the RSS it adds per open PR
compared with the 10-PR row.

``--before REF`` runs the same rows on another commit of this repository (a temporary git
worktree, imported through PYTHONPATH) and prints both tables: the default REF is the commit
before polling read only what changed.

Usage: python bench/poll_scale.py [--sizes 10,1000,5000,10000] [--ticks 5] [--before REF|none]
Prints tables; asserts nothing.
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
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "9cbb555^"   # main just before the incremental listing


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _seed(dep, sb, n: int) -> None:
    from dsh_github_reviewer.testing.scenario import REPO
    from dsh_github_reviewer.work.records import PRS, PrRecord, pr_key

    await dep.start()
    store = await dep.store()
    now = datetime.now(UTC)
    async with store.domain.transaction() as tx:
        for i in range(1, n + 1):
            pr = sb.state.pull(REPO, i)
            tx.put(PRS, pr_key("demo", REPO, i), PrRecord(
                head_sha=pr.head_sha, status="reviewed", updated_at=now,
                reviewed_head_sha=pr.head_sha, base_ref=pr.base_ref, base_sha=pr.base_sha))
    await dep.stop()


def _ticks(sb) -> int:
    return len(sb.requests("GET", "/issues/comments"))


def measure(n: int, ticks: int) -> dict:
    """One row, with whatever code is importable (this checkout or PYTHONPATH's)."""
    from dsh_github_reviewer.testing import SandboxGitHub
    from dsh_github_reviewer.testing.deployment import Deployment
    from dsh_github_reviewer.testing.scenario import build_shop, model_server

    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub() as sb, model_server() as model:
        build_shop(sb, prs=n)
        dep = Deployment(Path(tmp), sb, model, poll_interval_s=1.0)
        config = dep.write_config()
        asyncio.run(_seed(dep, sb, n))
        proc = subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", "--config",
                                 str(config), "run"], cwd=tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 600
            while _ticks(sb) < 2 and time.monotonic() < deadline:   # first tick + one idle
                time.sleep(0.05)
            first_rows = len(sb.log)
            sb.reset_log()
            cpu0 = _cpu_s(proc.pid)
            while _ticks(sb) < ticks and time.monotonic() < deadline:
                time.sleep(0.05)
            cpu1 = _cpu_s(proc.pid)
            stats = sb.stats()
            rss = _rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        assert model.served == [], "an idle tick must not run the model"
        done = _ticks(sb)
        if done == 0:   # the old code's ticks at 10,000 PRs outlast the time budget
            return {"prs": n, "requests": None, "counted": None, "cpu_ms": None,
                    "rss_mb": rss, "first_requests": first_rows}
        return {"prs": n, "requests": stats["total"] / done,
                "counted": (stats["total"] - stats["not_modified"]) / done,
                "cpu_ms": 1000 * (cpu1 - cpu0) / done, "rss_mb": rss,
                "first_requests": first_rows}


def run_rows(sizes: list[int], ticks: int, pythonpath: str | None) -> list[dict]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--row", str(n), "--ticks", str(ticks)],
                             env=env, cwd=pythonpath or ROOT, capture_output=True, text=True,
                             timeout=1800)
        if out.returncode != 0:
            raise SystemExit(f"row {n} failed:\n{out.stderr[-2000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def table(title: str, rows: list[dict]) -> None:
    base = rows[0]
    print(f"\n{title}")
    print(f"{'open PRs':>8} | {'requests/tick':>13} | {'counted/tick':>12} | "
          f"{'CPU ms/tick':>11} | {'RSS MB':>7} | {'KB RSS per open PR':>18}")
    for r in rows:
        per = (f"{(r['rss_mb'] - base['rss_mb']) * 1024 / (r['prs'] - base['prs']):.1f}"
               if r is not base else "-")
        if r["requests"] is None:
            print(f"{r['prs']:>8} | {'no idle tick finished in 10 min':^45} | "
                  f"{r['rss_mb']:>7.1f} | {per:>18}")
            continue
        print(f"{r['prs']:>8} | {r['requests']:>13.1f} | {r['counted']:>12.1f} | "
              f"{r['cpu_ms']:>11.1f} | {r['rss_mb']:>7.1f} | {per:>18}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10,1000,5000,10000")
    ap.add_argument("--ticks", type=int, default=5)
    ap.add_argument("--before", default=BEFORE, help="a commit to measure too, or 'none'")
    ap.add_argument("--row", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.row is not None:
        print(json.dumps(measure(args.row, args.ticks)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.before != "none":
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "before"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree),
                            args.before], check=True, capture_output=True)
            try:
                table(f"before ({args.before})", run_rows(sizes, args.ticks, str(tree)))
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tree)], check=False, capture_output=True)
    table("now", run_rows(sizes, args.ticks, None))
    print("\nrequests and CPU per idle tick of one repository, measured after the bot's first "
          "tick; counted = requests that use the rate limit (GitHub does not count 304s).")


if __name__ == "__main__":
    main()
