"""Access control for the web UI.

Bound to loopback, the UI is open unless ``web.auth_token`` is set. Bound anywhere else, a token
of at least 32 characters is required (the server refuses to start otherwise; ``dsh web
--generate-token`` prints one). A request is let in with ``Authorization: Bearer <token>`` or
with the session cookie the login form sets: a signed, expiring value whose key is derived from
the token, never the token itself, and recorded in the storage domain ``web-sessions``
(``signins.py``) so that every replica on the shared database honours it: logout deletes the
record (a copied cookie stops working, on the other replicas within ``signins.RECHECK_S``), a
restart keeps the sign-ins, and a new token voids them all (a new key). Wrong tokens are
rate limited per client address (the socket's peer; a
forwarded address only from ``web.trusted_proxies``). A token that is guessable (short, few
distinct characters, a repeated pattern) is refused at start, on any bind.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import secrets
import time
from collections import Counter, OrderedDict
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ..errors import ConfigError

COOKIE = "dsh_web_session"
OPEN_PATHS = ("/login", "/static/")
MIN_PUBLIC_TOKEN = 32
# Estimated bits (``token_bits``) a public token needs: one repeated character has 0, "abab…"
# 2 in all; 32 random hex characters have ~115, `--generate-token` ~220.
MIN_TOKEN_BITS = 96
SESSION_TTL_S = 12 * 3600
MAX_SESSIONS = 10_000
# Per client address: after MAX_FAILURES wrong tokens within WINDOW_S, every attempt from it
# (right or wrong) is answered 429 until the window has passed.
MAX_FAILURES = 10
WINDOW_S = 300.0
MAX_TRACKED = 10_000


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def generate_token() -> str:
    return secrets.token_urlsafe(32)  # 43 characters, 256 bits


def token_bits(token: str) -> float:
    """A crude strength estimate: length × the Shannon entropy of the token's characters,
    counted over its repeating unit only ("0123456789" four times is worth one copy)."""
    n = len(token)
    period = next((p for p in range(1, n // 2 + 1)
                   if all(token[i] == token[i % p] for i in range(n))), n)
    unit = token[:period]
    if not unit:
        return 0.0
    per_char = -sum(c / period * math.log2(c / period) for c in Counter(unit).values())
    return period * per_char


def required_token(host: str, token: str | None) -> str | None:
    """The token every request must carry, or None; raises for an unprotected public bind
    and for any token that is easy to guess (a token that can be guessed protects nothing,
    on loopback either: there it guards the UI from the machine's other users)."""
    if is_loopback(host) and not token:
        return None
    if not token:
        raise ConfigError(f"web.host {host!r} is not a loopback address: set web.auth_token "
                          "(e.g. auth_token = \"${DSH_WEB_TOKEN}\"; `dsh web --generate-token` "
                          "prints one) so the UI is not open to the network")
    if not is_loopback(host) and len(token) < MIN_PUBLIC_TOKEN:
        raise ConfigError(f"web.auth_token has {len(token)} characters; a non-loopback bind "
                          f"needs at least {MIN_PUBLIC_TOKEN} (`dsh web --generate-token` "
                          "prints one)")
    if token_bits(token) < MIN_TOKEN_BITS:
        raise ConfigError("web.auth_token is too easy to guess (too short, too few distinct "
                          "characters or a repeated pattern): use a random token "
                          "(`dsh web --generate-token` prints one)")
    return token


class SessionSigner:
    """Cookie values ``<expiry>.<nonce>.<hmac>``; the key is derived from the token (the same
    on every replica). A value is valid while signed, unexpired and still recorded: in
    ``shared`` (the storage domain every replica reads) when given, else in this process's
    bounded table (the oldest forgotten first). ``revoke`` (logout) deletes the record."""

    def __init__(self, token: str, ttl_s: int = SESSION_TTL_S,
                 max_sessions: int = MAX_SESSIONS, shared: Any = None):
        self.key = hmac.new(token.encode(), b"dsh-web-session-v1", hashlib.sha256).digest()
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self.shared = shared  # signins.SharedSignIns, or None: this process only
        self._live: OrderedDict[str, int] = OrderedDict()  # nonce -> expiry

    def _sig(self, payload: str) -> str:
        return hmac.new(self.key, payload.encode(), hashlib.sha256).hexdigest()

    async def issue(self, now: float | None = None) -> str:
        expiry = int((now if now is not None else time.time()) + self.ttl_s)
        nonce = secrets.token_hex(16)
        payload = f"{expiry}.{nonce}"
        if self.shared is not None:
            await self.shared.add(nonce, expiry)
        else:
            self._live[nonce] = expiry
            while len(self._live) > self.max_sessions:
                self._live.popitem(last=False)
        return f"{payload}.{self._sig(payload)}"

    @staticmethod
    def _nonce(value: str) -> str:
        return value.split(".")[1] if value.count(".") == 2 else ""

    async def valid(self, value: str, now: float | None = None) -> bool:
        payload, _, sig = value.rpartition(".")
        expiry = payload.partition(".")[0]
        if not (sig and expiry.isdigit()) or len(value) > 200:
            return False
        if not hmac.compare_digest(sig, self._sig(payload)):
            return False
        if int(expiry) <= (now if now is not None else time.time()):
            return False
        nonce = self._nonce(value)
        if self.shared is not None:
            return await self.shared.holds(nonce, int(expiry))  # logged out: no record
        return self._live.get(nonce) == int(expiry)

    async def revoke(self, value: str) -> None:
        self._live.pop(self._nonce(value), None)
        if self.shared is not None:
            await self.shared.remove(self._nonce(value))


class RateLimiter:
    """Failed sign-ins per client address in a sliding window (bounded memory)."""

    def __init__(self, max_failures: int = MAX_FAILURES, window_s: float = WINDOW_S):
        self.max_failures, self.window_s = max_failures, window_s
        self._fails: OrderedDict[str, list[float]] = OrderedDict()

    def _recent(self, client: str, now: float) -> list[float]:
        times = [t for t in self._fails.get(client, []) if now - t < self.window_s]
        if times:
            self._fails[client] = times
        else:
            self._fails.pop(client, None)
        return times

    def retry_after(self, client: str, now: float | None = None) -> int | None:
        """Seconds to wait when the client is locked out, else None."""
        now = time.monotonic() if now is None else now
        times = self._recent(client, now)
        if len(times) < self.max_failures:
            return None
        return max(1, int(self.window_s - (now - times[0])) + 1)

    def fail(self, client: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        times = self._recent(client, now)
        self._fails[client] = [*times, now][-self.max_failures:]
        self._fails.move_to_end(client)
        while len(self._fails) > MAX_TRACKED:
            self._fails.popitem(last=False)


def client_of(request: Request) -> str:
    return request.client.host if request.client else "?"


class Access:
    """The token check shared by the middleware and the login form."""

    def __init__(self, token: str, shared: Any = None):
        self.token = token
        self.signer = SessionSigner(token, shared=shared)
        self.limiter = RateLimiter()

    def token_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token.encode())

    async def signed_in(self, request: Request) -> bool:
        cookie = request.cookies.get(COOKIE)
        return bool(cookie) and await self.signer.valid(cookie)

    async def check(self, request: Request) -> bool | None:
        """True: let in; False: no credentials; None: wrong bearer token (counts as failure)."""
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return True if self.token_ok(auth[7:].strip()) else None
        return await self.signed_in(request)


def locked(retry: int, api: bool) -> Response:
    headers = {"Retry-After": str(retry)}
    message = f"too many wrong tokens from this address; try again in {retry} s"
    if api:
        return JSONResponse({"error": message}, status_code=429, headers=headers)
    return HTMLResponse(login_page(f'<p class="error">{message}.</p>'), status_code=429,
                        headers=headers)


class TokenAuth:
    """ASGI middleware: everything but the login form and static files needs the token."""

    def __init__(self, app: Any, access: Access):
        self.app, self.access = app, access

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(OPEN_PATHS):
            return await self.app(scope, receive, send)
        request = Request(scope)
        api = scope["path"].startswith("/api/")
        if await self.access.signed_in(request):
            # A signed cookie cannot be guessed, so it passes even while the address is locked
            # out: wrong tokens sent from a shared address (a proxy, a NAT) must not lock out
            # the maintainers already signed in behind it.
            return await self.app(scope, receive, send)
        client = client_of(request)
        retry = self.access.limiter.retry_after(client)
        if retry is not None:
            return await locked(retry, api)(scope, receive, send)
        verdict = await self.access.check(request)
        if verdict:
            return await self.app(scope, receive, send)
        if verdict is None:
            self.access.limiter.fail(client)
        if api:
            resp: Response = JSONResponse({"error": "authentication required"}, status_code=401)
        else:
            resp = HTMLResponse(login_page(""), status_code=401)
        await resp(scope, receive, send)


def login_page(error: str) -> str:
    return LOGIN_PAGE.replace("{error}", error)


LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dsh · sign in</title><link rel="stylesheet" href="/static/style.css">
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml"></head>
<body class="login"><main><form method="post" action="/login"><h1>dsh</h1>{error}
<label>Access token <input type="password" name="token" autocomplete="current-password"
autofocus required></label><button type="submit">Sign in</button></form></main></body></html>"""


async def login(request: Request) -> Response:
    access: Access | None = request.app.state.access
    # HEAD is a GET without a body (Starlette routes it here): never a sign-in attempt.
    if request.method in ("GET", "HEAD") or access is None:
        return HTMLResponse(login_page(""))
    client = client_of(request)
    retry = access.limiter.retry_after(client)
    if retry is not None:
        return locked(retry, api=False)
    form = await request.form()
    given = str(form.get("token", ""))
    if access.token_ok(given):
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(COOKIE, await access.signer.issue(), max_age=access.signer.ttl_s,
                        httponly=True, samesite="strict", path="/",
                        secure=request.url.scheme == "https")
        return resp
    access.limiter.fail(client)
    return HTMLResponse(login_page('<p class="error">Wrong token.</p>'), status_code=401)


async def logout(request: Request) -> Response:
    """Forgets the session on the server too: a copy of the cookie stops working."""
    access: Access | None = request.app.state.access
    cookie = request.cookies.get(COOKIE)
    if access is not None and cookie:
        await access.signer.revoke(cookie)
    resp = RedirectResponse("/login", status_code=303)
    resp.delete_cookie(COOKIE, path="/")
    return resp
