"""The receiver's own uvicorn listener, so the web UI can stay on loopback while the webhook
endpoint sits behind a reverse proxy (or the other way round)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn

from dsh_harness import DshError

from .receiver import Receiver

log = logging.getLogger(__name__)


class WebhookBindError(DshError):
    """The operator's to fix (a taken port, a bad host): ``dsh run`` prints one line, exits 1."""


class _Server(uvicorn.Server):
    # The harness owns SIGINT/SIGTERM; uvicorn must not replace its handlers.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class WebhookServer:
    def __init__(self, receiver: Receiver, host: str, port: int, instance: str = ""):
        self.receiver, self.host, self.requested_port = receiver, host, port
        self.instance = instance  # the plugin instance whose accounts it serves
        self.path = receiver.path
        self.server: _Server | None = None
        self._sock: socket.socket | None = None
        self.task: asyncio.Task[None] | None = None

    def bind(self) -> None:
        """Take the address now, serve later: ``dsh run`` binds before its first poll, so a
        taken port stops the start before any work. Bound here, not in uvicorn: a taken port
        is then a clear error, not uvicorn's exit."""
        if self._sock is not None:
            return
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.requested_port))
        except OSError as exc:
            sock.close()
            raise WebhookBindError(f"webhook receiver cannot listen on {self.host}:"
                                   f"{self.requested_port}: {exc.strerror or exc}") from None
        self._sock = sock

    async def start(self) -> None:
        self.bind()
        sock = self._sock
        config = uvicorn.Config(self.receiver.app(), log_level="warning", lifespan="off",
                                access_log=False, timeout_keep_alive=5)
        self.server = _Server(config)
        self.task = asyncio.create_task(self.server.serve(sockets=[sock]),
                                        name="github-webhook")
        while not self.server.started:
            if self.task.done():
                raise WebhookBindError(f"webhook receiver on {self.host}:{self.port} stopped "
                                       "while starting")
            await asyncio.sleep(0.02)
        log.info("webhook receiver on %s", self.url)

    @property
    def port(self) -> int:
        return self._sock.getsockname()[1] if self._sock is not None else self.requested_port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self.task
        if self._sock is not None:
            self._sock.close()
        self.server = self.task = self._sock = None
