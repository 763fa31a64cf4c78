"""What the running bot was started with, per account, so ``status`` can show it.

``status`` runs in the operator's shell, whose environment (``GITHUB_TOKEN``,
``GITHUB_REPOSITORIES``…) is often not the service's. So ``dsh run`` records each account's
config summary at start (never a secret: only whether credentials are set) in a storage domain
of its own, ``dsh_github_reviewer_run``; ``status`` shows that view and marks the fields where
the shell's reading of the same config differs.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from dsh_harness import Domain, DomainSpec, __version__

from ..core.clock import utcnow

DOMAIN = "dsh_github_reviewer_run"
TABLE = "accounts"
DOMAIN_VERSION = 1
# The fields compared between the running bot and the shell (status marks the ones that differ).
COMPARED = ("instance", "mode", "credentials", "repositories", "api_url", "poll_interval_s",
            "models")


class AccountSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance: str
    mode: str                 # pat | app
    credentials: str          # set | unset
    repositories: list[str]   # as configured; empty = idle (PAT) or the installation's (App)
    api_url: str
    poll_interval_s: float
    models: list[str]         # review.models refs; empty = default_model


class RunRecord(AccountSummary):
    started_at: datetime
    pid: int
    host: str
    config: str               # the config file the bot was started with
    version: str


def domain_spec() -> DomainSpec:
    return DomainSpec(name=DOMAIN, version=DOMAIN_VERSION, tables={TABLE: RunRecord})


def summary(instance: str, config: Any) -> AccountSummary:
    """An account's config as this process reads it (``config`` is an ``AccountConfig``)."""
    return AccountSummary(
        instance=instance, mode="app" if config.app_mode else "pat",
        credentials="set" if config.has_credentials else "unset",
        repositories=list(config.repositories), api_url=config.api_url,
        poll_interval_s=config.poll_interval_s,
        models=[c.ref for c in config.review.models])


async def record_start(domain: Domain, accounts: dict[str, tuple[str, Any]],
                       source: str) -> None:
    """Replace the records with this start's accounts (key -> (instance, AccountConfig))."""
    table = domain.table(TABLE)
    now, pid, host = utcnow(), os.getpid(), socket.gethostname()
    for key in set(await table.all()) - set(accounts):
        await table.delete(key)  # an account no longer configured is not "running"
    for key, (instance, config) in accounts.items():
        base = summary(instance, config).model_dump()
        await table.put(key, RunRecord(**base, started_at=now, pid=pid, host=host,
                                       config=source, version=__version__))


async def load(domain: Domain) -> dict[str, RunRecord]:
    return await domain.table(TABLE).all()


def differences(stored: AccountSummary, shell: AccountSummary | None) -> list[str]:
    """``field (shell: value)`` for each compared field the shell reads differently."""
    if shell is None:
        return ["account (not in this shell's config)"]
    out = []
    for name in COMPARED:
        mine, theirs = getattr(shell, name), getattr(stored, name)
        if mine != theirs:
            shown = ", ".join(mine) if isinstance(mine, list) else mine
            out.append(f"{name} (shell: {shown if shown not in ('', None) else 'none'})")
    return out


def status_view(stored: RunRecord | None, shell: AccountSummary | None) -> dict[str, Any]:
    """What ``status`` shows about an account's config: the running bot's record when there is
    one (else the shell's reading, said so), and the fields the shell reads differently."""
    if stored is None:
        view = shell.model_dump(mode="json") if shell else {}
        return view | {"source": "this shell's config (no dsh run has recorded a start)",
                       "started_at": None, "pid": None, "differs": []}
    return stored.model_dump(mode="json") | {
        "source": f"dsh run (pid {stored.pid} on {stored.host}, {stored.config})",
        "differs": differences(stored, shell)}
