"""Serving one ASGI app with uvicorn inside the running event loop.

Shared by the web UI and any plugin's own listener (the reviewer's webhook receiver): the
address is taken first, by ``bind``, so a busy port is one clear error naming what could not
listen (uvicorn would ``sys.exit`` inside its task: a traceback for ``dsh web``, a hang for
``dsh run``); serving starts later, and the harness keeps its SIGINT/SIGTERM handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

from ..errors import DshError

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    # The harness owns SIGINT/SIGTERM (dsh run / dsh web stop cleanly); uvicorn must not
    # replace those handlers.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class AsgiServer:
    """``what`` names the listener in errors (``"web UI"``); a failure to listen raises
    ``error`` (a ``DshError``) with ``hint`` appended, e.g. the config keys to change."""

    def __init__(self, what: str, host: str, port: int, *, error: type[DshError] = DshError,
                 hint: str = ""):
        self.what, self.host, self.requested_port = what, host, port
        self.error, self.hint = error, hint
        self.server: _Server | None = None
        self.task: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None

    def _fail(self, why: object) -> DshError:
        hint = f" ({self.hint})" if self.hint else ""
        return self.error(f"{self.what} cannot listen on {self.host}:{self.requested_port}: "
                          f"{why}{hint}")

    def bind(self) -> None:
        """Take the address now (idempotent); ``start`` serves on it."""
        if self._sock is not None:
            return
        try:
            infos = socket.getaddrinfo(self.host, self.requested_port,
                                       type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except (socket.gaierror, OverflowError) as exc:
            raise self._fail(exc) from None
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError as exc:
            sock.close()
            raise self._fail(exc.strerror or exc) from None
        self._sock = sock

    async def start(self, app: Any, *, name: str, **options: Any) -> None:
        """Serve ``app`` (uvicorn ``Config`` ``options`` on top of quiet defaults: no access
        log, no lifespan) until ``stop``; returns once it accepts connections."""
        self.bind()
        # proxy_headers off unless asked: uvicorn's default believes X-Forwarded-For from
        # 127.0.0.1, so a request relayed by any local process could pick its client address.
        config = uvicorn.Config(app, **{"log_level": "warning", "lifespan": "off",
                                        "access_log": False, "proxy_headers": False,
                                        **options})
        self.server = _Server(config)
        self.task = asyncio.create_task(self.server.serve(sockets=[self._sock]), name=name)
        while not self.server.started:
            if self.task.done():
                self.task.result()  # re-raise why it could not start
                raise self.error(f"{self.what} on {self.host}:{self.port} stopped while "
                                 "starting")
            await asyncio.sleep(0.02)

    @property
    def port(self) -> int:
        return self._sock.getsockname()[1] if self._sock is not None else self.requested_port

    async def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self.task
        if self._sock is not None:
            self._sock.close()
        self.server = self.task = self._sock = None
