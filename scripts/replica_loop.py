"""The long replica loop of issue 24: three ``dsh run`` replicas on one throwaway PostgreSQL
cluster, one of them SIGKILLed at random moments (default 30 times) while pushes, /bot and
/review arrive; every third step terminates the replicas' database connections
(pg_terminate_backend) and half-way the database server is down for 30 s. Then every trigger
must be answered exactly once, every head reviewed once, nothing left queued, and no replica may
have exited during the outage. Run (as root: the sandbox GitHub binds 127.0.0.N:80; the cluster
runs as the postgres user): ``.venv/bin/python scripts/replica_loop.py [--kills 30]
[--outage 30] [--replicas 3] [--prs 100] [--webhook] [--seed 7]``. The suite runs a short version
(tests/e2e/test_replicas.py).

``--pauses N`` runs the pause loop instead: N replicas stop themselves (SIGSTOP) at
stop points around their GitHub writes and session appends, cycling through every kind
(``testing/pause_loop.STOPS``: the read before the review POST, the review POST, the summary,
a reply, a reaction, session appends), each taken over by another replica and then resumed
(SIGCONT); ``--kills`` of the takeovers are SIGKILLed on the way. Then 0 duplicate reviews,
replies, reactions or summaries, every session log well formed, and 0 late takeovers (work the
other replica finished only once the paused one had resumed; each is printed with what the
database showed then); the suite runs three pauses (tests/e2e/test_replica_pauses.py)."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.pause_loop import STOPS, run_pause_loop
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
    parser.add_argument("--pauses", type=int, default=0,
                        help="run the SIGSTOP/SIGCONT pause loop with this many pauses")
    args = parser.parse_args()
    if args.pauses:
        return pause_main(args)
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


def pause_main(args: argparse.Namespace) -> int:
    started = time.monotonic()
    # Kept when a problem is found: the replicas' logs (replica-NNN.log) say what happened.
    tmp = tempfile.mkdtemp(prefix="dsh-pauses-")
    with PostgresCluster() as cluster, \
            SandboxGitHub.on_loopback_80() as sb, ScriptedModelServer(policy=paced) as model:
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE pauses")
        report = run_pause_loop(Path(tmp), sb, model, cluster.dsn("pauses"),
                                kinds=list(STOPS), prs=args.prs, pauses=args.pauses,
                                kills=min(args.kills, args.pauses), seed=args.seed)
    print(f"PRs {args.prs}, pauses {report.pauses} (not reached {report.not_reached}), by "
          f"stop point {report.stops}, resumed replicas that logged their lease lost "
          f"{report.fenced}, SIGKILLs {report.kills}, pushes {report.pushes}, /bot "
          f"{len(report.bots)}, reviews posted {report.reviews}, replies {report.replies}, "
          f"sessions checked {report.sessions}, {time.monotonic() - started:.0f} s")
    for kind, details in zip(report.late_takeovers, report.late_details, strict=True):
        print(f"LATE TAKEOVER: at {kind}, the work was finished only after the paused replica "
              "resumed (liveness, not a duplicate)")
        if not any(line.startswith("backend ") for line in details):
            print("   nothing waited for a lock in the database")
        for line in details:
            print("  ", line)
    for problem in report.problems:
        print("PROBLEM:", problem)
    if report.problems or report.late_takeovers:
        print(f"the replicas' logs are kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    failed = len(report.problems) + len(report.late_takeovers)
    print("ok" if not failed else f"{failed} problem(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
