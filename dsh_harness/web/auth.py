"""Access control for the web UI.

Bound to loopback, the UI is open by default. Bound anywhere else, ``web.auth_token`` is
required (the server refuses to start without it) and every request must carry it: an
``Authorization: Bearer`` header, or the HttpOnly cookie set by the login form.
"""

from __future__ import annotations

import hmac
import ipaddress

from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ..errors import ConfigError

COOKIE = "dsh_web_token"
OPEN_PATHS = ("/login", "/static/")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def required_token(host: str, token: str | None) -> str | None:
    """The token every request must carry, or None; raises for an unprotected public bind."""
    if token:
        return token
    if not is_loopback(host):
        raise ConfigError(f"web.host {host!r} is not a loopback address: set web.auth_token "
                          "(e.g. auth_token = \"${DSH_WEB_TOKEN}\") so the UI is not open to "
                          "the network")
    return None


def presented(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.cookies.get(COOKIE)


class TokenAuth(BaseHTTPMiddleware):
    def __init__(self, app, token: str):
        super().__init__(app)
        self.token = token

    def ok(self, request: Request) -> bool:
        given = presented(request)
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def dispatch(self, request: Request, call_next) -> Response:
        if request.url.path.startswith(OPEN_PATHS) or self.ok(request):
            return await call_next(request)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": "authentication required"}, status_code=401)
        return HTMLResponse(LOGIN_PAGE.replace("{error}", ""), status_code=401)


LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>dsh · sign in</title><link rel="stylesheet" href="/static/style.css"></head>
<body class="login"><form method="post" action="/login"><h1>dsh</h1>{error}
<label>Access token <input type="password" name="token" autocomplete="current-password"
autofocus required></label><button type="submit">Sign in</button></form></body></html>"""


async def login(request: Request) -> Response:
    token: str | None = request.app.state.auth_token
    if request.method == "GET":
        return HTMLResponse(LOGIN_PAGE.replace("{error}", ""))
    form = await request.form()
    given = str(form.get("token", ""))
    if token and hmac.compare_digest(given.encode(), token.encode()):
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(COOKIE, given, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
        return resp
    return HTMLResponse(LOGIN_PAGE.replace("{error}", '<p class="error">Wrong token.</p>'),
                        status_code=401)


async def logout(request: Request) -> Response:
    resp = RedirectResponse("/login", status_code=303)
    resp.delete_cookie(COOKIE)
    return resp
