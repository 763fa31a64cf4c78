"""The one clock of the reviewer: aware UTC ``datetime``s.

Code that decides by time takes a ``Clock`` (default ``utcnow``) so tests and fault kits can
move it; nothing else calls ``datetime.now``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)
