"""Starting and stopping the webhook receivers of a ``ReviewerApp`` (one per plugin instance
that enables ``webhook``), wired to the accounts they serve."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..sources.webhook import deliveries
from ..sources.webhook.receiver import Receiver, Target, WorkSink
from ..sources.webhook.server import WebhookServer

if TYPE_CHECKING:
    from . import ReviewerApp

log = logging.getLogger(__name__)


def targets(app: ReviewerApp, instance: str) -> list[Target]:
    config = app.instances[instance]
    out = []
    for acct in app.configured.values():
        if acct.instance != instance:
            continue
        secret = config.webhook_secret(acct.config)
        assert secret is not None  # the config refuses an enabled webhook without one
        out.append(Target(acct.key, secret.get_secret_value(),
                          frozenset(r.lower() for r in acct.config.repositories),
                          acct.config.installation_id,
                          acct.config.app_mode and not acct.config.repositories))
    return out


async def bind_receivers(app: ReviewerApp, sink: WorkSink) -> list[WebhookServer]:
    """The receivers with their addresses taken, not yet serving (``WebhookBindError``)."""
    enabled = [(i, c) for i, c in app.instances.items() if c.webhook.enabled]
    if not enabled:
        return []
    domain = await app.harness.storage.domain(deliveries.DOMAIN)
    seen = await deliveries.DeliveryLog(domain, shared=app.harness.leases.shared).load()
    servers: list[WebhookServer] = []
    try:
        for instance, config in enabled:
            hook = config.webhook
            receiver = Receiver(targets(app, instance), sink, seen, hook.path)
            servers.append(WebhookServer(receiver, hook.host, hook.port, instance))
            servers[-1].bind()
    except BaseException:
        await stop_receivers(servers)
        raise
    return servers


async def start_receivers(app: ReviewerApp, sink: WorkSink,
                          bound: list[WebhookServer] | None = None) -> list[WebhookServer]:
    """Serve the receivers (``bound`` from ``bind_receivers``; else bind them first)."""
    servers = bound if bound is not None else await bind_receivers(app, sink)
    try:
        for server in servers:
            await server.start()
    except BaseException:
        await stop_receivers(servers)
        raise
    return servers


async def stop_receivers(servers: list[WebhookServer]) -> None:
    for server in servers:
        await server.stop()
