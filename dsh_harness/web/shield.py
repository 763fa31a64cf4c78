"""The outermost layer of the web app: Host allowlist and security headers on every response.

It wraps the whole Starlette app (outside its error handling), so login pages, 401/404/429
answers, static files and even a 500 from an unexpected exception carry the same headers.
Pages and API answers are ``no-store`` (they show session text); static files are cacheable:
a versioned URL (``?v=<hash of the static files>``, what pages link to) for a year, as it never
changes, any other for a revalidated ``no-cache`` (its ETag makes that a 304).

The Host check defends the loopback UI against DNS rebinding: a hostile page whose name
resolves to 127.0.0.1 reaches the server with its own name in ``Host`` and is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self'; connect-src 'self'; form-action 'self'; "
                                "base-uri 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_RAW_HEADERS = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
_REPLACED = {k for k, _ in _RAW_HEADERS}
STATIC_PREFIX = "/static/"
_STATIC_VERSIONED = [(b"cache-control", b"public, max-age=31536000, immutable")]
_STATIC_PLAIN = [(b"cache-control", b"no-cache")]
_NO_CACHE_CONTROL = [h for h in _RAW_HEADERS if h[0] != b"cache-control"]


def host_name(header: str) -> str:
    """``Host`` without its port, lower case, without a final dot: ``[::1]:8765`` -> ``::1``,
    ``Localhost.:80`` -> ``localhost``. A malformed header (a port that is not a number,
    text after ``]``) gives ``""``, which no allowlist contains."""
    header = header.strip().lower()
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        return name if rest == "" or (rest[:1] == ":" and rest[1:].isdigit()) else ""
    if header.count(":") == 1:
        header, _, port = header.partition(":")
        if not port.isdigit():
            return ""
    return header[:-1] if header.endswith(".") and not header.endswith("..") else header


def allowed_hosts(bind_host: str, extra: Iterable[str]) -> frozenset[str]:
    names = {*LOOPBACK_NAMES, *(host_name(h) for h in extra)}
    if bind_host not in ("0.0.0.0", "::", ""):
        names.add(host_name(bind_host) if ":" not in bind_host.strip("[]") else
                  bind_host.strip("[]").lower())
    names.discard("")  # a malformed entry must not admit requests with a malformed Host
    return frozenset(names)


def with_headers(headers: list[tuple[bytes, bytes]], scope: dict | None = None
                 ) -> list[tuple[bytes, bytes]]:
    kept = [h for h in headers if h[0].lower() not in _REPLACED]
    if scope is not None and scope.get("path", "").startswith(STATIC_PREFIX):
        versioned = b"v=" in scope.get("query_string", b"")
        return [*kept, *_NO_CACHE_CONTROL,
                *(_STATIC_VERSIONED if versioned else _STATIC_PLAIN)]
    return [*kept, *_RAW_HEADERS]


class Shield:
    def __init__(self, app: Any, hosts: frozenset[str]):
        self.app, self.hosts = app, hosts

    @property
    def state(self) -> Any:
        return self.app.state

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_secured(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": with_headers(list(message.get("headers", [])),
                                                              scope)}
            await send(message)

        host = next((v.decode("latin-1") for k, v in scope.get("headers", [])
                     if k == b"host"), "")
        if host_name(host) not in self.hosts:
            body = (b"This host name is not allowed; list it in web.allowed_hosts to serve "
                    b"the UI under it.\n")
            await send_secured({"type": "http.response.start", "status": 421, "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode())]})
            await send_secured({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send_secured)
