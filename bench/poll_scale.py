"""Idle polling at 300 to 10,000 open PRs: the first tick, then requests, counted requests,
CPU and memory per idle tick.

Each row runs a real ``dsh run`` process (the bot as deployed) against the sandbox GitHub with
one repository of N open PRs. ``--mode ignored`` (the default, as deployed in issue 31): no
record exists before the start and every author is ignored (nothing is reviewed, no model
runs), polls every 2 s, so the bot's own first tick lists and records every open PR; the row
says how long that took. ``--mode seeded``: every PR's record is written before the start
(1 s polls). Then, within ``--window`` seconds, up to ``--ticks`` idle ticks: GitHub requests
and counted requests (not 304) per tick, the bot process's CPU per tick (/proc utime + stime),
its RSS, and the RSS it adds per open PR compared with the first row.

``--before REF`` runs the same rows on another commit of this repository (a temporary git
worktree, imported through PYTHONPATH) and prints both tables: the default REF is main before
the sandbox built a page of the open-PR listing from that page alone — it built every PR's
payload for every page, so the first tick at 10,000 PRs took ~12 min and a 90 s window after
"the first recording" saw the rest of that page walk (counted requests), not idle ticks.

Usage: python bench/poll_scale.py [--sizes 300,5000,10000] [--ticks 8] [--window 90]
                                  [--mode ignored|seeded] [--before REF|none]
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
BEFORE = "14a3f31"   # main before the sandbox paged the PR listing lazily


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _seed(dep, sb, n: int) -> None:
    from dsh_github_reviewer.core.session_key import PrRef
    from dsh_github_reviewer.testing.scenario import REPO
    from dsh_github_reviewer.work.records import PRS, PrRecord

    await dep.start()
    store = await dep.store()
    now = datetime.now(UTC)
    async with store.domain.transaction() as tx:
        for i in range(1, n + 1):
            pr = sb.state.pull(REPO, i)
            tx.put(PRS, PrRef("demo", REPO, i).format(), PrRecord(
                head_sha=pr.head_sha, status="reviewed", updated_at=now,
                reviewed_head_sha=pr.head_sha, base_ref=pr.base_ref, base_sha=pr.base_sha))
    await dep.stop()


def _ticks(sb) -> int:
    return len(sb.requests("GET", "/issues/comments"))


def measure(n: int, ticks: int, mode: str = "seeded", window_s: float = 600.0) -> dict:
    """One row, with whatever code is importable (this checkout or PYTHONPATH's).

    ``seeded``: every PR's record is written before the bot starts (1 s polls). ``ignored``:
    as deployed in issue 31 — nothing seeded, every author ignored (nothing is reviewed),
    2 s polls — so the bot's own first tick lists and records every PR, then idles.
    The idle ticks are those that start after the first one ended, within ``window_s``."""
    from dsh_github_reviewer.testing import SandboxGitHub
    from dsh_github_reviewer.testing.deployment import Deployment
    from dsh_github_reviewer.testing.scenario import build_shop, model_server

    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub() as sb, model_server() as model:
        build_shop(sb, prs=n)
        if mode == "ignored":
            dep = Deployment(Path(tmp), sb, model, poll_interval_s=2.0,
                             extra_account='ignore_authors = ["*"]\n')
        else:
            dep = Deployment(Path(tmp), sb, model, poll_interval_s=1.0)
        config = dep.write_config()
        if mode == "seeded":
            asyncio.run(_seed(dep, sb, n))
        proc = subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", "--config",
                                 str(config), "run"], cwd=tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 900
            started = time.monotonic()
            while _ticks(sb) < 2 and time.monotonic() < deadline:   # first tick + one idle
                time.sleep(0.05)
            first_s = time.monotonic() - started
            first_rows = len(sb.log)
            sb.reset_log()
            cpu0 = _cpu_s(proc.pid)
            window = min(deadline, time.monotonic() + window_s)
            while _ticks(sb) < ticks and time.monotonic() < window:
                time.sleep(0.05)
            cpu1 = _cpu_s(proc.pid)
            stats = sb.stats()
            rss = _rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        assert model.served == [], "an idle tick must not run the model"
        done = _ticks(sb)
        row = {"prs": n, "mode": mode, "rss_mb": rss, "first_requests": first_rows,
               "first_s": first_s, "ticks": done}
        if done == 0:   # the old code's ticks at 10,000 PRs outlast the time budget
            return {**row, "requests": None, "counted": None, "cpu_ms": None}
        return {**row, "requests": stats["total"] / done,
                "counted": (stats["total"] - stats["not_modified"]) / done,
                "cpu_ms": 1000 * (cpu1 - cpu0) / done}


def run_rows(sizes: list[int], ticks: int, pythonpath: str | None, mode: str,
             window: float) -> list[dict]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--row", str(n), "--ticks", str(ticks),
                              "--mode", mode, "--window", str(window)],
                             env=env, cwd=pythonpath or ROOT, capture_output=True, text=True,
                             timeout=3600)
        if out.returncode != 0:
            raise SystemExit(f"row {n} failed:\n{out.stderr[-2000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def table(title: str, rows: list[dict]) -> None:
    base = rows[0]
    print(f"\n{title}")
    print(f"{'open PRs':>8} | {'first tick s':>12} | {'idle ticks':>10} | "
          f"{'requests/tick':>13} | {'counted/tick':>12} | "
          f"{'CPU ms/tick':>11} | {'RSS MB':>7} | {'KB RSS per open PR':>18}")
    for r in rows:
        per = (f"{(r['rss_mb'] - base['rss_mb']) * 1024 / (r['prs'] - base['prs']):.1f}"
               if r is not base else "-")
        first = f"{r['first_s']:>12.1f} | {r['ticks']:>10}" if "first_s" in r else \
            f"{'-':>12} | {'-':>10}"
        if r["requests"] is None:
            print(f"{r['prs']:>8} | {first} | {'no idle tick in the window':^41} | "
                  f"{r['rss_mb']:>7.1f} | {per:>18}")
            continue
        print(f"{r['prs']:>8} | {first} | {r['requests']:>13.1f} | {r['counted']:>12.1f} | "
              f"{r['cpu_ms']:>11.1f} | {r['rss_mb']:>7.1f} | {per:>18}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="300,5000,10000")
    ap.add_argument("--ticks", type=int, default=8)
    ap.add_argument("--before", default=BEFORE, help="a commit to measure too, or 'none'")
    ap.add_argument("--mode", choices=("seeded", "ignored"), default="ignored",
                    help="seeded: records written before the start; ignored: the bot's first "
                         "tick records every PR (authors ignored, 2 s polls), as deployed")
    ap.add_argument("--window", type=float, default=90.0,
                    help="seconds to wait for the idle ticks after the first one")
    ap.add_argument("--row", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.row is not None:
        print(json.dumps(measure(args.row, args.ticks, args.mode, args.window)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.before != "none":
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "before"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree),
                            args.before], check=True, capture_output=True)
            try:
                table(f"before ({args.before})", run_rows(sizes, args.ticks, str(tree),
                                                          args.mode, args.window))
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tree)], check=False, capture_output=True)
    table("now", run_rows(sizes, args.ticks, None, args.mode, args.window))
    print("\nrequests and CPU per idle tick of one repository, measured after the bot's first "
          "tick; counted = requests that use the rate limit (GitHub does not count 304s).")


if __name__ == "__main__":
    main()
