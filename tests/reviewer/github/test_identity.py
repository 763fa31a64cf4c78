"""The bot's own login, learned when the account connects (against the sandbox)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from dsh_github_reviewer.config import AccountConfig, McpSettings
from dsh_github_reviewer.core.triggers import BotIdentity
from dsh_github_reviewer.github.account import (
    ConfiguredAccount,
    IdentityError,
    connect,
    learn_identity,
)
from dsh_github_reviewer.github.auth import AppAuth, PatAuth
from tests.reviewer.conftest import BOT_TOKEN


def pat_account(sandbox, token: str = BOT_TOKEN) -> ConfiguredAccount:
    return ConfiguredAccount("github-reviewer", AccountConfig(
        name="demo", personal_access_token=token, api_url=sandbox.api_url,
        web_url=sandbox.web_url, repositories=["o/r"]))


async def test_a_token_is_its_users_login(sandbox):
    acct = await connect(pat_account(sandbox), None, McpSettings())
    try:
        assert acct.identity == BotIdentity("dsh-bot")
    finally:
        await acct.close()


async def test_an_installation_token_that_may_not_read_user_asks_graphql(sandbox, client):
    # Actions' GITHUB_TOKEN is an installation token: GET /user answers 403.
    sandbox.inject_error(403, path_contains="/user")
    assert await learn_identity(client, PatAuth(BOT_TOKEN)) == BotIdentity("dsh-bot")
    assert sandbox.requests("POST", "graphql")


async def test_an_app_is_its_slug_bot(sandbox, http):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    sandbox.register_app(7, 70, public.decode(), slug="shop-reviewer")
    auth = AppAuth(7, 70, private, sandbox.api_url, http)
    assert await auth.app_login() == "shop-reviewer[bot]"
    assert await learn_identity(None, auth) == BotIdentity("shop-reviewer[bot]")  # type: ignore[arg-type]
    # Another key is not the App's: a clear error, never a guess.
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    with pytest.raises(IdentityError, match="own GitHub login"):
        await learn_identity(None, AppAuth(7, 70, other, sandbox.api_url, http))  # type: ignore[arg-type]


async def test_without_an_identity_the_account_does_not_connect(sandbox):
    with pytest.raises(IdentityError, match="only its own markers count"):
        await connect(pat_account(sandbox, "ghp_" + "x" * 36), None, McpSettings())
    sandbox.inject_error(502, path_contains="/user")
    with pytest.raises(IdentityError, match="502"):
        await connect(pat_account(sandbox), None, McpSettings())


async def test_the_login_learned_before_stands_in_when_github_cannot_tell(sandbox):
    # A revoked token still starts (into the credential pause) as the same bot.
    acct = await connect(pat_account(sandbox, "ghp_" + "x" * 36), None, McpSettings(),
                         known="dsh-bot")
    try:
        assert acct.identity == BotIdentity("dsh-bot")
    finally:
        await acct.close()
