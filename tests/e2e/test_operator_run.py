"""Through the real CLI: ``dsh run --once`` fails visibly when a pass
fails (cron relies on the exit code), and ``status`` shows what the running bot stored."""

from __future__ import annotations

import json

import pytest

from dsh_github_reviewer.testing.scenario import BOT_TOKEN, REPO, build_shop, push_fix
from dsh_harness.testing import Fault
from tests.cli_kit import dsh

from .conftest import Deployment

pytestmark = pytest.mark.slow


def _config_from_env(dep: Deployment) -> str:
    """The deployment's config, with the token and repositories read from the environment
    (as a service's EnvironmentFile would provide them)."""
    text = dep.toml()
    text = text.replace(f'personal_access_token = "{BOT_TOKEN}"',
                        'personal_access_token = "${GITHUB_TOKEN:-}"')
    return text.replace(f'repositories = ["{REPO}"]',
                        'repositories = "${GITHUB_REPOSITORIES:-}"')


async def test_run_once_exit_code_names_the_failed_pass(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    dep = Deployment(tmp_path, sandbox80, model, repositories=(REPO, "acme/missing"))
    config = dep.write_config()
    proc = dsh("--config", str(config), "run", "--once", cwd=tmp_path, timeout=240)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    failed = [line for line in proc.stderr.splitlines() if line.startswith("dsh: run: ")]
    assert failed and all("account demo" in line for line in failed), proc.stderr
    assert any("acme/missing" in line for line in failed), failed
    # The healthy repository was still reviewed in the same pass.
    assert len(sandbox80.state.reviews_of(REPO, 1)) == 1

    dep = Deployment(tmp_path, sandbox80, model)
    config = dep.write_config()
    proc = dsh("--config", str(config), "run", "--once", cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr

    # A /bot command whose turn fails waits for its retry: the pass still failed, and says so.
    ask = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot anything left?")
    model.inject(*[Fault.server_error()] * 5)   # one model request's 5 attempts
    proc = dsh("--config", str(config), "run", "--once", cwd=tmp_path, timeout=240)
    assert proc.returncode == 1, proc.stderr
    assert (f"dsh: run: account demo: {REPO}#1: /bot {ask.id} failed, retried later: "
            in proc.stderr), proc.stderr
    assert "review failed" not in proc.stderr

    # A review that fails in the pass (the model keeps answering 500) fails the pass too. The
    # /bot above is due again in this pass: enough faults for both turns, in either order.
    push_fix(sandbox80)
    model.inject(*[Fault.server_error()] * 10)
    proc = dsh("--config", str(config), "run", "--once", cwd=tmp_path, timeout=240)
    assert proc.returncode == 1
    assert f"dsh: run: account demo: {REPO}#1: review failed: " in proc.stderr, [
        x for x in proc.stderr.splitlines() if "dsh: run" in x or "ERROR" in x]


async def test_status_shows_what_the_running_bot_stored(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    dep = Deployment(tmp_path, sandbox80, model)
    config = tmp_path / "dsh.toml"
    config.write_text(_config_from_env(dep))
    service_env = {"GITHUB_TOKEN": BOT_TOKEN, "GITHUB_REPOSITORIES": REPO}
    proc = dsh("--config", str(config), "run", "--once", cwd=tmp_path, env=service_env,
               timeout=240)
    assert proc.returncode == 0, proc.stderr
    # The operator's shell has neither variable.
    proc = dsh("--config", str(config), "github-reviewer", "status", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (account,) = json.loads(proc.stdout)
    assert account["config"]["repositories"] == [REPO]
    assert account["config"]["credentials"] == "set"
    assert account["config"]["pid"] and account["config"]["started_at"]
    assert sorted(d.split(" ")[0] for d in account["config"]["differs"]) == [
        "credentials", "repositories"]
    assert BOT_TOKEN not in proc.stdout
    text = dsh("--config", str(config), "github-reviewer", "status", cwd=tmp_path).stdout
    assert f"as started: {REPO}" in text and "this shell reads it differently" in text
    assert "credentials (shell: unset)" in text
