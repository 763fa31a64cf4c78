"""The long replica loop of issue 24: three ``dsh run`` replicas on one throwaway PostgreSQL
cluster, one of them SIGKILLed at random moments (default 30 times) while pushes, /bot and
/review arrive; every third step terminates the replicas' database connections
(pg_terminate_backend) and half-way the database server is down for 30 s. Then every trigger
must be answered exactly once, every head reviewed once, nothing left queued, and no replica may
have exited during the outage. Run (as root: the sandbox GitHub binds 127.0.0.N:80; the cluster
runs as the postgres user): ``.venv/bin/python scripts/replica_loop.py [--kills 30]
[--outage 30] [--replicas 3] [--prs 100] [--webhook] [--seed 7]``. The suite runs a short version
(tests/e2e/test_replicas.py)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.replica_loop import run_replica_loop, workers
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_harness.testing import PostgresCluster, ScriptedModelServer


def paced(req):
    reply = reviewer_policy(req)
    reply.chunk_delay_s = 0.02
    return reply


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--outage", type=float, default=30.0, help="seconds without database")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--prs", type=int, default=3, help="open PRs the events land on")
    parser.add_argument("--webhook", action="store_true",
                        help="deliver webhooks round-robin to the replicas (one proxy in front)")
    parser.add_argument("--max-pause", type=float, default=4.0,
                        help="longest run before a kill, seconds (start-up takes ~1-2 s)")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, PostgresCluster() as cluster, \
            SandboxGitHub.on_loopback_80() as sb, ScriptedModelServer(policy=paced) as model:
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE loop")
        report = run_replica_loop(Path(tmp), sb, model, cluster.dsn("loop"),
                                  replicas=args.replicas, kills=args.kills, seed=args.seed,
                                  max_pause_s=args.max_pause, cluster=cluster,
                                  outage_s=args.outage, terminate_every=3, prs=args.prs,
                                  webhook_secret="replica-hook-s3cret" if args.webhook
                                  else None)
        doers = workers(Path(tmp))
    print(f"PRs {args.prs}, replicas {args.replicas}, kills {report.kills}, database outage "
          f"{args.outage:g} s, webhook deliveries per replica "
          f"{sorted(report.deliveries.values()) or '-'}, "
          f"connections terminated {report.terminated}, pushes {report.pushes}, "
          f"/bot {len(report.bots)}, /review {len(report.review_cmds)}, reviews posted "
          f"{report.reviews}, replies {report.replies}, replica processes that did work "
          f"{doers}, {time.monotonic() - started:.0f} s")
    for problem in report.problems:
        print("PROBLEM:", problem)
    print("ok" if not report.problems else f"{len(report.problems)} problem(s)")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
