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


def test_three_replicas_under_a_sigkill_loop_answer_every_trigger_once(tmp_path, sandbox80,
                                                                       pg_dsn):
    with ScriptedModelServer(policy=paced) as model:
        report = run_replica_loop(tmp_path, sandbox80, model, pg_dsn, replicas=3, kills=8)
    assert report.kills == 8 and report.reviews >= 3
    assert report.problems == [], "\n".join(report.problems)
    # Three ran side by side (no home lock turned one away), restarted ones joined them.
    assert len(running_logs(tmp_path)) >= 3
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM dsh_sessions").fetchone()[0] >= 3
        # Stopped replicas retired; none is left holding a lease or listed as alive.
        assert conn.execute("SELECT count(*) FROM dsh_replicas WHERE heartbeat_at > "
                            "now() - interval '10 seconds'").fetchone()[0] == 0
