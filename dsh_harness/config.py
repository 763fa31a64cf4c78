"""The deployment config: one TOML file (``dsh.toml``) read into pydantic models.

Unknown keys are errors, every error names the file and the field path, and ``${VAR}`` /
``${VAR:-default}`` are interpolated from the environment so secrets stay out of the file.
Plugin instance blocks are kept as raw mappings here; each plugin's own model validates them
(``dsh_plugin_config_models``), with errors reported under ``plugins.<instance>``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import ConfigError
from .provider_presets import PRESETS, with_preset
from .validation import error_lines, format_loc, join_errors

DEFAULT_CONFIG_PATH = Path("dsh.toml")
_INTERPOLATION = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _strict_bool(value: Any) -> bool:
    # pydantic's bool takes "yes", "on", 1 ...: a typo'd `enabled = "yse"` must be an error, not
    # a guess. A string is accepted only as exactly "true"/"false" (what `${VAR}` yields).
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    # The value is not echoed: config errors never show values (they may be tokens).
    raise ValueError("must be true or false (a TOML boolean; yes/no, on/off, 1/0 are refused)")


# A config boolean: TOML true/false (or the strings "true"/"false" from ${VAR}), nothing else.
ConfigBool = Annotated[bool, BeforeValidator(_strict_bool)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_dsn(v: SecretStr | None) -> SecretStr | None:
    if v is not None and not v.get_secret_value().strip():
        raise ValueError("is empty (a libpq URL, e.g. postgresql://user@host:5432/dsh)")
    return v


class StorageConfig(StrictModel):
    backend: str = "sqlite"
    routes: dict[str, str] = Field(default_factory=dict)
    # Backups ``dsh storage copy --force`` keeps per domain and backend (older ones are deleted).
    backups_keep: int = Field(default=5, ge=1)
    # The PostgreSQL database of the ``postgres`` backend (a libpq URL or key=value string).
    dsn: SecretStr | None = None
    # How long a lease (storage/leases.py) lasts without renewal: how soon another replica
    # takes over the work of one that died.
    lease_ttl_s: float = Field(default=60.0, ge=1.0, le=3600.0)

    _dsn = field_validator("dsn")(_check_dsn)

    @model_validator(mode="after")
    def _postgres_needs_dsn(self) -> StorageConfig:
        users = ["backend"] * (self.backend == "postgres") + [
            f"routes.{d}" for d, b in self.routes.items() if b == "postgres"]
        if users and self.dsn is None:
            raise ValueError(f"{users[0]} is \"postgres\" but dsn is not set "
                             '(e.g. dsn = "${DSH_DATABASE_URL}")')
        return self


class SessionsConfig(StrictModel):
    store: str = "jsonl"
    # The ``postgres`` store's database; storage.dsn when not given.
    dsn: SecretStr | None = None

    _dsn = field_validator("dsn")(_check_dsn)


class ModelSpec(StrictModel):
    """Prices in USD per 1M tokens and the context window; defaults follow DeepSeek's list."""

    context_window: int = Field(default=1_000_000, ge=1)
    input: float = Field(default=0.14, ge=0)
    cache_read: float = Field(default=0.0028, ge=0)
    output: float = Field(default=0.28, ge=0)


_USAGE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class ProviderConfig(StrictModel):
    # A built-in provider this block starts from (provider_presets.PRESETS); implied when the
    # block's name is a preset's. Keys set here override the preset's.
    preset: str | None = None
    kind: str = "openai"
    # Required unless a preset gives it.
    base_url: str | None = None
    # Unset = no key variable: a provider never reads another provider's key (each preset
    # names its own, e.g. DEEPSEEK_API_KEY, OPENAI_API_KEY).
    api_key_env: str | None = None
    api_key: SecretStr | None = None
    # False for local servers (Ollama, vLLM) that take requests without a key.
    api_key_required: ConfigBool = True
    # Where the usage reports prompt-cache hits (a dotted path); unset = DeepSeek's
    # prompt_cache_hit_tokens, else OpenAI's prompt_tokens_details.cached_tokens.
    cache_hit_usage: str | None = None
    # Where the usage reports the billed cost in USD (OpenRouter: "cost"); when present it is
    # the turn's cost, instead of tokens times the models table's prices.
    cost_usage: str | None = None
    timeout_s: float = Field(default=300.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    # First backoff step; doubles per attempt (with jitter) unless the server sends Retry-After.
    retry_base_s: float = Field(default=1.0, ge=0)
    # Upper bound on one wait a server's Retry-After may ask for (a turn has a deadline).
    retry_after_max_s: float = Field(default=60.0, ge=0)
    # Which reasoning_content to send back: "all" keeps requests prefix-stable across turns.
    reasoning_replay: Literal["all", "current_turn", "none"] = "all"
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    # Prices and context window of models missing from ``models`` (local servers: free).
    unlisted_model: ModelSpec | None = None

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError("must be an http(s) URL")
        return v.rstrip("/")

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str | None) -> str | None:
        if v is not None and v not in PRESETS:
            raise ValueError(f"unknown preset {v!r} (presets: {', '.join(sorted(PRESETS))})")
        return v

    @field_validator("cache_hit_usage", "cost_usage")
    @classmethod
    def _usage_path(cls, v: str | None) -> str | None:
        if v is not None and not _USAGE_PATH.match(v):
            raise ValueError("must be a dotted field path, e.g. "
                             "prompt_tokens_details.cached_tokens")
        return v

    @model_validator(mode="after")
    def _has_endpoint(self) -> ProviderConfig:
        if self.base_url is None:
            raise ValueError("base_url is required for a provider that is no preset (presets: "
                             f"{', '.join(sorted(PRESETS))}; or set preset = \"<name>\")")
        return self

    @property
    def url(self) -> str:
        assert self.base_url is not None  # checked at validation
        return self.base_url


def _default_providers() -> dict[str, ProviderConfig]:
    return {name: ProviderConfig.model_validate(with_preset(name, {})) for name in PRESETS}


class CompactionConfig(StrictModel):
    # Fraction of the model's context window a prompt may reach before old turns are summarized.
    threshold: float = Field(default=0.8, gt=0, le=1)
    # Absolute cap on prompt tokens per session (bounds cost); 0 = only the threshold applies.
    max_prompt_tokens: int = Field(default=0, ge=0)
    keep_recent_turns: int = Field(default=2, ge=1)
    # A compaction leaves the prompt at most this fraction of the budget, so the runs that
    # follow append to one stable prefix instead of compacting again each time: the oldest
    # turns are summarized until it fits, the newest ones too when keeping them would not.
    target: float = Field(default=0.5, gt=0, le=1)


class WebConfig(StrictModel):
    enabled: ConfigBool = False
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    auth_token: SecretStr | None = None
    # Host names (besides loopback names and the bind address) the UI answers to; anything
    # else is refused, which defeats DNS rebinding.
    allowed_hosts: list[str] = Field(default_factory=list)
    # Reverse proxies (IP addresses or networks) whose X-Forwarded-For / X-Forwarded-Proto are
    # believed; empty = none, a proxy on loopback included: otherwise any local process (or a
    # request relayed by one) could name any client address and escape the sign-in rate limit.
    trusted_proxies: list[str] = Field(default_factory=list)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        out = []
        for item in v:
            try:
                out.append(str(ipaddress.ip_network(item.strip(), strict=False)))
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or network such as "
                                 "10.0.0.5 or 10.0.0.0/24") from None
        return out


class PluginInstanceConfig(BaseModel):
    """``[plugins.<instance id>]``: which plugin, whether enabled, and its config keys."""

    model_config = ConfigDict(extra="allow", frozen=True)

    plugin: str | None = None
    enabled: ConfigBool = True

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class DeploymentConfig(StrictModel):
    home: Path = Path(".dsh")
    default_model: str = "deepseek/deepseek-v4-flash"
    disable_plugins: list[str] = Field(default_factory=list)
    storage: StorageConfig = StorageConfig()
    sessions: SessionsConfig = SessionsConfig()
    providers: dict[str, ProviderConfig] = Field(default_factory=_default_providers)
    compaction: CompactionConfig = CompactionConfig()
    web: WebConfig = WebConfig()
    plugins: dict[str, PluginInstanceConfig] = Field(default_factory=dict)

    @field_validator("default_model")
    @classmethod
    def _provider_model(cls, v: str) -> str:
        if v.count("/") < 1 or v.startswith("/") or v.endswith("/"):
            raise ValueError("must be <provider>/<model>, e.g. deepseek/deepseek-v4-flash")
        return v

    @field_validator("providers", mode="before")
    @classmethod
    def _presets(cls, v: Any) -> Any:
        """Blocks named like a preset (or naming one) start from it; presets not defined here
        stay available: defining a provider never removes the built-in ones."""
        if not isinstance(v, dict):
            return v
        out = {name: with_preset(name, raw) if isinstance(raw, dict) else raw
               for name, raw in v.items()}
        for name in PRESETS:
            out.setdefault(name, with_preset(name, {}))
        return out

    @model_validator(mode="after")
    def _sessions_dsn(self) -> DeploymentConfig:
        if (self.sessions.store == "postgres" and self.sessions.dsn is None
                and self.storage.dsn is None):
            raise ValueError('sessions.store is "postgres" but neither sessions.dsn nor '
                             'storage.dsn is set (e.g. dsn = "${DSH_DATABASE_URL}" under '
                             "[storage])")
        return self

    @field_validator("plugins")
    @classmethod
    def _instance_ids(cls, v: dict[str, PluginInstanceConfig]) -> dict[str, PluginInstanceConfig]:
        for key in v:
            if not _NAME.match(key):
                raise ValueError(f"instance id {key!r} may only use letters, digits, _ . -")
        return v


class LoadedConfig(BaseModel):
    """A validated config plus where it came from (for messages and relative paths)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    source: str
    base_dir: Path
    config: DeploymentConfig
    # False when no config file was found and the defaults stand in (commands that act on a
    # deployment refuse to run then, naming ``looked_for``).
    found: bool = True
    looked_for: Path | None = None

    def resolve(self, path: Path) -> Path:
        """``path`` with ``~`` expanded, relative to the config file's directory."""
        path = path.expanduser()
        return path if path.is_absolute() else (self.base_dir / path).resolve()

    def missing_message(self, command: str) -> str:
        where = (self.looked_for or DEFAULT_CONFIG_PATH).expanduser()
        where = where if where.is_absolute() else Path.cwd() / where
        return (f"{command} needs a config file and none was found at {where} "
                "(pass --config PATH, or run `dsh init` to write a commented one there)")

    @property
    def home(self) -> Path:
        return self.resolve(self.config.home)


def interpolate(value: Any, env: Mapping[str, str], path: tuple[int | str, ...] = ()) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string; ``$$`` is a literal ``$``."""
    if isinstance(value, str):
        def repl(m: re.Match[str]) -> str:
            if m.group(0) == "$$":
                return "$"
            name, default = m.group(1), m.group(2)
            if name in env and env[name] != "":
                return env[name]
            if default is not None:
                return default
            raise ConfigError(
                f"{format_loc(path)}: environment variable {name} is not set "
                f"(write ${{{name}:-default}} to make it optional)"
            )
        return _INTERPOLATION.sub(repl, value)
    if isinstance(value, dict):
        return {k: interpolate(v, env, (*path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, (*path, i)) for i, v in enumerate(value)]
    return value


def parse_config(text: str, source: str, base_dir: Path,
                 env: Mapping[str, str] | None = None) -> LoadedConfig:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    try:
        raw = interpolate(raw, os.environ if env is None else env)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    try:
        config = DeploymentConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(join_errors(source, error_lines(exc))) from None
    return LoadedConfig(source=source, base_dir=base_dir, config=config)


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Read ``path`` (default ``./dsh.toml``). A missing default file yields the defaults."""
    explicit = path is not None
    path = path or DEFAULT_CONFIG_PATH
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{path}: config file not found (`dsh --config {path} init` "
                              "writes a commented one)") from None
        return LoadedConfig(source="(defaults)", base_dir=Path.cwd(), config=DeploymentConfig(),
                            found=False, looked_for=path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    return parse_config(text, str(path), path.resolve().parent, env)
