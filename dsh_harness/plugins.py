"""The plugin host: one pluggy manager owned by one ``Harness``, never a module global.

It registers the built-in plugins (``dsh_harness.default_plugins``) through the same hooks
third-party plugins use, discovers installed plugins through the ``dsh`` entry-point group and
their ``plugin.toml`` manifests, honours a block-list, and calls hooks whose implementations may
be sync or async.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata, resources
from types import ModuleType
from typing import Any

import pluggy
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import hookspecs
from .errors import PluginError
from .validation import error_lines

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "dsh"
BUILTIN = "built-in"
ENTRY_POINT = "entry point"
REGISTERED = "registered"


class ManifestServices(BaseModel):
    model_config = ConfigDict(extra="forbid")
    required: list[str] = Field(default_factory=list)
    optional: list[str] = Field(default_factory=list)


class Manifest(BaseModel):
    """A plugin's ``plugin.toml``."""

    model_config = ConfigDict(extra="forbid")
    name: str
    module: str
    description: str = ""
    default_instance: str | None = None
    # A commented deployment config for this plugin, shipped inside its package: what
    # ``dsh init`` writes (so an installed wheel needs no source checkout to start from).
    example_config: str | None = None
    services: ManifestServices = ManifestServices()


@dataclass
class PluginInfo:
    name: str
    version: str
    origin: str
    module: str
    hooks: list[str] = field(default_factory=list)
    enabled: bool = True
    manifest: Manifest | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "origin": self.origin,
                "module": self.module, "hooks": self.hooks, "enabled": self.enabled,
                "default_instance": self.manifest.default_instance if self.manifest else None,
                "error": self.error}


def read_manifest(module_name: str) -> Manifest | None:
    """The ``plugin.toml`` shipped in the top-level package of ``module_name``, if any."""
    package = module_name.split(".")[0]
    try:
        text = (resources.files(package) / "plugin.toml").read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError):
        return None
    try:
        return Manifest.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise PluginError(f"{package}/plugin.toml: not valid TOML: {exc}") from None
    except ValidationError as exc:
        raise PluginError(f"{package}/plugin.toml: " + "; ".join(error_lines(exc))) from None


@dataclass
class Discovered:
    """An installed plugin found through the entry-point group, not yet registered."""

    name: str
    version: str
    module: ModuleType
    manifest: Manifest | None


def discover_entry_points() -> list[Discovered]:
    found = []
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            module = ep.load()
        except Exception as exc:
            raise PluginError(f"entry point {ep.name!r} ({ep.value}) failed to import: "
                              f"{type(exc).__name__}: {exc}") from exc
        manifest = read_manifest(module.__name__)
        name = manifest.name if manifest else ep.name
        version = ep.dist.version if ep.dist else "unknown"
        found.append(Discovered(name=name, version=version, module=module, manifest=manifest))
    return found


def call_detached(plugins: Iterable[tuple[str, object]], hook: str, **kwargs: Any) -> list[Any]:
    """Call a sync hook of plugins that are installed but not registered with the harness
    (no enabled instance), in a scratch manager, so e.g. their CLI commands exist anyway."""
    scratch = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    scratch.add_hookspecs(hookspecs)
    for name, plugin in plugins:
        try:
            scratch.register(plugin, name=name)
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"plugin {name!r} does not fit the hook contract: {exc}") from None
    return getattr(scratch.hook, hook)(**kwargs)


def hook_names(plugin: object) -> list[str]:
    """The hooks ``plugin`` implements, as pluggy would see them."""
    scratch = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    scratch.add_hookspecs(hookspecs)
    scratch.register(plugin)
    return hook_names_registered(scratch, plugin)


class PluginHost:
    """Owns the harness's pluggy manager and knows where each plugin came from."""

    def __init__(self, blocked: Iterable[str] = ()):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.blocked = {b.strip() for b in blocked if b.strip()}
        self._info: dict[str, PluginInfo] = {}

    @property
    def hook(self) -> Any:
        return self.pm.hook

    def register(self, plugin: object, name: str, *, origin: str = REGISTERED,
                 version: str = "", manifest: Manifest | None = None) -> bool:
        """Register ``plugin`` under ``name`` unless blocked; returns whether it was."""
        if name in self.blocked:
            log.info("plugin %s is blocked; not registered", name)
            return False
        if self.pm.has_plugin(name):
            raise PluginError(f"plugin {name!r} is registered twice")
        try:
            self.pm.register(plugin, name=name)
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"plugin {name!r} does not fit the hook contract: {exc}") from None
        module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
        self._info[name] = PluginInfo(name=name, version=version, origin=origin, module=module,
                                      hooks=hook_names_registered(self.pm, plugin),
                                      manifest=manifest)
        return True

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self._info.pop(name, None)

    def registered(self) -> list[PluginInfo]:
        return list(self._info.values())

    def is_registered(self, name: str) -> bool:
        return self.pm.has_plugin(name)

    def call(self, hook: str, **kwargs: Any) -> list[Any]:
        """Call a sync-only hook (registrations): results of every implementation."""
        results = getattr(self.pm.hook, hook)(**kwargs)
        for r in results:
            if inspect.iscoroutine(r):
                r.close()
                raise PluginError(f"{hook} must not be async (it registers things)")
        return results

    def _calls(self, hook: str, kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
        """Each implementation, in pluggy's call order, as (plugin name, zero-arg call)."""
        for impl in reversed(getattr(self.pm.hook, hook).get_hookimpls()):
            args = [kwargs[a] for a in impl.argnames]
            yield impl.plugin_name, (lambda f=impl.function, a=args: f(*a))

    @staticmethod
    async def _result(call: Any) -> Any:
        res = call()
        return await res if inspect.isawaitable(res) else res

    async def acall(self, hook: str, **kwargs: Any) -> list[Any]:
        """Call every implementation, awaiting those that are coroutines; ``None``s dropped."""
        out = []
        for _, call in self._calls(hook, kwargs):
            res = await self._result(call)
            if res is not None:
                out.append(res)
        return out

    async def acall_all(self, hook: str, **kwargs: Any) -> list[BaseException]:
        """Call every implementation even if some raise (shutdown); returns the errors."""
        errors: list[BaseException] = []
        for name, call in self._calls(hook, kwargs):
            try:
                await self._result(call)
            except Exception as exc:
                log.exception("%s of plugin %s failed", hook, name)
                errors.append(exc)
        return errors

    async def afirst(self, hook: str, **kwargs: Any) -> Any:
        """First non-``None`` result, awaiting async implementations in call order."""
        for _, call in self._calls(hook, kwargs):
            res = await self._result(call)
            if res is not None:
                return res
        return None


def hook_names_registered(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    return sorted(h.name for h in pm.get_hookcallers(plugin) or [])


def builtin_plugins() -> list[tuple[str, ModuleType]]:
    """The harness's own plugins, in registration order."""
    from .default_plugins import DEFAULT_PLUGINS

    return [(name, importlib.import_module(mod)) for name, mod in DEFAULT_PLUGINS]
