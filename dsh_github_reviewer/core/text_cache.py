"""A memo for pure functions of a text the bot reads again at every review of a PR.

A PR's comments, reviews and their first lines are read several times per review, and again at
the next one. Their parses are remembered, but only for texts up to a size: the memory stays
bounded (entries times characters) however long the texts people write are. A longer text is
simply computed again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def short_text_cache(*, max_chars: int, maxsize: int = 4096
                     ) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """An LRU cache of ``maxsize`` entries for a function whose first argument is a text
    (or None), used only when that text has at most ``max_chars`` characters."""
    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            text = args[0]
            if isinstance(text, str) and len(text) <= max_chars:
                return cached(*args, **kwargs)
            return fn(*args, **kwargs)
        return call
    return wrap
