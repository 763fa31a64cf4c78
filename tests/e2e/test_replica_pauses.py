"""Replicas paused inside their work: a replica stops itself (SIGSTOP) in the read that
precedes its review POST, and another one mid-turn just before a session append; a second
replica takes each lease over and finishes the work while the first is still stopped; resumed
(SIGCONT), the stale replica writes nothing: no second review, summary, reply or reaction, and
no line in the session its successor wrote. ``scripts/replica_loop.py --pauses 24``
runs the long loop (every stop point, with SIGKILLs)."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.testing.pause_loop import run_pause_loop
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_harness.testing import ScriptedModelServer

pytestmark = pytest.mark.slow


def test_a_replica_resumed_after_losing_its_lease_changes_nothing(tmp_path, sandbox80, pg_dsn):
    with ScriptedModelServer(policy=reviewer_policy) as model:
        report = run_pause_loop(tmp_path, sandbox80, model, pg_dsn,
                                kinds=["read-before-post", "append-assistant", "review-post"])
    # Safety: no duplicate post and no stale session line.
    assert report.problems == [], "\n".join(report.problems)
    # Liveness: each time, the other replica finished the work while the paused one was still
    # stopped (a stopped writer's transaction no longer holds its locks past the server's idle
    # timeout, and the replica left polling alone rescans the records it did not write).
    assert report.late_takeovers == [], report.late_details
    assert report.pauses == 3 and report.not_reached == 0, report.stops
    assert report.fenced == 3, "each resumed replica logged its lease lost (once)"
    assert report.reviews >= 2 and report.sessions >= 1
