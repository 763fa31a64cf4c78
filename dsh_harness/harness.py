"""The ``Harness``: one deployment config, one plugin host, and the services plugins use."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr, ValidationError

from .agents import AgentService
from .config import LoadedConfig, PluginInstanceConfig
from .errors import ConfigError, DshError, PluginError, StorageError
from .llm import LLMService
from .plugins import (
    BUILTIN,
    ENTRY_POINT,
    Discovered,
    PluginHost,
    PluginInfo,
    builtin_plugins,
    call_detached,
    discover_entry_points,
    hook_names,
)
from .redact import MIN_SECRET, Redactor
from .sessions import SessionService
from .storage import DomainSpec, StorageService
from .storage.leases import Leases, LocalLeases, new_replica_id
from .validation import error_lines, join_errors

log = logging.getLogger(__name__)

HARNESS_VERSION = "0.1.0"

# What the harness offers plugins; a manifest requiring anything else cannot be enabled.
HOST_SERVICES = frozenset({"storage", "sessions", "agents", "llm", "web", "commands"})


def _register_into(table: dict[str, Any], kind: str) -> Callable[[str, Any], None]:
    def register(name: str, factory: Any) -> None:
        if name in table:
            raise PluginError(f"{kind} {name!r} is registered twice")
        table[name] = factory
    return register


class Harness:
    """Everything a run of ``dsh`` shares. Plugins receive it in their hooks."""

    def __init__(self, loaded: LoadedConfig, *, env: Mapping[str, str] | None = None,
                 load_entry_points: bool = True, plugins: Iterable[tuple[str, object]] = ()):
        self.loaded = loaded
        self.config = loaded.config
        self.home: Path = loaded.home
        env = os.environ if env is None else env
        self.env = env
        blocked = [*self.config.disable_plugins,
                   *env.get("DSH_DISABLE_PLUGINS", "").split(",")]
        self.plugins = PluginHost(blocked)
        for name, module in builtin_plugins():
            self.plugins.register(module, name, origin=BUILTIN, version=HARNESS_VERSION)
        self.discovered: list[Discovered] = discover_entry_points() if load_entry_points else []
        plugins = list(plugins)
        self._instances = self._resolve_instances({name for name, _ in plugins})
        for found in self.discovered:
            if found.name in self.enabled_plugin_names:
                self._check_services(found)
                self.plugins.register(found.module, found.name, origin=ENTRY_POINT,
                                      version=found.version, manifest=found.manifest)
        for name, plugin in plugins:
            self.plugins.register(plugin, name)
        self._instance_settings = self._validate_instance_configs()
        self._storage: StorageService | None = None
        self._sessions: SessionService | None = None
        self._redactor: Redactor | None = None
        self._llm: LLMService | None = None
        self._agents: AgentService | None = None
        self._leases: Leases | None = None
        # This process among the replicas that share a storage database (leases, status).
        self.replica_id = new_replica_id()
        # Set by ``dsh run --once``: plugins do one pass of their work inside dsh_startup.
        self.run_once = False
        # Per-harness objects of plugins (keyed by plugin name): plugin state lives with the
        # harness that runs it, never in module globals.
        self.plugin_state: dict[str, Any] = {}

    # -- plugin instances ---------------------------------------------------------------

    def _resolve_instances(self, registered: set[str]
                           ) -> dict[str, tuple[str, PluginInstanceConfig]]:
        """instance id -> (plugin name, block) for every enabled instance.

        Instances may name installed plugins or plugins handed to the constructor (tests).
        """
        by_name: dict[str, object] = {d.name: d for d in self.discovered}
        by_name.update({name: None for name in registered})
        by_default = {d.manifest.default_instance: d.name
                      for d in self.discovered if d.manifest and d.manifest.default_instance}
        out: dict[str, tuple[str, PluginInstanceConfig]] = {}
        problems = []
        for instance_id, block in self.config.plugins.items():
            if not block.enabled:
                continue
            plugin = block.plugin or by_default.get(instance_id) or instance_id
            if plugin not in by_name:
                problems.append(f"plugins.{instance_id}: no installed plugin named {plugin!r} "
                                f"(installed: {', '.join(sorted(by_name)) or 'none'})")
                continue
            if plugin in self.plugins.blocked:
                log.warning("plugins.%s: plugin %s is blocked; instance not started",
                            instance_id, plugin)
                continue
            out[instance_id] = (plugin, block)
        if problems:
            raise ConfigError(join_errors(self.loaded.source, problems))
        return out

    @property
    def enabled_plugin_names(self) -> set[str]:
        return {plugin for plugin, _ in self._instances.values()}

    def _check_services(self, found: Discovered) -> None:
        needed = set(found.manifest.services.required) if found.manifest else set()
        missing = sorted(needed - HOST_SERVICES)
        if missing:
            raise PluginError(f"plugin {found.name!r} needs host services this harness lacks: "
                              f"{', '.join(missing)}")

    def _validate_instance_configs(self) -> dict[str, Any]:
        models: dict[str, type[BaseModel]] = {}
        for result in self.plugins.call("dsh_plugin_config_models"):
            models.update(result)
        settings: dict[str, Any] = {}
        problems: list[str] = []
        for instance_id, (plugin, block) in self._instances.items():
            model = models.get(plugin)
            if model is None:
                settings[instance_id] = block.settings
                continue
            try:
                settings[instance_id] = model.model_validate(block.settings)
            except ValidationError as exc:
                problems += error_lines(exc, prefix=f"plugins.{instance_id}")
        if problems:
            raise ConfigError(join_errors(self.loaded.source, problems))
        return settings

    @property
    def instances(self) -> dict[str, str]:
        """Enabled plugin instances: instance id -> plugin name."""
        return {iid: plugin for iid, (plugin, _) in self._instances.items()}

    def plugin_instances(self, plugin: str) -> list[tuple[str, Any]]:
        """(instance id, validated config) of every enabled instance of ``plugin``."""
        return [(iid, self._instance_settings[iid])
                for iid, (name, _) in self._instances.items() if name == plugin]

    def plugin_listing(self) -> list[PluginInfo]:
        """Registered plugins plus installed-but-not-enabled ones (for ``dsh plugins``)."""
        infos = list(self.plugins.registered())
        seen = {i.name for i in infos}
        for found in self.discovered:
            if found.name in seen:
                continue
            info = PluginInfo(name=found.name, version=found.version, origin=ENTRY_POINT,
                              module=found.module.__name__, enabled=False,
                              manifest=found.manifest)
            try:
                info.hooks = hook_names(found.module)
            except Exception as exc:
                info.error = str(exc)
            infos.append(info)
        return infos

    def register_commands(self, cli: Any) -> None:
        """``dsh_register_commands`` of every plugin: registered ones, then installed ones
        without an enabled instance (their commands work without a config, e.g. a demo)."""
        self.plugins.call("dsh_register_commands", cli=cli)
        idle = [(found.name, found.module) for found in self.discovered
                if not self.plugins.is_registered(found.name)
                and found.name not in self.plugins.blocked]
        if idle:
            call_detached(idle, "dsh_register_commands", cli=cli)

    def secret_values(self) -> list[str]:
        """Every configured secret (provider keys, web token, SecretStr fields of plugin
        configs): what the web UI and logs must never show."""
        found: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, SecretStr):
                found.append(value.get_secret_value())
            elif isinstance(value, BaseModel):
                for name in type(value).model_fields:
                    walk(getattr(value, name))
            elif isinstance(value, dict):
                for v in value.values():
                    walk(v)
            elif isinstance(value, list | tuple):
                for v in value:
                    walk(v)
        walk(self.config)
        for settings in self._instance_settings.values():
            walk(settings)
        for provider in self.config.providers.values():
            if provider.api_key_env and self.env.get(provider.api_key_env):
                found.append(self.env[provider.api_key_env])
        # Short values would redact ordinary words; real secrets are long.
        return sorted({v for v in found if len(v) >= MIN_SECRET}, key=len, reverse=True)

    @property
    def redactor(self) -> Redactor:
        """Replaces every configured secret (and its encoded forms) with ``[REDACTED_SECRET]``;
        sessions apply it to all text they record, the web UI to all it shows."""
        if self._redactor is None:
            self._redactor = Redactor(self.secret_values())
        return self._redactor

    # -- storage --------------------------------------------------------------------------

    def domain_specs(self) -> dict[str, DomainSpec]:
        specs: dict[str, DomainSpec] = {}
        for result in self.plugins.call("dsh_storage_domains"):
            for spec in result if isinstance(result, list | tuple) else [result]:
                if not isinstance(spec, DomainSpec):
                    raise PluginError(f"dsh_storage_domains returned {type(spec).__name__}, "
                                      "expected DomainSpec")
                if spec.name in specs:
                    raise StorageError(f"storage domain {spec.name!r} is declared twice")
                specs[spec.name] = spec
        return specs

    @property
    def storage(self) -> StorageService:
        if self._storage is None:
            factories: dict[str, Any] = {}
            self.plugins.call("dsh_register_storage_backends",
                              register=_register_into(factories, "storage backend"),
                              config=self.config)
            self._storage = StorageService(self.home / "storage", self.config.storage.backend,
                                           self.config.storage.routes, factories,
                                           self.domain_specs(),
                                           backups_keep=self.config.storage.backups_keep)
        return self._storage

    @property
    def leases(self) -> Leases:
        """Named leases with fencing tokens on the default storage backend: shared by every
        replica when the backend is (postgres), within this process otherwise."""
        if self._leases is None:
            backend = self.storage.backend(self.config.storage.backend)
            self._leases = backend.leases(self.replica_id) or LocalLeases(self.replica_id)
            self._leases.ttl_s = self.config.storage.lease_ttl_s
        return self._leases

    # -- sessions, models, agents -------------------------------------------------------------

    def session_store_factories(self) -> dict[str, Any]:
        """Every registered session store by name: ``factory(home)`` makes one (for copies
        between stores; ``sessions`` opens the configured one)."""
        stores: dict[str, Any] = {}
        self.plugins.call("dsh_register_session_stores",
                          register=_register_into(stores, "session store"), config=self.config)
        return stores

    @property
    def sessions(self) -> SessionService:
        if self._sessions is None:
            stores = self.session_store_factories()
            name = self.config.sessions.store
            if name not in stores:
                raise ConfigError(f"{self.loaded.source}: sessions.store: unknown session store "
                                  f"{name!r} (available: {', '.join(sorted(stores))})")
            self._sessions = SessionService(stores[name](self.home), self.redactor)
        return self._sessions

    @property
    def llm(self) -> LLMService:
        if self._llm is None:
            kinds: dict[str, Any] = {}
            self.plugins.call("dsh_register_llm_providers",
                              register=_register_into(kinds, "LLM provider kind"))
            self._llm = LLMService(self.config, kinds)
        return self._llm

    @property
    def agents(self) -> AgentService:
        if self._agents is None:
            self._agents = AgentService(self)
        return self._agents

    # -- validation ---------------------------------------------------------------------------

    def problems(self) -> list[str]:
        """Everything ``dsh run`` would reject, as ``field path: message`` lines: the harness's
        own checks, then every enabled plugin's ``dsh_validate``."""
        cfg, found = self.config, []
        provider = cfg.default_model.split("/", 1)[0]
        if provider not in cfg.providers:
            found.append(f"default_model: provider {provider!r} is not defined under [providers] "
                         f"(defined: {', '.join(sorted(cfg.providers))}, built-in ones "
                         "included)")
        # Building each service resolves the names the config uses (backends, store, kinds).
        for touch in (lambda: self.storage, lambda: self.sessions, lambda: self.llm):
            try:
                touch()
            except DshError as exc:
                found.append(str(exc).removeprefix(f"{self.loaded.source}: "))
        if cfg.web.enabled:
            from .web.auth import required_token  # the web stack loads only when it is used

            token = cfg.web.auth_token.get_secret_value() if cfg.web.auth_token else None
            try:
                required_token(cfg.web.host, token)
            except DshError as exc:
                found.append(str(exc))
        for result in self.plugins.call("dsh_validate", harness=self):
            found.extend(str(line) for line in result or [])
        return found

    def validate(self) -> None:
        """Raise one ``ConfigError`` listing every problem (``dsh config check``, ``dsh run``)."""
        problems = self.problems()
        if problems:
            raise ConfigError(join_errors(self.loaded.source, problems))

    # -- lifecycle --------------------------------------------------------------------------

    async def startup(self) -> list[str]:
        """Validate, then run every plugin's ``dsh_startup``; on failure, shut down what
        started. Returns what the plugins reported as failed (with ``run_once``: the pass)."""
        self.validate()
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            results = await self.plugins.acall("dsh_startup", harness=self)
        except BaseException:
            await self.shutdown()
            raise
        return [str(item) for result in results
                for item in (result if isinstance(result, list | tuple) else [result])]

    async def shutdown(self) -> None:
        await self.plugins.acall_all("dsh_shutdown", harness=self)
        await self.close()

    async def close(self) -> None:
        if self._agents is not None:
            await self._agents.close()
        if self._sessions is not None:
            await self._sessions.close()
        if self._llm is not None:
            await self._llm.close()
        if self._leases is not None:
            await self._leases.close()
            self._leases = None
        if self._storage is not None:
            await self._storage.close()
