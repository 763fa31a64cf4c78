"""End-to-end kit: the real github-mcp-server, the sandbox GitHub, the scripted reviewer model,
and the real poller/runner/harness."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import build_shop, model_server

__all__ = ["Deployment"]


@pytest.fixture(autouse=True)
async def stop_what_the_test_left_running():
    """A test that fails before its own ``dep.stop()`` (most stop on their last line) would
    leave the deployment's MCP processes, HTTP clients and store connections behind, and a
    leftover can keep pytest from exiting: a hang in CI instead of one failed test. Every
    deployment the test started and did not stop is stopped here, on the test's own loop."""
    before = set(map(id, Deployment.left_running()))
    yield
    for dep in Deployment.left_running():
        if id(dep) not in before:
            await dep.stop(grace_s=10)


@pytest.fixture
def sandbox80():
    with SandboxGitHub.on_loopback_80() as sb:
        yield sb


@pytest.fixture
def model():
    with model_server() as m:
        yield m


@pytest.fixture
async def shop(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model).start()
    yield dep
    await dep.stop()
