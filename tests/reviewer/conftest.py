from __future__ import annotations

import httpx2
import pytest

from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient
from dsh_github_reviewer.testing import SandboxGitHub

BOT_TOKEN = "ghp_" + "b0t" * 12


@pytest.fixture
def sandbox():
    with SandboxGitHub() as sb:
        sb.add_token("dsh-bot", BOT_TOKEN)
        yield sb


@pytest.fixture
async def http():
    async with httpx2.AsyncClient(timeout=10) as client:
        yield client


@pytest.fixture
def client(sandbox, http):
    return GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http)


def small_repo(sandbox: SandboxGitHub, name: str = "octo/app", prs: int = 1):
    st = sandbox.state
    st.create_repo(name, {"app.py": "def f(x):\n    return x\n", "README.md": "hi\n"})
    for i in range(1, prs + 1):
        st.commit(name, f"feature-{i}", {"app.py": f"def f(x):\n    return x + {i}\n"})
        st.open_pull(name, f"feature-{i}", title=f"PR {i}", body="body", author="alice")
    return st
