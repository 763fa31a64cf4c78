"""The receiver's own listener (the harness's ``AsgiServer``), so the web UI can stay on
loopback while the webhook endpoint sits behind a reverse proxy (or the other way round)."""

from __future__ import annotations

import logging

from dsh_harness import AsgiServer, DshError

from .receiver import Receiver

log = logging.getLogger(__name__)


class WebhookBindError(DshError):
    """The operator's to fix (a taken port, a bad host): ``dsh run`` prints one line, exits 1."""


class WebhookServer:
    def __init__(self, receiver: Receiver, host: str, port: int, instance: str = ""):
        self.receiver, self.host = receiver, host
        self.instance = instance  # the plugin instance whose accounts it serves
        self.path = receiver.path
        self.listener = AsgiServer("webhook receiver", host, port, error=WebhookBindError)

    def bind(self) -> None:
        """Take the address now, serve later: ``dsh run`` binds before its first poll, so a
        taken port stops the start before any work."""
        self.listener.bind()

    async def start(self) -> None:
        await self.listener.start(self.receiver.app(), name="github-webhook",
                                  timeout_keep_alive=5)
        log.info("webhook receiver on %s", self.url)

    @property
    def port(self) -> int:
        return self.listener.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    async def stop(self) -> None:
        await self.listener.stop()
