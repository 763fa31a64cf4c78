"""`dsh run` killed with SIGKILL mid-review and mid-/bot, then restarted: exactly one post."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_github_reviewer.core.session_key import PrKey
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import REPO, build_shop
from dsh_harness.testing import ScriptedModelServer

from .conftest import Deployment

pytestmark = pytest.mark.slow
SESSION = PrKey("demo", "acme", "shop", 1).session_id


def slow_policy(req):
    reply = reviewer_policy(req)
    reply.chunk_delay_s = 0.1
    return reply


def dsh(config: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", "--config", str(config),
                             "run", *args], cwd=config.parent, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def kill_when(proc: subprocess.Popen, ready, what: str) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"dsh run exited before {what}: {proc.stdout.read()}")
        assert time.monotonic() < deadline, f"never reached {what}"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def finish(config: Path) -> str:
    proc = dsh(config, "--once")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    return out


@pytest.fixture
def slow_model():
    with ScriptedModelServer(policy=slow_policy) as m:
        yield m


async def test_sigkill_during_review_then_restart(tmp_path, sandbox80, slow_model):
    build_shop(sandbox80)
    config = Deployment(tmp_path, sandbox80, slow_model).write_config()
    proc = dsh(config)
    # Killed after the model read the diff and started writing the review, before the submit.
    kill_when(proc, lambda: any("add_comment_to_pending_review" in str(s.request)
                                for s in slow_model.served), "the review's comments")
    assert sandbox80.state.reviews_of(REPO, 1) == []
    finish(config)
    (review,) = sandbox80.state.reviews_of(REPO, 1)
    assert review.state == "COMMENTED"
    assert not [r for r in sandbox80.state.reviews if r.state == "PENDING"]

    dep = await Deployment(tmp_path, sandbox80, slow_model).start()
    log = await dep.harness.sessions.read(SESSION)
    ends = [e.reason for e in log.events if e.type == "turn_end"]
    assert ends == ["interrupted", "completed"], "resumed in the same session"
    assert (await dep.entry()).status == "reviewed"
    await dep.stop()


async def test_sigkill_during_bot_answer_then_restart(tmp_path, sandbox80, slow_model):
    build_shop(sandbox80)
    config = Deployment(tmp_path, sandbox80, slow_model).write_config()
    finish(config)
    assert len(sandbox80.state.reviews_of(REPO, 1)) == 1
    cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot anything left?")
    served = len(slow_model.served)
    proc = dsh(config)
    kill_when(proc, lambda: len(slow_model.served) > served, "the chat request")
    finish(config)
    replies = [c for c in sandbox80.state.issue_comments_of(REPO, 1)
               if f"reply-to:{cmd.id}" in c.body]
    assert len(replies) == 1
    finish(config)   # and once more: still one
    replies = [c for c in sandbox80.state.issue_comments_of(REPO, 1)
               if f"reply-to:{cmd.id}" in c.body]
    assert len(replies) == 1 and len(sandbox80.state.reviews_of(REPO, 1)) == 1


def test_run_without_credentials_names_the_variables(tmp_path):
    root = Path(__file__).resolve().parents[2]
    config = tmp_path / "dsh.toml"
    config.write_text((root / "dsh.example.toml").read_text())   # what scripts/run copies
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "DEEPSEEK_API_KEY")}
    env["HOME"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "dsh_harness.cli", "--config",
                           str(config), "run", "--once"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "GITHUB_TOKEN" in proc.stderr and "DEEPSEEK_API_KEY" in proc.stderr
    assert "dsh github-reviewer demo" in proc.stderr
