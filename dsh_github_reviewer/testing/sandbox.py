"""A local sandbox GitHub: a real HTTP server for tests, benchmarks and the offline demo.

Serves REST under ``/api/v3`` (GHES layout) and at the root, raw files under ``/raw``, and the
GraphQL subset github-mcp-server needs at ``/api/graphql``. It honours ``If-None-Match`` with
304s (which, like GitHub, do not use the rate limit), counts requests, can inject rate limits
and 5xx answers, issues GitHub App installation tokens against a registered public key, and
listens on a random port or on ``127.0.0.N:80`` — the real MCP binary drops the port of
``GITHUB_HOST``, so each server there takes its own loopback address.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from dsh_harness.testing import ThreadedServer

from . import sandbox_graphql
from .sandbox_payloads import Payloads
from .sandbox_rest import Ctx, Reply, RestRoutes
from .sandbox_state import SandboxState
from .sandbox_webhooks import Hook, WebhookSender

RATE_LIMIT = 5000


@dataclass
class Fault:
    kind: str  # "primary" | "secondary" | "error" | "bad_json"
    status: int = 0
    wait_s: float = 60.0
    path_contains: str | None = None
    # Only a request whose body holds this (a GraphQL mutation's name, say).
    body_contains: str | None = None


@dataclass
class Logged:
    method: str
    path: str
    query: str
    status: int
    login: str | None


@dataclass
class App:
    app_id: int
    installation_id: int
    public_key_pem: str
    bot_login: str
    slug: str = "dsh-reviewer"
    token_ttl_s: float = 3600.0
    fail_next: int = 0
    token_requests: int = 0
    tokens: dict[str, float] = field(default_factory=dict)  # token -> expires (epoch s)


class LoopbackPortDenied(RuntimeError):
    """This process may not bind a privileged port (not root, no CAP_NET_BIND_SERVICE)."""


def port_denied_message(port: int) -> str:
    return (f"binding 127.0.0.N:{port} needs root or CAP_NET_BIND_SERVICE (the bundled "
            f"github-mcp-server always dials port {port} of GITHUB_HOST, so the sandbox GitHub "
            "must listen there): run as root, or grant the capability to this Python once with "
            f"`sudo setcap cap_net_bind_service=+ep {Path(sys.executable).resolve()}`")


def _address_slice() -> tuple[int, int]:
    """The last octets this process may probe, first and last. Parallel test workers
    (pytest-xdist sets ``PYTEST_XDIST_WORKER=gw<N>`` and ``PYTEST_XDIST_WORKER_COUNT``) each get
    a slice of 127.0.0.2–254 of their own: a probe then bind in two processes at once could
    otherwise pick the same address, and the second server would fail to bind."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit()):
        return 2, 254
    size = 253 // max(1, int(count))
    first = 2 + (int(worker[2:]) % max(1, int(count))) * size
    return first, first + size - 1


def free_loopback_address(port: int = 80) -> str:
    """A 127.0.0.N whose ``port`` is free (tests running side by side each take their own).

    Raises ``LoopbackPortDenied`` when the port is privileged and this process may not bind it
    (the test suite skips those tests with that reason; the demo prints it).
    """
    first, last = _address_slice()
    for n in range(first + secrets.randbelow(max(1, (last - first) * 3 // 4)), last + 1):
        host = f"127.0.0.{n}"
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except PermissionError:
                raise LoopbackPortDenied(port_denied_message(port)) from None
            except OSError:
                continue
            return host
    raise RuntimeError(f"no free 127.0.0.N:{port} address")


class SandboxGitHub:
    def __init__(self, host: str = "127.0.0.1", port: int = 0,
                 state: SandboxState | None = None):
        self.host, self.port = host, port
        self.state = state or SandboxState()
        self.faults: list[Fault] = []
        self.log: list[Logged] = []
        self.apps: dict[int, App] = {}
        self._remaining: dict[str, int] = {}
        self._http = ThreadedServer(host, port, f"sandbox-github-{host}")
        self._lock = threading.Lock()

    @classmethod
    def on_loopback_80(cls, state: SandboxState | None = None) -> SandboxGitHub:
        """For the real github-mcp-server binary, which always dials port 80."""
        return cls(free_loopback_address(80), 80, state)

    # -- addresses ----------------------------------------------------------------------------

    @property
    def web_url(self) -> str:
        return f"http://{self.host}" + ("" if self.port == 80 else f":{self.port}")

    @property
    def api_url(self) -> str:
        return f"{self.web_url}/api/v3"

    # -- scenario API -------------------------------------------------------------------------

    def add_token(self, login: str, token: str | None = None, type: str = "User") -> str:
        return self.state.add_token(login, token or f"ghp_{secrets.token_hex(18)}", type)

    def register_app(self, app_id: int, installation_id: int, public_key_pem: str,
                     slug: str = "dsh-reviewer", token_ttl_s: float = 3600.0,
                     repositories: list[str] | None = None) -> App:
        """``repositories``: what the installation can access (None = every repository)."""
        login = f"{slug}[bot]"
        self.state.add_user(login, "Bot")
        app = App(app_id, installation_id, public_key_pem, login, slug, token_ttl_s)
        self.apps[installation_id] = app
        self.set_installation_repositories(login, repositories)
        return app

    def set_installation_repositories(self, bot_login: str, repositories: list[str] | None
                                      ) -> None:
        """Change what an App installation can access (as adding it to a repository would)."""
        with self.state.lock:
            if repositories is None:
                self.state.installation_repos.pop(bot_login, None)
            else:
                self.state.installation_repos[bot_login] = [r.lower() for r in repositories]

    def inject_rate_limit(self, kind: str = "secondary", wait_s: float = 60.0, times: int = 1,
                          path_contains: str | None = None) -> None:
        with self._lock:
            self.faults += [Fault(kind, 0, wait_s, path_contains) for _ in range(times)]

    def inject_error(self, status: int = 502, times: int = 1,
                     path_contains: str | None = None, body_contains: str | None = None
                     ) -> None:
        with self._lock:
            self.faults += [Fault("error", status, 0, path_contains, body_contains)
                            for _ in range(times)]

    def inject_bad_json(self, times: int = 1, path_contains: str | None = None) -> None:
        """The next matching requests get a 200 whose JSON body is cut off."""
        with self._lock:
            self.faults += [Fault("bad_json", 200, 0, path_contains) for _ in range(times)]

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"total": len(self.log),
                    "not_modified": sum(1 for e in self.log if e.status == 304),
                    "rate_limited": sum(1 for e in self.log if e.status in (403, 429)),
                    "errors": sum(1 for e in self.log if e.status >= 500)}

    def reset_log(self) -> None:
        with self._lock:
            self.log.clear()

    def requests(self, method: str | None = None, contains: str = "") -> list[Logged]:
        with self._lock:
            return [e for e in self.log if (method is None or e.method == method)
                    and contains in e.path]

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> SandboxGitHub:
        # Payload URLs are built per request, once the bound port is known.
        self.payloads = Payloads(self.state, lambda: self.web_url)
        self.rest = RestRoutes(self.state, self.payloads)
        self.webhooks = WebhookSender(self.state, self.payloads)
        self.port = self._http.serve(self.app())
        return self

    def add_hook(self, url: str, secret: str, **kwargs: object) -> Hook:
        """Deliver this sandbox's events to ``url`` (see ``WebhookSender.add_hook``)."""
        return self.webhooks.add_hook(url, secret, **kwargs)  # type: ignore[arg-type]

    def stop(self) -> None:
        self._http.stop()
        self.webhooks.close()
        self.state.listeners.remove(self.webhooks.emit)

    def __enter__(self) -> SandboxGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP -----------------------------------------------------------------------------------

    def app(self) -> Starlette:
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        return Starlette(routes=[Route("/{path:path}", self._handle, methods=methods)])

    def _login(self, request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        token = auth.split(" ", 1)[1].strip() if " " in auth else ""
        if token in self.state.tokens:
            return self.state.tokens[token]
        for app in self.apps.values():
            expires = app.tokens.get(token)
            if expires is not None and expires > self.state.now().timestamp():
                return app.bot_login
        return None

    def _take_fault(self, path: str, body: bytes = b"") -> Fault | None:
        with self._lock:
            for i, f in enumerate(self.faults):
                if (f.path_contains is None or f.path_contains in path) and (
                        f.body_contains is None or f.body_contains.encode() in body):
                    return self.faults.pop(i)
        return None

    async def _handle(self, request: Request) -> Response:
        path = request.url.path
        prefix = "/api/v3" if path.startswith("/api/v3/") else ""
        path = path[len(prefix):] if prefix else path
        body = await request.body()
        reply, login = self._route(request, path, prefix, body)
        return self._respond(request, path, reply, login)

    def _route(self, request: Request, path: str, prefix: str, body: bytes
               ) -> tuple[Reply, str | None]:
        if request.method == "POST" and path.startswith("/app/installations/"):
            return self._installation_token(request, path), None
        if request.method == "GET" and path.rstrip("/") == "/app":
            return self._get_app(request), None
        login = self._login(request)
        if login is None:
            return Reply(401, {"message": "Bad credentials"}), None
        fault = self._take_fault(path, body)
        if fault is not None:
            return self._fault_reply(fault, login), login
        try:
            payload = json.loads(body) if body else None
        except json.JSONDecodeError:
            return Reply(400, {"message": "Problems parsing JSON"}), login
        if path in ("/api/graphql", "/graphql") and request.method == "POST":
            return Reply(200, sandbox_graphql.execute(self.state, self.web_url, login,
                                                      payload or {})), login
        ctx = Ctx(request.method, path, dict(request.query_params), dict(request.headers),
                  payload, login, f"{self.web_url}{prefix}")
        return self.rest.dispatch(ctx), login

    def _fault_reply(self, fault: Fault, login: str) -> Reply:
        if fault.kind == "secondary":
            return Reply(429, {"message": "You have exceeded a secondary rate limit."},
                         {"retry-after": str(int(fault.wait_s))})
        if fault.kind == "primary":
            reset = int(time.time() + fault.wait_s)
            return Reply(403, {"message": "API rate limit exceeded"},
                         {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)})
        if fault.kind == "bad_json":
            return Reply(200, '{"message": "cut off in the midd')
        return Reply(fault.status, {"message": "Server Error (sandbox fault)"})

    def _refused_jwt(self, request: Request, app: App) -> Reply | None:
        """None when the request carries a valid JWT of ``app``; else GitHub's 401."""
        auth = request.headers.get("authorization", "")
        try:
            claims = jwt.decode(auth.removeprefix("Bearer ").strip(), app.public_key_pem,
                                algorithms=["RS256"],
                                options={"require": ["iat", "exp", "iss"], "verify_exp": False,
                                         "verify_iat": False})
        except jwt.PyJWTError as exc:
            return Reply(401, {"message": f"A JSON web token could not be decoded ({exc})"})
        now = self.state.now().timestamp()  # the sandbox clock, which tests may advance
        if not claims["iat"] <= now + 1 < claims["exp"] + 1:
            return Reply(401, {"message": "'Issued at' claim ('iat') must be an Integer "
                                          "representing the time that the assertion was issued"})
        if str(claims["iss"]) != str(app.app_id) or claims["exp"] - claims["iat"] > 600:
            return Reply(401, {"message": "'Expiration time' claim ('exp') is too far in the "
                                          "future or the issuer does not match"})
        return None

    def _get_app(self, request: Request) -> Reply:
        """``GET /app`` with an App's JWT: the App itself (its slug names its bot)."""
        auth = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        try:
            iss = str(jwt.decode(auth, options={"verify_signature": False})["iss"])
        except (jwt.PyJWTError, KeyError):
            return Reply(401, {"message": "A JSON web token could not be decoded"})
        app = next((a for a in self.apps.values() if str(a.app_id) == iss), None)
        if app is None:
            return Reply(404, {"message": "Not Found"})
        refused = self._refused_jwt(request, app)
        if refused is not None:
            return refused
        return Reply(200, {"id": app.app_id, "slug": app.slug, "name": app.slug,
                           "owner": {"login": "sandbox", "type": "Organization"}})

    def _installation_token(self, request: Request, path: str) -> Reply:
        parts = path.strip("/").split("/")
        try:
            installation = int(parts[2])
        except (IndexError, ValueError):
            return Reply(404, {"message": "Not Found"})
        app = self.apps.get(installation)
        if app is None:
            return Reply(404, {"message": "Not Found"})
        app.token_requests += 1
        if app.fail_next > 0:
            app.fail_next -= 1
            return Reply(500, {"message": "Server Error (sandbox fault)"})
        refused = self._refused_jwt(request, app)
        if refused is not None:
            return refused
        token = f"ghs_{secrets.token_hex(18)}"
        expires = self.state.now() + timedelta(seconds=app.token_ttl_s)
        app.tokens[token] = expires.timestamp()
        return Reply(201, {"token": token,
                           "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "permissions": {"pull_requests": "write", "contents": "read"},
                           "repository_selection": "all"})

    def _respond(self, request: Request, path: str, reply: Reply, login: str | None
                 ) -> Response:
        if isinstance(reply.body, str):
            data = reply.body.encode()
        else:
            data = json.dumps(reply.body).encode() if reply.body is not None else b""
        headers = dict(reply.headers)
        status = reply.status
        if request.method == "GET" and status == 200:
            etag = '"' + hashlib.sha256(data).hexdigest()[:40] + '"'
            headers["etag"] = etag
            if request.headers.get("if-none-match") == etag:
                status, data = 304, b""
        if login is not None:
            key = login.lower()
            if status != 304:
                self._remaining[key] = self._remaining.get(key, RATE_LIMIT) - 1
            headers.setdefault("x-ratelimit-limit", str(RATE_LIMIT))
            headers.setdefault("x-ratelimit-remaining",
                               str(max(0, self._remaining.get(key, RATE_LIMIT))))
            headers.setdefault("x-ratelimit-reset", str(int(time.time()) + 3600))
        with self._lock:
            self.log.append(Logged(request.method, path, request.url.query, status, login))
        media = None if status == 304 else reply.content_type
        return Response(data, status_code=status, headers=headers, media_type=media)
