"""Replicas end to end: three ``dsh run`` processes on one PostgreSQL database, one of them
SIGKILLed and restarted again and again while pushes, ``/bot`` and ``/review`` arrive; every
trigger is answered exactly once (``scripts/replica_loop.py`` runs the long loop)."""

from __future__ import annotations

import psycopg
import pytest

from dsh_github_reviewer.testing.replica_loop import run_replica_loop
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
    with psycopg.connect(pg_dsn) as conn:
        # Killed replicas leave their heartbeat rows (stopped ones retire): they ran as
        # replicas side by side, not as one holder of the home lock and two that exited.
        assert conn.execute("SELECT count(*) FROM dsh_replicas").fetchone()[0] >= 2
        assert conn.execute("SELECT count(*) FROM dsh_sessions").fetchone()[0] >= 3
