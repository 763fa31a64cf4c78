"""Severity of a finding, in one fixed form that people read and code parses.

The model passes ``severity`` as a tool argument; the guard renders it as the first token of
the inline comment (``**[major]** …``), so the summary comment and the web UI can read it
back from GitHub and from the session log alike.
"""

from __future__ import annotations

import re
from typing import Literal

from .text_cache import short_text_cache

Severity = Literal["critical", "major", "minor", "nit"]
SEVERITIES: tuple[Severity, ...] = ("critical", "major", "minor", "nit")
_PREFIX = re.compile(r"^\*\*\[(critical|major|minor|nit)\]\*\* ?")


def rank(severity: str) -> int:
    """0 = most severe; an unknown severity ranks after ``nit``."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def at_least(severity: str, minimum: str) -> bool:
    return rank(severity) <= rank(minimum)


def render(severity: str, body: str) -> str:
    return f"**[{severity}]** {body}"


def parse(body: str) -> tuple[Severity | None, str]:
    """(severity, the rest) of a rendered comment body; (None, body) without the prefix."""
    m = _PREFIX.match(body or "")
    if not m:
        return None, body
    return m.group(1), body[m.end():]  # type: ignore[return-value]


@short_text_cache(max_chars=4000)
def headline(body: str | None) -> tuple[Severity | None, str]:
    """(severity, the first line of the rest) of a comment body, stripped. The bot's own
    comments are read this way at every review of a PR (thread list, summary, fix tracking):
    a pure function of the body, so each body is parsed once."""
    sev, rest = parse((body or "").strip())
    return sev, rest.split("\n", 1)[0]
