"""An App account without ``repositories`` reviews every repository its
installation can access, read conditionally each tick, following changes without a restart."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from dsh_github_reviewer.config import AccountConfig
from dsh_github_reviewer.github.auth import AppAuth
from dsh_github_reviewer.github.client import GitHubClient
from dsh_github_reviewer.sources.repositories import WatchedRepositories


@pytest.fixture(scope="module")
def keypair():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo
                                           ).decode()
    return private, public


def app_config(**kw) -> AccountConfig:
    return AccountConfig(name="org", app_id=7, installation_id=70,
                         private_key_path="unused.pem", **kw)


async def test_app_account_follows_its_installation(sandbox, http, keypair):
    private, public = keypair
    for name in ("acme/one", "acme/two", "acme/three"):
        sandbox.state.create_repo(name, {"README.md": "x\n"})
    sandbox.register_app(7, 70, public, repositories=["acme/one", "acme/three"])
    client = GitHubClient(sandbox.api_url, AppAuth(7, 70, private, sandbox.api_url, http), http)
    watched = WatchedRepositories("org", app_config(), client)
    assert watched.from_installation
    assert await watched.current() == ["acme/one", "acme/three"]
    free = client.counters.not_modified
    assert await watched.current() == ["acme/one", "acme/three"]
    assert client.counters.not_modified == free + 1, "an unchanged list is a free 304"
    sandbox.set_installation_repositories("dsh-reviewer[bot]", ["acme/two"])
    assert await watched.current() == ["acme/two"]


async def test_listed_repositories_win_and_pat_without_list_is_idle(sandbox, http, client):
    requests = client.counters.requests
    listed = WatchedRepositories("org", app_config(repositories=["acme/one"]), client)
    assert not listed.from_installation and await listed.current() == ["acme/one"]
    pat = WatchedRepositories("me", AccountConfig(personal_access_token="ghp_" + "x" * 36),
                              client)
    assert await pat.current() == []
    assert client.counters.requests == requests, "neither asks GitHub"
