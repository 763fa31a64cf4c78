"""App auth, end to end against the sandbox token endpoint with a fresh RSA key."""

from __future__ import annotations

import asyncio

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from dsh_github_reviewer.github.auth import (
    REFRESH_MARGIN_S,
    AppAuth,
    AuthError,
    PatAuth,
    load_private_key,
)
from dsh_github_reviewer.github.client import GitHubClient


@pytest.fixture(scope="module")
def keypair():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


class Clock:
    """The bot's clock and the sandbox's, moved together."""

    def __init__(self, sandbox):
        self.sandbox, self._offset = sandbox, 0.0

    @property
    def offset(self) -> float:
        return self._offset

    @offset.setter
    def offset(self, value: float) -> None:
        self.sandbox.state.advance(value - self._offset)
        self._offset = value

    def __call__(self):
        return self.sandbox.state.now().timestamp()


async def test_installation_token_cached_until_refresh_margin(sandbox, http, keypair):
    private, public = keypair
    app = sandbox.register_app(123, 456, public, token_ttl_s=3600)
    clock = Clock(sandbox)
    auth = AppAuth(123, 456, private, sandbox.api_url, http, clock)
    t1 = await auth.token()
    assert t1.startswith("ghs_") and app.token_requests == 1
    assert await auth.token() == t1 and app.token_requests == 1
    clock.offset = 3600 - REFRESH_MARGIN_S - 5        # still outside the margin
    assert await auth.token() == t1
    clock.offset = 3600 - REFRESH_MARGIN_S + 5        # inside the 5-minute margin
    t2 = await auth.token()
    assert t2 != t1 and app.token_requests == 2
    # The token works for REST calls as the app's bot user.
    client = GitHubClient(sandbox.api_url, auth, http)
    assert (await client.request("GET", "user")).data["login"] == "dsh-reviewer[bot]"


async def test_a_turn_gets_a_token_valid_for_its_whole_deadline(sandbox, http, keypair):
    private, public = keypair
    app = sandbox.register_app(123, 457, public, token_ttl_s=3600)
    clock = Clock(sandbox)
    auth = AppAuth(123, 457, private, sandbox.api_url, http, clock)
    t1 = await auth.token()
    clock.offset = 3600 - 600           # 10 minutes left: enough for a REST call...
    assert await auth.token() == t1 and app.token_requests == 1
    t2 = await auth.token(valid_for_s=900)   # ...not for a 15-minute turn's MCP process
    assert t2 != t1 and app.token_requests == 2
    assert await auth.token(valid_for_s=900) == t2 and app.token_requests == 2
    client = GitHubClient(sandbox.api_url, auth, http)
    clock.offset = 3600 - 600 + 899     # the turn's last second: its token still works
    assert (await client.request("GET", "user")).data["login"] == "dsh-reviewer[bot]"


async def test_concurrent_refreshes_coalesce(sandbox, http, keypair):
    private, public = keypair
    app = sandbox.register_app(1, 2, public)
    auth = AppAuth(1, 2, private, sandbox.api_url, http)
    tokens = await asyncio.gather(*(auth.token() for _ in range(20)))
    assert len(set(tokens)) == 1 and app.token_requests == 1


async def test_failed_refresh_serves_still_valid_cached_token(sandbox, http, keypair):
    private, public = keypair
    app = sandbox.register_app(1, 3, public, token_ttl_s=3600)
    clock = Clock(sandbox)
    auth = AppAuth(1, 3, private, sandbox.api_url, http, clock)
    t1 = await auth.token()
    clock.offset = 3600 - 60      # refresh due, cached token valid for 60 s more
    app.fail_next = 1
    assert await auth.token() == t1
    clock.offset = 3600 + 10      # expired: a failing refresh is now an error
    app.fail_next = 1
    with pytest.raises(AuthError, match="HTTP 500"):
        await auth.token()
    assert (await auth.token()).startswith("ghs_")  # next refresh succeeds


async def test_jwt_claims(keypair):
    import jwt
    private, public = keypair
    auth = AppAuth(77, 1, private, "http://x", None, lambda: 1_000_000.0)
    claims = jwt.decode(auth.app_jwt(), public, algorithms=["RS256"],
                        options={"verify_exp": False, "verify_iat": False})
    assert claims == {"iat": 1_000_000 - 60, "exp": 1_000_000 + 540, "iss": "77"}


async def test_wrong_key_is_rejected_by_the_token_endpoint(sandbox, http, keypair):
    _, public = keypair
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    sandbox.register_app(9, 10, public)
    with pytest.raises(AuthError, match="HTTP 401"):
        await AppAuth(9, 10, other, sandbox.api_url, http).token()


def test_private_key_loading_errors_name_the_file(tmp_path, keypair):
    good = tmp_path / "app.pem"
    good.write_text(keypair[0])
    assert "PRIVATE KEY" in load_private_key(good)
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key but maybe a secret")
    with pytest.raises(AuthError, match=r"bad\.pem is not an unencrypted PEM private key") as exc:
        load_private_key(bad)
    assert "maybe a secret" not in str(exc.value)
    with pytest.raises(AuthError, match="cannot read GitHub App private key"):
        load_private_key(tmp_path / "missing.pem")


async def test_pat_auth_is_static_and_repr_hides_the_token():
    auth = PatAuth("ghp_" + "z" * 36)
    assert await auth.token() == "ghp_" + "z" * 36
    assert "zzzz" not in repr(auth)


async def test_app_lists_its_installation_repositories(sandbox, http, keypair):
    private, public = keypair
    sandbox.register_app(5, 6, public)
    sandbox.state.create_repo("octo/one")
    sandbox.state.create_repo("octo/two")
    client = GitHubClient(sandbox.api_url, AppAuth(5, 6, private, sandbox.api_url, http), http)
    assert sorted(await client.list_repositories()) == ["octo/one", "octo/two"]
