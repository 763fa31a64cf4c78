"""Replicas end to end: three ``dsh run`` processes on one PostgreSQL database, one of them
SIGKILLed and restarted again and again while pushes, ``/bot`` and ``/review`` arrive; every
trigger is answered exactly once (``scripts/replica_loop.py`` runs the long loop)."""

from __future__ import annotations

import psycopg
import pytest

from dsh_github_reviewer.testing.replica_loop import run_replica_loop, running_logs
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_harness.testing import ScriptedModelServer

pytestmark = pytest.mark.slow


def paced(req):
    reply = reviewer_policy(req)
    reply.chunk_delay_s = 0.02   # turns take a moment, so kills land inside them too
    return reply


def test_three_replicas_under_a_sigkill_loop_answer_every_trigger_once(
        tmp_path, sandbox80, pg_dsn, postgres_cluster):
    """With database faults too: every third step terminates the replicas' connections, and
    the server is down for 5 s half-way (``scripts/replica_loop.py``: 30 kills, 30 s)."""
    with ScriptedModelServer(policy=paced) as model:
        report = run_replica_loop(tmp_path, sandbox80, model, pg_dsn, replicas=3, kills=8,
                                  cluster=postgres_cluster, outage_s=5, terminate_every=3)
    assert report.kills == 8 and report.reviews >= 3 and report.terminated >= 3
    assert report.problems == [], "\n".join(report.problems)
    # Three ran side by side (no home lock turned one away), restarted ones joined them.
    assert len(running_logs(tmp_path)) >= 3
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM dsh_sessions").fetchone()[0] >= 3
        # Stopped replicas retired; none is left holding a lease or listed as alive.
        assert conn.execute("SELECT count(*) FROM dsh_replicas WHERE heartbeat_at > "
                            "now() - interval '10 seconds'").fetchone()[0] == 0


async def test_status_shows_replicas_their_heartbeats_and_who_runs_a_pr(tmp_path, sandbox80,
                                                                        model, pg_dsn, capsys):
    import argparse

    from dsh_github_reviewer.cli import cmd_status, status_data
    from dsh_github_reviewer.testing.deployment import Deployment
    from dsh_github_reviewer.testing.scenario import build_shop

    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, dsn=pg_dsn).start()
    h = dep.harness
    await h.leases.heartbeat({"version": "test"})
    other = await Deployment(tmp_path, sandbox80, model, dsn=pg_dsn).start()
    await other.harness.leases.heartbeat()
    lease = await other.harness.leases.acquire("pr:demo:acme/shop#1", 60)
    (account,) = await status_data(h)
    assert {r["id"] for r in account["replicas"]} == {h.replica_id, other.harness.replica_id}
    assert all(r["heartbeat_age_s"] >= 0 for r in account["replicas"])
    assert await dep.pollers["demo"]._poll_lease(60), "this replica polls the slot"
    assert not await other.pollers["demo"]._poll_lease(60), "the other one does not"
    await dep.tick()  # records the PRs, runs what it may: PR 1's lease is the other's
    (account,) = await status_data(h)
    assert account["poll_lease"]["owner"] == h.replica_id
    pr1 = next(p for p in account["prs"] if p["pr"] == "acme/shop#1")
    assert pr1["lease"]["owner"] == other.harness.replica_id, "PR 1's work is the other's"
    assert await cmd_status(h, argparse.Namespace(json=False)) == 0
    text = capsys.readouterr().out
    assert "  replicas: 2" in text and f"running on {other.harness.replica_id}" in text
    await other.harness.leases.release(lease)
    await other.stop()
    await dep.stop()


async def test_the_polling_replica_runs_work_another_replica_recorded_and_left(
        tmp_path, sandbox80, model, pg_dsn):
    """A replica records a push (its poll), then stops before doing the work (SIGSTOP, a
    crash): the replica that polls next observes the same head, already recorded, so its
    records do not change; it must still find the work in the shared records (the pause
    loop's late takeovers: the standby, the only replica left polling, never looked)."""
    from dsh_github_reviewer.testing.deployment import Deployment
    from dsh_github_reviewer.testing.scenario import BOT_LOGIN, FEATURE, REPO, build_shop

    build_shop(sandbox80)
    polling = await Deployment(tmp_path, sandbox80, model, dsn=pg_dsn).start()
    stopped = await Deployment(tmp_path, sandbox80, model, dsn=pg_dsn).start()
    await polling.tick()  # records PR 1 and reviews its head; its scheduler keeps running
    head = sandbox80.state.commit(REPO, "feature-1", {"shop/cart.py": FEATURE["shop/cart.py"]
                                                      + "# one more line\n"}, message="more")
    await stopped.pollers["demo"].tick()  # records the new head; its work never runs
    assert (await polling.entry(1)).status == "reviewing", "the new head is owed a review"
    await polling.tick()
    assert [r.commit_id for r in polling.reviews(1) if r.user == BOT_LOGIN][-1] == head, \
        "the head another replica recorded was reviewed by the one still running"
    await stopped.stop()
    await polling.stop()


def test_replicas_behind_one_round_robin_webhook_service(tmp_path, sandbox80, pg_dsn):
    """Webhooks delivered round-robin to three replicas (each restarted replica listens on its
    own port again) while one at a time is SIGKILLed: still every trigger once."""
    with ScriptedModelServer(policy=paced) as model:
        report = run_replica_loop(tmp_path, sandbox80, model, pg_dsn, replicas=3, kills=6,
                                  webhook_secret="replica-hook-s3cret")
    assert report.kills == 6 and report.reviews >= 3
    assert report.problems == [], "\n".join(report.problems)
    answered = [n for n in report.deliveries.values() if n]
    assert len(answered) >= 2, f"deliveries per replica: {report.deliveries}"
