"""One account of the reviewer, in its two stages, each with one owner.

* ``ConfiguredAccount`` — what exists in every process (``dsh run``, the CLI, the web UI) with no
  network: the config block and the guard holding the four tools. The world hook needs no more.
* ``ConnectedAccount`` — built whole by ``connect`` (``dsh run``, CI): the configured account
  plus its HTTP client, auth, REST client, MCP host and the bot's identity (the login it posts
  as, asked of GitHub once). No field is ever missing, so no code asks whether it has been
  connected yet.

The identity is what makes a marker count (``core/triggers.py``, "own words"): only content
that login authored is the bot's. It is asked of GitHub at every connect; when GitHub cannot
answer (rejected credentials, an outage) the login this account learned at an earlier connect
(kept in its account record) stands in, so a revoked token still starts into the credential
pause. With neither, the account does not connect — there is no fallback that would trust a
marker by anyone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from ..config import AccountConfig, McpSettings
from ..core.sanitizer import redact_secrets
from ..core.triggers import BotIdentity
from .auth import AppAuth, PatAuth, load_private_key
from .client import GitHubClient
from .errors import AuthError, GitHubError, RateLimited
from .guard import Guard
from .mcp_host import McpRuntime

HTTP_TIMEOUT_S = 30.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConfiguredAccount:
    instance: str   # the plugin instance whose config block names it
    config: AccountConfig
    guard: Guard = field(default_factory=Guard)

    @property
    def key(self) -> str:
        return self.config.key

    @property
    def where(self) -> str:
        """Its config path, for errors: ``plugins.<instance>.accounts[<name>]``."""
        return f"plugins.{self.instance}.accounts[{self.config.name}]"


@dataclass(frozen=True)
class ConnectedAccount:
    configured: ConfiguredAccount
    http: httpx2.AsyncClient
    auth: PatAuth | AppAuth
    client: GitHubClient
    mcp: McpRuntime
    # The login the bot posts as: only its content's markers count.
    identity: BotIdentity

    @property
    def instance(self) -> str:
        return self.configured.instance

    @property
    def config(self) -> AccountConfig:
        return self.configured.config

    @property
    def guard(self) -> Guard:
        return self.configured.guard

    @property
    def key(self) -> str:
        return self.configured.key

    async def close(self) -> None:
        for session_id in list(self.guard.turns):
            await self.guard.end(session_id)
        await self.http.aclose()


class IdentityError(AuthError):
    """The bot's own login could not be learned: the account must not run without it."""


VIEWER = "query { viewer { login } }"


async def learn_identity(client: GitHubClient, auth: PatAuth | AppAuth) -> BotIdentity:
    """Who the bot is on GitHub. A token: its login (``GET /user``; an installation token such
    as Actions' ``GITHUB_TOKEN`` may not read that, so GraphQL ``viewer`` then). An App:
    ``<slug>[bot]`` (``GET /app`` with the App's JWT). ``IdentityError`` names what failed."""
    try:
        if isinstance(auth, AppAuth):
            return BotIdentity(await auth.app_login())
        try:
            return BotIdentity(await client.authenticated_login())
        except GitHubError as exc:
            if isinstance(exc, RateLimited) or exc.status not in (403, 404):
                raise
            data = await client.graphql(VIEWER, {})
            login = (data.get("viewer") or {}).get("login") if isinstance(data, dict) else None
            if not isinstance(login, str) or not login:
                raise GitHubError("GraphQL viewer: the answer has no login") from None
            return BotIdentity(login)
    except (GitHubError, AuthError, ValueError) as exc:
        raise IdentityError(
            "cannot learn the bot's own GitHub login (" + redact_secrets(str(exc))[:300]
            + "); it is needed to "
            "tell the bot's posts from others' (only its own markers count), so the account "
            "does not start without it") from None


async def connect(configured: ConfiguredAccount, key_path: Path | None,
                  mcp: McpSettings, known: str | None = None) -> ConnectedAccount:
    """Open the account's clients and learn the bot's identity; an App key is read and parsed
    here (``AuthError``). ``known``: the login learned at an earlier connect, used only when
    GitHub cannot tell now; without it a failed lookup raises ``IdentityError``.
    ``key_path`` and ``mcp`` come with relative paths already resolved."""
    cfg = configured.config
    if cfg.app_mode:
        assert key_path is not None
        key = load_private_key(key_path)
    http = httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S)
    auth: PatAuth | AppAuth
    if cfg.app_mode:
        auth = AppAuth(cfg.app_id, cfg.installation_id, key,  # type: ignore[arg-type]
                       cfg.api_url, http)
    else:
        auth = PatAuth(cfg.personal_access_token.get_secret_value())  # type: ignore[union-attr]
    client = GitHubClient(cfg.api_url, auth, http)
    try:
        identity = await learn_identity(client, auth)
    except IdentityError as exc:
        if not known:
            await http.aclose()
            raise
        log.warning("account %s: %s; using the login learned before, %s", configured.key,
                    str(exc).split(";", 1)[0], known)
        identity = BotIdentity(known)
    except BaseException:
        await http.aclose()
        raise
    return ConnectedAccount(configured, http, auth, client,
                            McpRuntime(mcp, cfg.web_url, cfg.review.tool_timeout_s), identity)
