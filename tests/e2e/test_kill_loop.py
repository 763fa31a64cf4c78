"""A short SIGKILL loop (10 kills); ``scripts/sigkill_loop.py`` runs the long one (>= 30)."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.testing.kill_loop import run_loop
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_harness.testing import ScriptedModelServer

pytestmark = pytest.mark.slow


def paced(req):
    reply = reviewer_policy(req)
    reply.chunk_delay_s = 0.02   # turns take a moment, so kills land inside them too
    return reply


def test_sigkill_loop_answers_every_trigger_exactly_once(tmp_path, sandbox80):
    with ScriptedModelServer(policy=paced) as model:
        report = run_loop(tmp_path, sandbox80, model, kills=10, seed=11, max_pause_s=2.0)
    assert report.kills == 10 and report.reviews >= 3
    assert report.problems == [], "\n".join(report.problems)
