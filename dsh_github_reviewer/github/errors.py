"""GitHub errors, classified the way the poller needs them. Messages never contain a token."""

from __future__ import annotations

ERROR_BODY_LIMIT = 300


class GitHubError(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class NotFound(GitHubError):
    pass


class RateLimited(GitHubError):
    """Primary (403 + x-ratelimit-remaining: 0) or secondary (429 / Retry-After) limit."""

    def __init__(self, message: str, wait_s: float, status: int | None = None):
        super().__init__(message, status)
        self.wait_s = wait_s


class AuthError(GitHubError):
    pass


class BadCredentials(AuthError):
    """GitHub answered 401: the token is wrong, revoked or expired. No retry helps until the
    operator fixes it, so the account pauses (``work/pause.py``); the message never quotes
    GitHub's body."""


def transport_error(method: str, path: str, url: str, exc: BaseException) -> GitHubError:
    """A request that got no HTTP answer. The exception's own text is often empty (a reset
    connection is ``ReadError()``): name its type and the host (never the query or a token),
    and say what an empty one means."""
    from urllib.parse import urlsplit

    host = urlsplit(url).netloc.rpartition("@")[2] or "?"
    detail = " ".join(str(exc).split()) or "no detail (the connection was closed or reset)"
    return GitHubError(f"{method} {path}: {type(exc).__name__} from {host}: {truncate(detail)}")


def truncate(text: str, limit: int = ERROR_BODY_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
