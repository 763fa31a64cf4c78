"""Serving the web UI with uvicorn inside the harness's event loop (``serve.AsgiServer``)."""

from __future__ import annotations

import logging
from typing import Any

from .app import build_app
from .serve import AsgiServer

log = logging.getLogger(__name__)


class WebServer:
    def __init__(self, harness: Any):
        self.harness = harness
        web = harness.config.web
        self.listener = AsgiServer("web UI", web.host, web.port,
                                   hint="web.host / web.port, or --host / --port")

    async def start(self) -> None:
        web = self.harness.config.web
        app = build_app(self.harness)  # raises for a public bind without a token
        # No ``server: uvicorn`` header: it tells a prober what to try. uvicorn's own replies
        # to requests that are not HTTP (400 "Invalid HTTP request received.") never reach the
        # app, so they are plain text without the app's headers (nothing in them to frame).
        # X-Forwarded-For is believed only from the configured proxies (web.trusted_proxies).
        proxies = {"proxy_headers": True, "forwarded_allow_ips": ",".join(web.trusted_proxies)
                   } if web.trusted_proxies else {}
        await self.listener.start(app, name="dsh-web", server_header=False, **proxies)
        log.info("web UI on http://%s:%d", web.host, self.port)

    @property
    def port(self) -> int:
        return self.listener.port

    async def stop(self) -> None:
        await self.listener.stop()
