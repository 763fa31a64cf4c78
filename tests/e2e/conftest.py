"""End-to-end kit: the real github-mcp-server, the sandbox GitHub, the scripted reviewer model,
and the real poller/runner/harness."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import build_shop, model_server

__all__ = ["Deployment"]


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
