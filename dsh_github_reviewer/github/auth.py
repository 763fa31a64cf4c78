"""Credentials: a static PAT, or a GitHub App installation token.

App mode signs an RS256 JWT (iat now-60 s, exp now+540 s, iss app id), exchanges it for an
installation token, caches that until 5 minutes (or the asking turn's whole deadline, if longer)
before it expires, coalesces concurrent
refreshes into one request, and keeps serving a still-valid cached token if a refresh fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization

from .errors import AuthError, BadCredentials, truncate

log = logging.getLogger(__name__)

REFRESH_MARGIN_S = 300
JWT_BACKDATE_S = 60
JWT_LIFETIME_S = 540


def fingerprint(token: str) -> str:
    """A short, non-reversible id for a token (cache keys, logs)."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


class PatAuth:
    mode = "pat"

    def __init__(self, token: str):
        self._token = token

    async def token(self, valid_for_s: float = 0.0) -> str:
        return self._token

    def __repr__(self) -> str:
        return f"PatAuth(fingerprint={fingerprint(self._token)})"


def load_private_key(path: Path) -> str:
    """Read and parse a PEM private key; errors name the file, never its content."""
    try:
        data = path.expanduser().read_bytes()
    except OSError as exc:
        raise AuthError(f"cannot read GitHub App private key {path}: {exc.strerror}") from None
    try:
        serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise AuthError(f"GitHub App private key {path} is not an unencrypted PEM private key "
                        f"({type(exc).__name__})") from None
    return data.decode()


class AppAuth:
    mode = "app"

    def __init__(self, app_id: int, installation_id: int, private_key_pem: str, api_url: str,
                 http: httpx2.AsyncClient, clock: Callable[[], float] = time.time):
        self.app_id, self.installation_id = app_id, installation_id
        self._key = private_key_pem
        self.api_url = api_url.rstrip("/")
        self._http, self._clock = http, clock
        self._token: str | None = None
        self._expires_at = 0.0
        self._refresh: asyncio.Task[tuple[str, float]] | None = None
        self.refreshes = 0

    def __repr__(self) -> str:
        return f"AppAuth(app_id={self.app_id}, installation_id={self.installation_id})"

    def app_jwt(self) -> str:
        now = int(self._clock())
        claims = {"iat": now - JWT_BACKDATE_S, "exp": now + JWT_LIFETIME_S,
                  "iss": str(self.app_id)}
        return jwt.encode(claims, self._key, algorithm="RS256")

    async def token(self, valid_for_s: float = 0.0) -> str:
        """An installation token valid for at least ``valid_for_s`` more seconds (a turn hands
        its whole deadline: the MCP process reads its token once and cannot refresh it)."""
        margin = max(REFRESH_MARGIN_S, valid_for_s)
        now = self._clock()
        if self._token and now < self._expires_at - margin:
            return self._token
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.create_task(self._fetch())
        try:
            token, expires_at = await asyncio.shield(self._refresh)
        except Exception as exc:
            if self._token and self._clock() < self._expires_at:
                log.warning("GitHub App token refresh failed (%s); using the cached token, "
                            "valid for %.0f s more", exc, self._expires_at - self._clock())
                return self._token
            raise
        self._token, self._expires_at = token, expires_at
        if expires_at - self._clock() < valid_for_s:
            log.warning("GitHub App installation tokens live %.0f s, less than the %.0f s "
                        "asked for (review.turn_timeout_s): a turn may outlive its token",
                        expires_at - self._clock(), valid_for_s)
        return token

    async def app_login(self) -> str:
        """The login the App's installation posts as, ``<slug>[bot]``: ``GET /app`` with the
        App's JWT (an installation token may not read it)."""
        try:
            resp = await self._http.get(f"{self.api_url}/app", headers={
                "Authorization": f"Bearer {self.app_jwt()}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28"})
        except httpx2.HTTPError as exc:
            raise AuthError(f"GET /app failed: {type(exc).__name__}") from None
        if resp.status_code == 401:
            raise BadCredentials("GET /app failed: HTTP 401: GitHub rejected the App's "
                                 "credentials (app_id or private key)", 401)
        if resp.status_code != 200:
            raise AuthError(f"GET /app failed: HTTP {resp.status_code}: {truncate(resp.text)}",
                            resp.status_code)
        try:
            slug = resp.json()["slug"]
        except (ValueError, KeyError, TypeError):
            raise AuthError("GET /app: the answer has no slug") from None
        if not isinstance(slug, str) or not slug.strip():
            raise AuthError("GET /app: the answer has no slug")
        return f"{slug.strip()}[bot]"

    async def _fetch(self) -> tuple[str, float]:
        self.refreshes += 1
        url = f"{self.api_url}/app/installations/{self.installation_id}/access_tokens"
        try:
            resp = await self._http.post(url, headers={
                "Authorization": f"Bearer {self.app_jwt()}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28"})
        except httpx2.HTTPError as exc:
            raise AuthError(f"GitHub App token request failed: {type(exc).__name__}") from None
        if resp.status_code == 401:
            raise BadCredentials("GitHub App token request failed: HTTP 401: GitHub rejected the "
                                 "App's credentials (app_id, installation_id or private key)",
                                 401)
        if resp.status_code != 201 and resp.status_code != 200:
            raise AuthError(f"GitHub App token request failed: HTTP {resp.status_code}: "
                            f"{truncate(resp.text)}", resp.status_code)
        try:
            body = resp.json()
            token = body["token"]
            expires = datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise AuthError("GitHub App token response lacks token/expires_at") from None
        return token, expires.timestamp()
