"""Serving the web UI with uvicorn inside the harness's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import uvicorn

from .app import build_app

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    # The harness owns SIGINT/SIGTERM (dsh run / dsh web stop cleanly); uvicorn must not
    # replace those handlers.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class WebServer:
    def __init__(self, harness: Any):
        self.harness = harness
        self.server: _Server | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        web = self.harness.config.web
        app = build_app(self.harness)  # raises for a public bind without a token
        config = uvicorn.Config(app, host=web.host, port=web.port, log_level="warning",
                                lifespan="off", access_log=False)
        self.server = _Server(config)
        self.task = asyncio.create_task(self.server.serve(), name="dsh-web")
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
