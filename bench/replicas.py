"""Replicas (issue 24): reviews per minute with 1, 2 and 4 ``dsh run`` replicas on one
PostgreSQL database, and database transactions per review.

Each run: a fresh database on a throwaway cluster, the sandbox GitHub with N open PRs, the
scripted reviewer model with a fixed pause per streamed chunk (a model of fixed latency), and
``k`` replicas started together; the clock runs from their start until every PR has a review.
Database work is read from ``pg_stat_database`` (committed + rolled back transactions: every
statement outside a transaction is one, so this counts round trips that changed or read
something, a lower bound of all round trips). The caps hold across replicas
(``max_concurrent_reviews`` per account, ``max_concurrent_turns`` in all): throughput can only
grow with replicas while one replica cannot fill the cap by itself.

Measured on the 2-core development machine (shared with other work), this build:

    24 PRs, max_concurrent_reviews 8, chunk delay 0.05 s
    replicas  reviews   time s  first s  reviews/min  db xacts/review
           1       24     15.9      5.6         90.5              100
           2       24     16.1      6.2         89.6              110
           4       24     22.1     12.3         65.1              127

    32 PRs, max_concurrent_reviews 4, chunk delay 0.2 s
           1       32    133.1     18.1         14.4              132
           2       32    131.1     17.6         14.6              166
           4       32    154.6     38.4         12.4              244

Flat, not linear: the caps now hold across replicas, and one replica already fills them; on two
cores more processes only add start-up and contention. Replicas buy availability (a killed
replica's work is taken over after lease_ttl_s), not throughput past the caps. The extra
transactions per review with more replicas are lease traffic (slot and PR leases, renewals,
non-polling replicas' rescans).

Usage: python bench/replicas.py [--prs 24] [--replicas 1,2,4] [--cap 8] [--chunk-delay 0.05]
(as root: the sandbox GitHub binds 127.0.0.N:80). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import REPO, build_shop
from dsh_harness.testing import PostgresCluster, ScriptedModelServer


def transactions(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()
    return int(row[0]) if row else 0


def one_run(cluster: PostgresCluster, replicas: int, prs: int, cap: int,
            chunk_delay_s: float) -> dict[str, float]:
    name = f"bench_{replicas}"
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = cluster.dsn(name)

    def paced(req):
        reply = reviewer_policy(req)
        reply.chunk_delay_s = chunk_delay_s
        return reply

    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            ScriptedModelServer(policy=paced) as model:
        build_shop(sb, prs=prs)
        config = Deployment(Path(tmp), sb, model, dsn=dsn, poll_interval_s=1.0,
                            extra_account=f"max_concurrent_reviews = {cap}\n").write_config()
        before = transactions(dsn)
        started = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", "--config",
                                   str(config), "run"], cwd=tmp, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for _ in range(replicas)]
        first = None
        try:
            deadline = started + 900
            while time.monotonic() < deadline:
                done = sum(1 for n in range(1, prs + 1) if sb.state.reviews_of(REPO, n))
                if done and first is None:
                    first = time.monotonic() - started
                if done >= prs:
                    break
                time.sleep(0.2)
            elapsed = time.monotonic() - started
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        reviews = sum(len(sb.state.reviews_of(REPO, n)) for n in range(1, prs + 1))
        after = transactions(dsn)
    return {"replicas": replicas, "reviews": reviews, "elapsed_s": elapsed,
            "first_s": first or 0.0, "per_min": reviews / elapsed * 60,
            "xacts_per_review": (after - before) / max(reviews, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prs", type=int, default=24)
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--cap", type=int, default=8, help="max_concurrent_reviews")
    parser.add_argument("--chunk-delay", type=float, default=0.05,
                        help="seconds between streamed chunks of every model response")
    args = parser.parse_args()
    rows = []
    with PostgresCluster() as cluster:
        for k in (int(x) for x in args.replicas.split(",")):
            rows.append(one_run(cluster, k, args.prs, args.cap, args.chunk_delay))
            print(f"  {k} replica(s) done in {rows[-1]['elapsed_s']:.0f} s", file=sys.stderr)
    print(f"{args.prs} PRs, max_concurrent_reviews {args.cap}, chunk delay "
          f"{args.chunk_delay:g} s, 2 cores shared")
    print(f"{'replicas':>8} {'reviews':>8} {'time s':>8} {'first s':>8} {'reviews/min':>12} "
          f"{'db xacts/review':>16}")
    for r in rows:
        print(f"{r['replicas']:>8} {r['reviews']:>8} {r['elapsed_s']:>8.1f} {r['first_s']:>8.1f} "
              f"{r['per_min']:>12.1f} {r['xacts_per_review']:>16.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
