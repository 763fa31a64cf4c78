"""Serving the web UI with uvicorn inside the harness's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

from ..errors import DshError
from .app import build_app

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    # The harness owns SIGINT/SIGTERM (dsh run / dsh web stop cleanly); uvicorn must not
    # replace those handlers.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a busy port is one clear error (uvicorn would
    ``sys.exit`` inside its task: a traceback for ``dsh web``, a hang for ``dsh run``)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, OverflowError) as exc:
        raise DshError(f"web UI cannot listen on {host}:{port}: {exc}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise DshError(f"web UI cannot listen on {host}:{port}: "
                       f"{exc.strerror or exc} (web.host / web.port, or --host / --port)"
                       ) from None
    return sock


class WebServer:
    def __init__(self, harness: Any):
        self.harness = harness
        self.server: _Server | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        web = self.harness.config.web
        app = build_app(self.harness)  # raises for a public bind without a token
        # No ``server: uvicorn`` header: it tells a prober what to try. uvicorn's own replies
        # to requests that are not HTTP (400 "Invalid HTTP request received.") never reach the
        # app, so they are plain text without the app's headers (nothing in them to frame).
        config = uvicorn.Config(app, host=web.host, port=web.port, log_level="warning",
                                lifespan="off", access_log=False, server_header=False)
        self.server = _Server(config)
        sock = bind(web.host, web.port)
        self.task = asyncio.create_task(self.server.serve(sockets=[sock]), name="dsh-web")
        while not self.server.started:
            if self.task.done():
                self.task.result()  # re-raise why it could not start
                raise RuntimeError(f"web UI could not bind {web.host}:{web.port}")
            await asyncio.sleep(0.02)
        log.info("web UI on http://%s:%d", web.host, self.port)

    @property
    def port(self) -> int:
        assert self.server is not None
        for server in self.server.servers:
            for sock in server.sockets:
                return sock.getsockname()[1]
        return self.harness.config.web.port

    async def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self.task
        self.server = self.task = None
