"""The one way tests wait for something another thread or process does: poll a predicate.

The sandbox GitHub and the scripted model server change state on their own threads and
subprocesses write files: there is no event to await, so tests poll. A wait that runs out fails
naming what it waited for (a bare ``TimeoutError`` says nothing in a report).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

POLL_S = 0.05


async def wait_until(predicate: Callable[[], Any], limit_s: float = 60, what: str = "") -> Any:
    """Poll ``predicate`` until it is truthy (returned) or ``limit_s`` passed (AssertionError)."""
    deadline = time.monotonic() + limit_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {limit_s:g} s for {what or _name(predicate)} in vain")
        await asyncio.sleep(POLL_S)


def _name(predicate: Callable[[], Any]) -> str:
    code = getattr(predicate, "__code__", None)
    where = f" ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})" if code else ""
    return f"{getattr(predicate, '__qualname__', 'a condition')}{where}"
