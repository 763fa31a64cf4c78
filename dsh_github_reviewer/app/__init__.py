"""The composition root: the reviewer inside one harness, wired once.

One ``ReviewerApp`` per harness (kept in ``harness.plugin_state``), built lazily so the world
hook works in any process — ``dsh run``, the CLI or the web UI — from the configured accounts
alone; ``connect()`` builds every connected account whole, and the work service (``service``),
the webhook receivers (``webhooks``) and the reviewer strategy of each account (chosen here,
once) are wired on top.

May import every layer below it: ``sources``, ``work``, ``reviewers``, ``turn``, ``pr_output``,
``github``, ``config``, ``core``. The front ends (``cli``, ``web``, ``ci``) and ``plugin`` sit
above it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_harness import AgentWorld, DshError, Harness

from ..config import AccountConfig, McpSettings, ReviewerConfig, SetupError
from ..core.clock import Clock, utcnow
from ..core.session_key import PrKey, parse_session_id
from ..github.account import ConfiguredAccount, ConnectedAccount, IdentityError, connect
from ..github.auth import load_private_key
from ..github.errors import AuthError
from ..reviewers.base import Reviewer
from ..reviewers.inputs import WorldInputs
from ..reviewers.models import ModelChoice
from ..reviewers.single import SingleReviewer
from ..reviewers.team.review import TeamReviewer
from ..reviewers.world import build_world
from ..turn.prompts import TrustedInstructions
from ..work.records import DOMAIN, InstructionsRecord
from ..work.store import WorkStore
from . import run_record
from .service import WorkService

if TYPE_CHECKING:
    from ..sources.poll import PassResult
    from ..sources.webhook.server import WebhookServer

log = logging.getLogger(__name__)

PLUGIN_NAME = "dsh-github-reviewer"

__all__ = ["PLUGIN_NAME", "ReviewerApp", "SetupError"]


class ReviewerApp:
    def __init__(self, harness: Harness):
        self.harness = harness
        self.instances: dict[str, ReviewerConfig] = {}
        # Every process: the configured accounts, their model choice and reviewer strategy.
        self.configured: dict[str, ConfiguredAccount] = {}
        self.models: dict[str, ModelChoice] = {}
        self.reviewers: dict[str, Reviewer] = {}
        # After connect(): the connected accounts and their work records.
        self.connected: dict[str, ConnectedAccount] = {}
        self.stores: dict[str, WorkStore] = {}
        # Owned by the plugin's start-up: the work service, the webhook receivers, a --once pass.
        self.work: WorkService | None = None
        self.webhooks: list[WebhookServer] = []
        self.pass_results: dict[str, PassResult] = {}
        for instance, config in self._configs():
            self.instances[instance] = config
            for account in config.accounts:
                if account.key in self.configured:
                    raise SetupError(f"plugins.{instance}: account {account.name!r} is also "
                                     "configured by another instance; account names must be "
                                     "unique across instances")
                self.configure(ConfiguredAccount(instance, account))
        # One cap for the whole process: the largest any instance asks for.
        self.process_cap = max([c.max_concurrent_turns for c in self.instances.values()]
                               or [16])

    def _configs(self) -> list[tuple[str, ReviewerConfig]]:
        out = []
        for instance, cfg in self.harness.plugin_instances(PLUGIN_NAME):
            out.append((instance, cfg if isinstance(cfg, ReviewerConfig)
                        else ReviewerConfig.model_validate(cfg)))
        return out

    def configure(self, acct: ConfiguredAccount) -> None:
        """Take (or replace, before ``connect``: CI mode) a configured account, with its model
        choice and its reviewer strategy — the single reviewer or the team, chosen here once."""
        self.configured[acct.key] = acct
        models = self.models[acct.key] = ModelChoice(self.harness, acct.config)
        self.reviewers[acct.key] = (TeamReviewer(self.harness, models)
                                    if acct.config.review.team.enabled
                                    else SingleReviewer(self.harness, models))

    def tick_interval_s(self, key: str) -> float:
        acct = self.configured[key]
        return self.instances[acct.instance].tick_interval_s(acct.config)

    @classmethod
    def of(cls, harness: Harness) -> ReviewerApp:
        app = harness.plugin_state.get(PLUGIN_NAME)
        if app is None:
            app = harness.plugin_state[PLUGIN_NAME] = cls(harness)
        return app

    # -- start / stop -------------------------------------------------------------------------

    def check_credentials(self) -> None:
        missing = [a for a in self.configured.values() if not a.config.has_credentials]
        if missing:
            names = ", ".join(f"{a.instance}.accounts[{a.config.name}]" for a in missing)
            # A PAT account without repositories idles: name the variable the example reads
            # them from, or a user who sets only the token waits for reviews that never come.
            # One remedy a line: a single 500-character line is read by nobody.
            lines = [f"no GitHub credentials for {names}. Either:",
                     "  - set GITHUB_TOKEN (a ghp_/github_pat_/gho_ token: dsh.toml's "
                     "personal_access_token)"]
            if any(not a.config.repositories for a in missing):
                lines.append("    and GITHUB_REPOSITORIES (owner/repo names, comma or space "
                             "separated): without them a token account idles")
            lines.append("  - or configure a GitHub App (app_id, installation_id, "
                         "private_key_path)")
            if self._model_key():
                lines.append(f"  {self._model_key()}")
            lines.append("  To see the bot work without either, run: dsh github-reviewer demo")
            raise SetupError("\n".join(lines))

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

    def key_path(self, acct: ConfiguredAccount) -> Path | None:
        """The App key file, relative paths taken from the config file's directory."""
        path = acct.config.private_key_path
        return None if path is None else self.harness.loaded.resolve(path)

    def mcp_settings(self, acct: ConfiguredAccount) -> McpSettings:
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
        for acct in self.configured.values():
            where = acct.where
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
        """Connect every account (App keys are read and parsed here, the bot's login is asked
        of GitHub) and open its records."""
        self.check_credentials()
        domain = await self.harness.storage.domain(DOMAIN)
        for key, acct in self.configured.items():
            store = self.stores[key] = WorkStore(domain, key)
            known = (await store.load_account()).bot_login
            try:
                connected = self.connected[key] = await connect(
                    acct, self.key_path(acct), self.mcp_settings(acct), known)
            except IdentityError as exc:
                await self.close()
                raise SetupError(f"{acct.where}: {exc}") from None
            except AuthError as exc:
                await self.close()
                raise SetupError(f"{acct.where}.private_key_path: {exc}") from None
            login = connected.identity.login
            if login != known:
                # Kept for a later start that cannot ask GitHub (a revoked token, an outage).
                await store.update_account(lambda a, login=login: setattr(a, "bot_login", login))

    def build_work(self, clock: Clock = utcnow) -> WorkService:
        """The work service over the connected accounts (after ``connect``), kept as
        ``self.work``."""
        leases = self.harness.leases
        self.work = WorkService(self.connected, self.stores, self.reviewers,
                                {k: self.tick_interval_s(k) for k in self.connected},
                                self.process_cap, leases if leases.shared else None, clock)
        return self.work

    async def record_start(self) -> None:
        """Store what this run was started with, for ``status`` in another shell."""
        domain = await self.harness.storage.domain(run_record.DOMAIN)
        await run_record.record_start(
            domain, {k: (a.instance, a.config) for k, a in self.configured.items()},
            self.harness.loaded.source)

    async def close(self) -> None:
        accounts, self.connected = self.connected, {}
        for acct in accounts.values():
            await acct.close()

    # -- worlds -----------------------------------------------------------------------------

    async def stored_instructions(self, key: PrKey) -> InstructionsRecord | None:
        try:
            domain = await self.harness.storage.domain(DOMAIN)
        except DshError:
            return None
        store = WorkStore(domain, key.account)
        rec = await store.pr(key.ref)
        return await store.instructions(rec.instructions_key) if rec else None

    async def stored_inputs(self, key: PrKey) -> WorldInputs:
        """A session opened without a turn (the web UI, the CLI): its world from what the work
        records say the PR was last told, and the model resolved in this process if any."""
        stored = await self.stored_instructions(key)
        models = self.models.get(key.account)
        return WorldInputs(TrustedInstructions(stored.source, stored.text) if stored else None,
                           models.known if models else None)

    async def world(self, session_id: str, inputs: WorldInputs | None = None
                    ) -> AgentWorld | None:
        key = parse_session_id(session_id)
        if key is None:
            return None
        acct = self.configured.get(key.account) or ConfiguredAccount("", AccountConfig())
        return build_world(key, acct, inputs if inputs is not None
                           else await self.stored_inputs(key))
