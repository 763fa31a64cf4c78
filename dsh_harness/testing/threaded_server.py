"""Run an ASGI app with uvicorn on a thread of its own, for test servers.

A test server on its own thread answers whether the test's event loop is busy, blocked in a
sync call, or not running at all (Playwright's sync API, subprocess crash tests).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class ThreadedServer:
    def __init__(self, host: str, port: int, name: str):
        self.host, self.port, self.name = host, port, name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def serve(self, app: Any) -> int:
        """Bind, start serving ``app``, and return the bound port once it accepts requests."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        daemon=True, name=self.name)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"{self.name} did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None
