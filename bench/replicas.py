"""Replicas: reviews per minute with 1, 2 and 4 ``dsh run`` replicas on one
PostgreSQL database, and database transactions per review.

Each run: a fresh database on a throwaway cluster, the sandbox GitHub with N open PRs, the
scripted reviewer model with a fixed latency per response (``--latency``: the pause is spread
over the response's streamed chunks, so the model server's event loop is never blocked), and
``k`` replicas started together. ``time s`` runs from their start until every PR has a review;
``reviews/min`` is the steady rate from the first review to the last (start-up, which grows
with the number of processes on two cores, left out); ``all/min`` includes start-up. Database
work is read from ``pg_stat_database`` (committed + rolled back transactions: every statement
outside a transaction is one, so this counts round trips that changed or read something, a
lower bound of all round trips).

Caps with replicas: ``max_concurrent_reviews`` (per account) holds across all replicas
together (slot leases in the database); ``max_concurrent_turns`` is per process, so each
replica adds its own turns until the account's cap is reached. The default scenario is bound by
the process cap (2 turns per process, account cap 8): 1 -> 2 -> 4 replicas should scale
near-linearly, and past 4 replicas (8 turns) the account's cap holds the rate flat.

Measured on the 2-core development machine (shared with other work). Before: the turn cap held
across all replicas together (pg's build: 90.5 / 89.6 / 65.1 reviews/min with 24 PRs, cap 8;
replicas bought availability, not throughput). With the process cap per replica but a replica
keeping the work lease of every PR it had no turn for (32 PRs, --latency 1): 23.8 / 24.3 / 24.3
(flat: the first replica leased every PR). With the lease let go when no turn is free, but PRs
found leased elsewhere held back for lease_ttl_s (24 PRs, --latency 2): 13.4 / 29.9 / 37.2
(1 -> 2 linear, 2 -> 4 x1.24: PRs stayed queued on the replicas that first leased them). With
those PRs retried when a turn ends with nothing queued: 13.8 / 24.3 / 71.6, and a rerun took
111 s with 2 replicas (the second found every PR leased at its first look and had no turn end
to wait for). This build (an idle replica also retries them at each scan of the records):

    24 PRs, max_concurrent_reviews 8, max_concurrent_turns 2 per process, latency 2 s
    replicas  reviews   time s  first s  reviews/min  all/min  db xacts/review  cpu s/review
           1       24    108.3      8.5         13.8     13.3              142          0.39
           2       24     62.3      8.3         25.6     23.1              150          0.39
           4       24     37.8      9.8         49.1     38.1              172          0.56

Near-linear (x1.86, x3.56); runs this short are noisy on a shared machine. 4 x 2 turns equal
the account's cap of 8, so a fifth replica would add no speed.

Database transactions per review, read from the server's statement log (2 replicas, 16 PRs):
~26 session-log appends (one transaction per line), ~22 record reads, ~11 lease
acquire/release, ~6 record writes. Besides, the pool checks every connection before each use
(an empty statement: ~60 round trips per review, not counted above), the largest avoidable
cost, left as is (it is how a terminated backend costs a reconnect instead of an error).

Usage: python bench/replicas.py [--prs 32] [--replicas 1,2,4] [--cap 8] [--turns 2]
[--latency 1.0] (the figures above: --prs 24 --latency 2; as root: the sandbox GitHub binds
127.0.0.N:80). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import resource
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
from dsh_harness.testing import PostgresCluster, Reply, ScriptedModelServer


def transactions(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()
    return int(row[0]) if row else 0


def cpu_s() -> float:
    """CPU seconds of this process (the sandbox GitHub, the model server) and of the replicas
    that ended (with the MCP servers they waited for)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def chunks(reply: Reply, chunk_chars: int) -> int:
    """How many chunks the scripted server streams for ``reply`` (it pauses after each)."""
    def pieces(text: str) -> int:
        return max(1, -(-len(text) // chunk_chars))
    n = 1 + 2  # the role chunk; the finish chunk and the usage chunk
    n += pieces(reply.reasoning) if reply.reasoning else 0
    n += pieces(reply.content) if reply.content else 0
    for _, args in reply.tool_calls:
        text = args if isinstance(args, str) else json.dumps(args)
        n += 1 + (pieces(text) if text else 0)
    return n


def one_run(cluster: PostgresCluster, replicas: int, prs: int, cap: int, turns: int,
            latency_s: float) -> dict[str, float]:
    name = f"bench_{replicas}"
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = cluster.dsn(name)

    model = ScriptedModelServer()

    def paced(req):
        reply = reviewer_policy(req)
        reply.chunk_delay_s = latency_s / chunks(reply, model.chunk_chars)
        return reply

    model.policy = paced
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, model:
        build_shop(sb, prs=prs)
        toml = Deployment(Path(tmp), sb, model, dsn=dsn, poll_interval_s=1.0,
                          extra_account=f"max_concurrent_reviews = {cap}\n").toml()
        head = "\n[plugins.github-reviewer]\n"
        assert head in toml
        toml = toml.replace(head, f"{head}max_concurrent_turns = {turns}\n", 1)
        config = Path(tmp) / "dsh.toml"
        config.write_text(toml)
        before = transactions(dsn)
        cpu_before = cpu_s()
        started = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", "--config",
                                   str(config), "run"], cwd=tmp, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for _ in range(replicas)]
        first = last = None
        try:
            deadline = started + 900
            while time.monotonic() < deadline:
                done = sum(1 for n in range(1, prs + 1) if sb.state.reviews_of(REPO, n))
                if done and first is None:
                    first = time.monotonic() - started
                if done >= prs:
                    last = time.monotonic() - started
                    break
                time.sleep(0.1)
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
        cpu = cpu_s() - cpu_before
    first, last = first or 0.0, last or elapsed
    return {"replicas": replicas, "reviews": reviews, "elapsed_s": elapsed,
            "first_s": first, "all_per_min": reviews / elapsed * 60,
            "per_min": (prs - 1) / max(last - first, 1e-9) * 60,
            "xacts_per_review": (after - before) / max(reviews, 1),
            "cpu_per_review": cpu / max(reviews, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prs", type=int, default=32)
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--cap", type=int, default=8, help="max_concurrent_reviews (account)")
    parser.add_argument("--turns", type=int, default=2,
                        help="max_concurrent_turns (per process)")
    parser.add_argument("--latency", type=float, default=1.0,
                        help="seconds of every model response")
    args = parser.parse_args()
    rows = []
    with PostgresCluster() as cluster:
        for k in (int(x) for x in args.replicas.split(",")):
            rows.append(one_run(cluster, k, args.prs, args.cap, args.turns, args.latency))
            print(f"  {k} replica(s) done in {rows[-1]['elapsed_s']:.0f} s", file=sys.stderr)
    print(f"{args.prs} PRs, max_concurrent_reviews {args.cap}, max_concurrent_turns "
          f"{args.turns} per process, model latency {args.latency:g} s per response")
    print(f"{'replicas':>8} {'reviews':>8} {'time s':>8} {'first s':>8} {'reviews/min':>12} "
          f"{'all/min':>8} {'db xacts/review':>16} {'cpu s/review':>13}")
    for r in rows:
        print(f"{r['replicas']:>8} {r['reviews']:>8} {r['elapsed_s']:>8.1f} {r['first_s']:>8.1f} "
              f"{r['per_min']:>12.1f} {r['all_per_min']:>8.1f} {r['xacts_per_review']:>16.0f} "
              f"{r['cpu_per_review']:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
