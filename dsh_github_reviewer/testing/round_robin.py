"""A round-robin HTTP proxy on loopback: the "one webhook service in front of the replicas".

Each request goes to the next backend port in turn; a backend that refuses the connection (a
replica that is down or restarting) is skipped like a load balancer's failed health check, and
with no backend answering the sender gets 502 (GitHub does not retry: the reconciliation poll
picks the work up). Counts what each backend answered, for tests to see the spread.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


class RoundRobinProxy:
    def __init__(self, ports: list[int], host: str = "127.0.0.1"):
        self.ports, self.host = list(ports), host
        self.answered: dict[int, int] = dict.fromkeys(ports, 0)
        self._next = 0
        self._lock = threading.Lock()
        self._client = httpx2.Client(timeout=10.0)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in HOP_HEADERS}
                status, reply = proxy.forward(self.path, headers, body)
                try:
                    self.send_response(status)
                    self.send_header("content-length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender gave up first (GitHub's 10 s timeout), as GitHub does

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="round-robin-proxy")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def forward(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        with self._lock:
            start = self._next
            self._next = (self._next + 1) % len(self.ports)
        for i in range(len(self.ports)):
            port = self.ports[(start + i) % len(self.ports)]
            try:
                r = self._client.post(f"http://{self.host}:{port}{path}", content=body,
                                      headers=headers)
            except httpx2.TransportError:
                continue  # down or restarting: the next replica takes it
            with self._lock:
                self.answered[port] += 1
            return r.status_code, r.content
        return 502, b"no replica answered"

    def __enter__(self) -> RoundRobinProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
