"""One account of the reviewer, in its two stages, each with one owner.

* ``ConfiguredAccount`` — what exists in every process (``dsh run``, the CLI, the web UI) with no
  network: the config block and the guard holding the four tools. The world hook needs no more.
* ``ConnectedAccount`` — built whole by ``connect`` (``dsh run``, CI): the configured account
  plus its HTTP client, auth, REST client and MCP host. No field is ever missing, so no code
  asks whether it has been connected yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from ..config import AccountConfig, McpSettings
from .auth import AppAuth, PatAuth, load_private_key
from .client import GitHubClient
from .guard import Guard
from .mcp_host import McpRuntime

HTTP_TIMEOUT_S = 30.0


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


def connect(configured: ConfiguredAccount, key_path: Path | None,
            mcp: McpSettings) -> ConnectedAccount:
    """Open the account's clients; an App key is read and parsed here (``AuthError``).
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
    return ConnectedAccount(configured, http, auth, GitHubClient(cfg.api_url, auth, http),
                            McpRuntime(mcp, cfg.web_url, cfg.review.tool_timeout_s))
