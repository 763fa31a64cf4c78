"""``[plugins.github-reviewer.webhook]``: the receiver's listener, its secret, reconciliation.

The secret may also be set per account (``accounts[i].webhook_secret``) when accounts are
separate GitHub Apps or repositories with hooks of their own; the delivery's installation or
repository then picks the account, and only that account's secret is accepted for it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from dsh_harness import ConfigBool

DEFAULT_PATH = "/github/webhook"
DEFAULT_PORT = 8766


class WebhookSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: ConfigBool = False
    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    path: str = DEFAULT_PATH
    secret: SecretStr | None = None
    reconcile_interval_s: float = Field(default=900.0, ge=1)

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v.strip()

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        v = v.strip()
        if not v.startswith("/") or any(c.isspace() for c in v) or "?" in v or "#" in v:
            raise ValueError("must be a URL path starting with /, e.g. /github/webhook")
        return v.rstrip("/") or "/"

    @field_validator("secret")
    @classmethod
    def _secret(cls, v: SecretStr | None) -> SecretStr | None:
        return optional_secret(v)


def optional_secret(v: SecretStr | None) -> SecretStr | None:
    """An empty value (``"${WEBHOOK_SECRET:-}"`` with the variable unset) means none."""
    if v is None or not v.get_secret_value().strip():
        return None
    return SecretStr(v.get_secret_value().strip())
