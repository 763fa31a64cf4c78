"""The reviewer inside one harness: its accounts, their GitHub clients, guards and pollers.

One ``ReviewerApp`` per harness (kept in ``harness.plugin_state``), built lazily so the world
hook works in any process — ``dsh run``, the CLI or the web UI — while network clients and
pollers exist only after ``start()``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2

from dsh_harness import AgentWorld, DshError, Harness

from ..config import AccountConfig, McpSettings, ReviewerConfig
from ..core.session_key import PrKey, parse_session_id
from ..github.auth import AppAuth, PatAuth, load_private_key
from ..github.client import GitHubClient
from ..github.errors import AuthError
from ..github.guard import Guard
from ..github.mcp_host import McpRuntime
from ..reviewers.team.personas import (
    COORDINATOR,
    coordinator_system_prompt,
    persona_system_prompt,
    resolve,
)
from ..sources.repositories import WatchedRepositories
from ..turn.prompts import TrustedInstructions, system_prompt
from ..work.records import DOMAIN, InstructionsRecord, pr_key
from ..work.store import WorkStore
from . import run_record

log = logging.getLogger(__name__)

PLUGIN_NAME = "dsh-github-reviewer"
HTTP_TIMEOUT_S = 30.0


class SetupError(DshError):
    pass


@dataclass
class AccountRuntime:
    instance: str
    config: AccountConfig
    guard: Guard = field(default_factory=Guard)
    http: httpx2.AsyncClient | None = None
    auth: PatAuth | AppAuth | None = None
    client: GitHubClient | None = None
    mcp: McpRuntime | None = None
    store: WorkStore | None = None
    inbox: Any = None     # work.inbox.Inbox, set when the work service is built
    model: str | None = None
    model_resolved: bool = False
    poller: Any = None
    watched: WatchedRepositories | None = None  # the repositories it reviews (set by connect)
    # Seconds between polls: poll_interval_s, or webhook.reconcile_interval_s when deliveries
    # trigger the work and polling only reconciles.
    tick_interval_s: float = 0.0
    # A pause of the whole account (rejected credentials, the MCP server rate limited): see
    # work/pause.py; mirrored from the account record.
    paused_until: datetime | None = None
    pause: str | None = None

    def __post_init__(self) -> None:
        self.tick_interval_s = self.tick_interval_s or self.config.poll_interval_s

    @property
    def key(self) -> str:
        return self.config.key


class ReviewerApp:
    def __init__(self, harness: Harness):
        self.harness = harness
        self.accounts: dict[str, AccountRuntime] = {}
        self.instances: dict[str, ReviewerConfig] = {}
        self.webhooks: list[Any] = []  # running webhook receivers (webhook.runtime)
        for instance, cfg in harness.plugin_instances(PLUGIN_NAME):
            config = cfg if isinstance(cfg, ReviewerConfig) else ReviewerConfig.model_validate(cfg)
            self.instances[instance] = config
            for account in config.accounts:
                if account.key in self.accounts:
                    raise SetupError(f"plugins.{instance}: account {account.name!r} is also "
                                     "configured by another instance; account names must be "
                                     "unique across instances")
                interval = (config.webhook.reconcile_interval_s if config.webhook.enabled
                            else account.poll_interval_s)
                self.accounts[account.key] = AccountRuntime(instance, account,
                                                            tick_interval_s=interval)
        self._model_lock = asyncio.Lock()
        # Set by whoever runs a turn, read by the world hook: the trusted instructions of a PR
        # (by cursor key) when they do not live in the cursor (CI mode), and the model of a
        # session's current attempt (a team persona falling back to its next candidate).
        self.pinned_instructions: dict[str, TrustedInstructions | None] = {}
        self.session_models: dict[str, str] = {}
        self.work: Any = None   # work.service.WorkService once started
        self.pass_results: dict[str, Any] = {}   # account -> poller.PassResult (--once)
        # One cap for the whole process: the largest any instance asks for.
        self.process_cap = max([c.max_concurrent_turns for _, c in self._configs()] or [16])

    def _configs(self) -> list[tuple[str, ReviewerConfig]]:
        out = []
        for instance, cfg in self.harness.plugin_instances(PLUGIN_NAME):
            out.append((instance, cfg if isinstance(cfg, ReviewerConfig)
                        else ReviewerConfig.model_validate(cfg)))
        return out

    @classmethod
    def of(cls, harness: Harness) -> ReviewerApp:
        app = harness.plugin_state.get(PLUGIN_NAME)
        if app is None:
            app = harness.plugin_state[PLUGIN_NAME] = cls(harness)
        return app

    # -- start / stop -------------------------------------------------------------------------

    def check_credentials(self) -> None:
        missing = [a for a in self.accounts.values() if not a.config.has_credentials]
        if missing:
            names = ", ".join(f"{a.instance}.accounts[{a.config.name}]" for a in missing)
            # A PAT account without repositories idles: name the variable the example reads
            # them from, or a user who sets only the token waits for reviews that never come.
            repos = ("; a token account also needs its repositories: set GITHUB_REPOSITORIES "
                     "(owner/repo names, comma or space separated, e.g. octo-org/service; "
                     "the example dsh.toml reads repositories from it), else it idles"
                     if any(not a.config.repositories for a in missing) else "")
            raise SetupError(
                f"no GitHub credentials for {names}: set GITHUB_TOKEN (a ghp_/github_pat_/gho_ "
                f"token used by dsh.toml's personal_access_token){repos}; or configure a "
                f"GitHub App (app_id, installation_id, private_key_path). {self._model_key()} "
                "To see the bot work without either, run: dsh github-reviewer demo")

    def _model_key(self) -> str:
        """Where the default model's key comes from (any provider, not only DeepSeek)."""
        config = self.harness.config
        provider = config.providers.get(config.default_model.split("/", 1)[0])
        if provider is None:
            return ""
        if provider.api_key_env:
            return f"The model key comes from {provider.api_key_env}."
        return "" if not provider.api_key_required else (
            f"The model key is providers.{config.default_model.split('/', 1)[0]}.api_key.")

    def key_path(self, acct: AccountRuntime) -> Path:
        """The App key file, relative paths taken from the config file's directory."""
        assert acct.config.private_key_path is not None
        return self.harness.loaded.resolve(acct.config.private_key_path)

    def mcp_settings(self, acct: AccountRuntime) -> McpSettings:
        cwd = acct.config.mcp.cwd
        if cwd is None:
            return acct.config.mcp
        return acct.config.mcp.model_copy(update={"cwd": self.harness.loaded.resolve(cwd)})

    def problems(self) -> list[str]:
        """What would stop ``dsh run`` (``dsh_validate``): checked without network or writes."""
        out: list[str] = []
        try:
            self.check_credentials()
        except SetupError as exc:
            out.append(str(exc))
        for acct in self.accounts.values():
            where = f"plugins.{acct.instance}.accounts[{acct.config.name}]"
            if acct.config.app_mode:
                try:
                    load_private_key(self.key_path(acct))
                except AuthError as exc:
                    out.append(f"{where}.private_key_path: {exc}")
            cwd = self.mcp_settings(acct).cwd
            if cwd is not None and not cwd.is_dir():
                out.append(f"{where}.mcp.cwd: {cwd} is not a directory")
            refs = [c.ref for c in acct.config.review.models] or [None]
            try:
                llm_problems = [self.harness.llm.problem(ref) for ref in refs]
            except DshError:
                continue  # the harness reports a providers block it cannot build
            if all(llm_problems):
                out.append(f"{where}.review.models: {llm_problems[0]}. To see the bot work "
                           "offline first, run: dsh github-reviewer demo")
        return out

    async def connect(self) -> None:
        """Open clients for every account (App keys are read and parsed here)."""
        self.check_credentials()
        domain = await self.harness.storage.domain(DOMAIN)
        for acct in self.accounts.values():
            acct.http = httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S)
            cfg = acct.config
            if cfg.app_mode:
                try:
                    key = load_private_key(self.key_path(acct))
                except AuthError as exc:
                    raise SetupError(f"plugins.{acct.instance}.accounts[{cfg.name}]"
                                     f".private_key_path: {exc}") from None
                acct.auth = AppAuth(cfg.app_id, cfg.installation_id, key,  # type: ignore[arg-type]
                                    cfg.api_url, acct.http)
            else:
                acct.auth = PatAuth(cfg.personal_access_token.get_secret_value())  # type: ignore[union-attr]
            acct.client = GitHubClient(cfg.api_url, acct.auth, acct.http)
            acct.watched = WatchedRepositories(acct.key, cfg, acct.client)
            acct.mcp = McpRuntime(self.mcp_settings(acct), cfg.web_url, cfg.review.tool_timeout_s)
            acct.store = WorkStore(domain, acct.key)

    async def record_start(self) -> None:
        """Store what this run was started with, for ``status`` in another shell."""
        domain = await self.harness.storage.domain(run_record.DOMAIN)
        await run_record.record_start(
            domain, {k: (a.instance, a.config) for k, a in self.accounts.items()},
            self.harness.loaded.source)

    async def close(self) -> None:
        for acct in self.accounts.values():
            for session_id in list(acct.guard.turns):
                await acct.guard.end(session_id)
            if acct.http is not None:
                await acct.http.aclose()
                acct.http = None

    # -- models -----------------------------------------------------------------------------

    async def resolve_model(self, acct: AccountRuntime) -> str | None:
        """The first ``review.models`` candidate its provider lists (cached), else the default."""
        async with self._model_lock:
            if acct.model_resolved:
                return acct.model
            candidates = acct.config.review.models
            if candidates:
                offered: dict[str, list[str]] = {}
                for c in candidates:
                    if c.provider not in offered:
                        try:
                            offered[c.provider] = await self.harness.llm.provider(
                                c.provider).list_models()
                        except Exception as exc:
                            log.warning("cannot list models of provider %s: %s", c.provider, exc)
                            offered[c.provider] = []
                    if c.model in offered[c.provider]:
                        acct.model = c.ref
                        break
                else:
                    refs = ", ".join(c.ref for c in candidates)
                    raise SetupError(f"none of review.models ({refs}) is offered by its "
                                     "provider")
            acct.model_resolved = True
            return acct.model

    # -- worlds -----------------------------------------------------------------------------

    def account_for(self, key: PrKey) -> AccountRuntime | None:
        return self.accounts.get(key.account)

    async def stored_instructions(self, key: PrKey) -> InstructionsRecord | None:
        try:
            domain = await self.harness.storage.domain(DOMAIN)
        except DshError:
            return None
        store = WorkStore(domain, key.account)
        rec = await store.pr(pr_key(key.account, f"{key.owner}/{key.repo}", key.number))
        return await store.instructions(rec.instructions_key) if rec else None

    async def instructions_for(self, key: PrKey) -> TrustedInstructions | None:
        if key.record_key in self.pinned_instructions:
            return self.pinned_instructions[key.record_key]
        stored = await self.stored_instructions(key)
        return TrustedInstructions(stored.source, stored.text) if stored else None

    async def world(self, session_id: str) -> AgentWorld | None:
        key = parse_session_id(session_id)
        if key is None:
            return None
        acct = self.account_for(key)
        trusted = await self.instructions_for(key)
        review = acct.config.review if acct else AccountConfig().review
        guard = acct.guard if acct else Guard()
        tools = guard.tools()
        if key.persona is None:
            prompt = system_prompt(trusted)
        elif key.persona == COORDINATOR:
            prompt = coordinator_system_prompt(trusted)
        else:
            persona = resolve(key.persona, trusted)
            if persona is None:
                raise SetupError(f"persona {key.persona!r} is not defined: it is not built in "
                                 "(quality, security, performance) and the trusted "
                                 f"instructions have no '## Persona: {key.persona}' section")
            prompt = persona_system_prompt(persona, trusted)
            # Personas only read; the coordinator is the team's single writer.
            tools = guard.read_tools()
        return AgentWorld(
            system_prompt=prompt,
            tools=tools,
            hide_global_tools=True,
            model=self.session_models.get(session_id) or (acct.model if acct else None),
            max_tool_calls=review.max_tool_calls,
            # The MCP host enforces tool_timeout_s on the handshake and on each call; the
            # harness bound is a backstop above both.
            tool_timeout_s=2 * review.tool_timeout_s + 5,
            tool_result_limit=review.tool_result_limit,
            turn_timeout_s=review.turn_timeout_s)
