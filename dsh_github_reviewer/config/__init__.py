"""The plugin's config block: accounts, review limits, the MCP server process.

Every key, default and rule is documented in ``docs/config.en.md`` (``docs/config.md``).

Errors name the exact field path (the harness prefixes ``plugins.<instance>``) and never echo a
value, because values may be tokens.

May import ``core`` only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from dsh_harness import ConfigBool, DshError

from ..core.globs import GlobError, check_glob, split_top
from ..core.session_key import PERSONA_RE, sanitize_account_name
from ..core.severity import Severity
from .webhook import WebhookSettings, optional_secret

REPO_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]*)/[A-Za-z0-9._-]+$")
LOGIN_GLOB_RE = re.compile(r"^[A-Za-z0-9*?\[\]_.-]+$")
# Classic, fine-grained, and the OAuth token `gh auth token` prints.
PAT_PREFIXES = ("ghp_", "github_pat_", "gho_")
DEFAULT_ASSOCIATIONS = ["OWNER", "MEMBER", "COLLABORATOR"]
DEFAULT_MCP_ARGS = ["stdio", "--toolsets=pull_requests,repos"]


class SetupError(DshError):
    """What stops the reviewer's work that the operator fixes (dsh.toml, the environment, the
    trusted instructions); the message names the field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _repo(value: str) -> str:
    value = value.strip()
    if not REPO_RE.match(value) or value.endswith((".git", "/.", "/..")):
        raise ValueError("must be owner/repo")
    return value


def _login_glob(value: str) -> str:
    value = value.strip()
    if not value or not LOGIN_GLOB_RE.match(value):
        raise ValueError("must be a GitHub login or a glob such as *[bot]")
    return value


def _http_url(value: str) -> str:
    value = value.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+(/\S*)?$", value):
        raise ValueError("must be an http(s) URL")
    return value


RepoName = Annotated[str, AfterValidator(_repo)]
LoginGlob = Annotated[str, AfterValidator(_login_glob)]


def _split_words(value: object) -> object:
    """A list given as one string ("${GITHUB_REPOSITORIES}" interpolates to one): "a/b, c/d"."""
    if isinstance(value, str):
        # Commas inside braces belong to a glob's alternatives ("*.{ts,tsx}"), not the list.
        return [item for part in split_top(value) for item in part.split() if item]
    return value


def _trimmed(value: str) -> str:
    # A padded name would only fail at the first review, when the provider does not list it.
    value = value.strip()
    if not value:
        raise ValueError("must not be empty")
    return value


Trimmed = Annotated[str, AfterValidator(_trimmed)]


class ModelCandidate(Strict):
    provider: Trimmed
    model: Trimmed

    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.model}"


class TeamSettings(Strict):
    """``review.team``: a team of reviewer personas and a coordinator instead of one reviewer."""

    # Empty = no team (the single reviewer). Built-ins: quality, security, performance; other
    # names need a "## Persona: <name>" section in the trusted instructions file.
    personas: list[str] = Field(default_factory=list)
    max_parallel: int = Field(default=3, ge=1, le=32)
    persona_timeout_s: float = Field(default=600.0, gt=0, le=86_400)
    attempts_per_model: int = Field(default=2, ge=1, le=10)

    _split = field_validator("personas", mode="before")(_split_words)

    @field_validator("personas")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for name in v:
            name = name.strip().lower()
            if not PERSONA_RE.match(name):
                raise ValueError(f"persona names must match {PERSONA_RE.pattern}")
            if name == "coordinator":
                raise ValueError("coordinator is always part of a team; do not list it")
            if name not in out:
                out.append(name)
        return out

    @property
    def enabled(self) -> bool:
        return bool(self.personas)


class ReviewSettings(Strict):
    # A turn's two budgets, kept apart so a model that reads a lot can still post inline:
    # reads (pull_request_read, get_file_contents) and inline findings. max_tool_calls is the
    # older name of the read budget (used when max_read_calls is not set).
    max_tool_calls: int = Field(default=30, ge=1, le=1000)
    max_read_calls: int | None = Field(default=None, ge=1, le=1000)
    # Findings past it are still accepted and listed in the review body, never dropped.
    max_comment_calls: int = Field(default=50, ge=1, le=1000)
    tool_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    tool_result_limit: int = Field(default=60_000, ge=1_000, le=10_000_000)
    turn_timeout_s: float = Field(default=900.0, gt=0, le=86_400)
    default_instructions: str = ""
    # true: a repository without an instructions file (and no default_instructions) is not
    # reviewed (missing_instructions); false: it is reviewed with the built-in guidance.
    require_instructions: ConfigBool = False
    # One living summary comment per PR (walkthrough, findings and their status, cost),
    # edited in place after every review; false = reviews only.
    summary: ConfigBool = True
    # Also read AGENTS.md and .github/copilot-instructions.md from the base as trusted
    # guidance (each capped).
    conventional_guidelines: ConfigBool = True
    command_author_associations: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ASSOCIATIONS))
    models: list[ModelCandidate] = Field(default_factory=list)
    max_reviews_per_pr: int = Field(default=0, ge=0)
    # Inline findings: those below min_severity, and those past max_findings (0 = no cap; the
    # most severe stay inline), are listed in the review body instead — never dropped.
    min_severity: Severity = "nit"
    max_findings: int = Field(default=0, ge=0, le=1000)
    # The second look: before a review is posted, a verifier session checks each drafted
    # finding against the code (keep / drop / lower severity); dropped ones are listed in the
    # summary comment. Off until the eval shows it pays (``eval --verify off,on``).
    verify: ConfigBool = False
    # The prepared diff in the review turn: globs left out of it, on top of the
    # built-in lockfile/generated list unless exclude_builtin is false; and its byte budget.
    exclude: list[str] = Field(default_factory=list)
    exclude_builtin: ConfigBool = True
    max_diff_kb: int = Field(default=100, ge=1, le=10_000)
    team: TeamSettings = TeamSettings()

    # One string (the CI action's input) is split at commas and whitespace.
    _split = field_validator("exclude", mode="before")(_split_words)

    @field_validator("exclude")
    @classmethod
    def _globs(cls, v: list[str]) -> list[str]:
        out = []
        for item in v:
            item = item.strip()
            if not item or "\x00" in item:
                raise ValueError("entries must be non-empty path globs such as *.lock or "
                                 "vendor/*")
            try:
                check_glob(item)
            except GlobError as exc:
                raise ValueError(f"{exc} (braces list alternatives, e.g. *.{{ts,tsx}})"
                                 ) from None
            if item not in out:
                out.append(item)
        return out
    # Failed attempts at one head (or one /bot) before the bot gives up visibly.
    max_attempts: int = Field(default=5, ge=1, le=100)

    @property
    def read_calls(self) -> int:
        """The read budget per turn: max_read_calls, else max_tool_calls."""
        return self.max_read_calls if self.max_read_calls is not None else self.max_tool_calls

    @field_validator("command_author_associations")
    @classmethod
    def _upper(cls, v: list[str]) -> list[str]:
        out = []
        for item in v:
            item = item.strip().upper()
            if not item or not re.match(r"^(\*|[A-Z_]+)$", item):
                raise ValueError("entries must be GitHub author associations (e.g. MEMBER) or *")
            if item not in out:
                out.append(item)
        return out


class McpSettings(Strict):
    # None = the github-mcp-server binary installed with this package.
    command: str | None = None
    args: list[str] = Field(default_factory=lambda: list(DEFAULT_MCP_ARGS))
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None

    @field_validator("env")
    @classmethod
    def _no_token_override(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if key in ("GITHUB_PERSONAL_ACCESS_TOKEN", "GITHUB_HOST"):
                raise ValueError(f"{key} is set by the reviewer for each turn; remove it")
        return v


class AccountConfig(Strict):
    name: str = "default"
    personal_access_token: SecretStr | None = None
    app_id: int | None = Field(default=None, ge=1)
    installation_id: int | None = Field(default=None, ge=1)
    private_key_path: Path | None = None
    api_url: str = "https://api.github.com"
    web_url: str = "https://github.com"
    poll_interval_s: float = Field(default=120.0, ge=1)
    repositories: list[RepoName] = Field(default_factory=list)
    ignore_authors: list[LoginGlob] = Field(default_factory=list)
    # Review turns of this account at once (and as many /bot chats, in their own pool).
    max_concurrent_reviews: int = Field(default=4, ge=1, le=256)
    review: ReviewSettings = ReviewSettings()
    mcp: McpSettings = McpSettings()
    # This account's webhook secret when it differs from webhook.secret (separate Apps/hooks).
    webhook_secret: SecretStr | None = None

    @field_validator("webhook_secret")
    @classmethod
    def _webhook_secret(cls, v: SecretStr | None) -> SecretStr | None:
        return optional_secret(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v.strip()

    @field_validator("personal_access_token")
    @classmethod
    def _pat(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None or not v.get_secret_value().strip():
            return None  # "${GITHUB_TOKEN:-}" with the variable unset
        token = v.get_secret_value().strip()
        if not token.startswith(PAT_PREFIXES):
            raise ValueError("must be a classic (ghp_...), fine-grained (github_pat_...) or "
                             "OAuth (gho_..., from `gh auth token`) GitHub token")
        return SecretStr(token)

    @field_validator("api_url")
    @classmethod
    def _api(cls, v: str) -> str:
        return _http_url(v)

    @field_validator("web_url")
    @classmethod
    def _web(cls, v: str) -> str:
        return _http_url(v) if v.strip() else ""

    _split = field_validator("repositories", "ignore_authors", mode="before")(_split_words)

    @field_validator("repositories")
    @classmethod
    def _dedupe(cls, v: list[str]) -> list[str]:
        seen, out = set(), []
        for repo in v:
            if repo.lower() not in seen:
                seen.add(repo.lower())
                out.append(repo)
        return out

    @model_validator(mode="after")
    def _credentials(self) -> AccountConfig:
        app = [self.app_id, self.installation_id, self.private_key_path]
        if self.personal_access_token is not None and any(f is not None for f in app):
            raise ValueError("personal_access_token and app_id/installation_id/private_key_path "
                             "are mutually exclusive; configure one mode")
        if any(f is not None for f in app) and not all(f is not None for f in app):
            missing = [n for n, f in zip(("app_id", "installation_id", "private_key_path"), app,
                                         strict=True) if f is None]
            raise ValueError(f"GitHub App mode needs app_id, installation_id and "
                             f"private_key_path; missing: {', '.join(missing)}")
        return self

    @property
    def app_mode(self) -> bool:
        return self.app_id is not None

    @property
    def has_credentials(self) -> bool:
        return self.app_mode or self.personal_access_token is not None

    @property
    def key(self) -> str:
        """The sanitized name: the key of its work records and a session-id segment."""
        return sanitize_account_name(self.name)


class ReviewerConfig(Strict):
    accounts: list[AccountConfig] = Field(default_factory=lambda: [AccountConfig()])
    webhook: WebhookSettings = WebhookSettings()

    def tick_interval_s(self, account: AccountConfig) -> float:
        """Seconds between the account's polls: ``poll_interval_s``, or
        ``webhook.reconcile_interval_s`` when deliveries trigger the work and polling only
        reconciles."""
        return (self.webhook.reconcile_interval_s if self.webhook.enabled
                else account.poll_interval_s)

    def webhook_secret(self, account: AccountConfig) -> SecretStr | None:
        return account.webhook_secret or self.webhook.secret

    @model_validator(mode="after")
    def _webhook_secrets(self) -> ReviewerConfig:
        if not self.webhook.enabled:
            return self
        for i, account in enumerate(self.accounts):
            if self.webhook_secret(account) is None:
                raise ValueError(f"webhook.secret: required when webhook.enabled (or set "
                                 f"accounts[{i}].webhook_secret); deliveries are only "
                                 "accepted when signed")
        return self
    # Review turns of all accounts at once, process-wide.
    max_concurrent_turns: int = Field(default=16, ge=1, le=1024)

    @model_validator(mode="after")
    def _unique_names(self) -> ReviewerConfig:
        seen: dict[str, int] = {}
        for i, account in enumerate(self.accounts):
            if account.key in seen:
                raise ValueError(f"accounts[{i}].name: {account.name!r} collides with "
                                 f"accounts[{seen[account.key]}].name once sanitized "
                                 f"({account.key!r}); account names must stay distinct")
            seen[account.key] = i
        return self
