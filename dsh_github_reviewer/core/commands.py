"""Comment commands: ``/review`` and ``/bot <message>``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_COMMAND = re.compile(r"^/(review|bot)(?=\s|$)", re.I)


@dataclass(frozen=True)
class ParsedCommand:
    kind: Literal["review", "bot"]
    message: str = ""


def parse_command(body: str | None) -> ParsedCommand | None:
    """The command in a comment body, or None. ``/bot`` needs a message; case-insensitive."""
    text = (body or "").strip()
    m = _COMMAND.match(text)
    if not m:
        return None
    kind = m.group(1).lower()
    if kind == "review":
        return ParsedCommand("review")
    message = text[m.end():].strip()
    return ParsedCommand("bot", message) if message else None


def association_allowed(association: str | None, allowed: list[str]) -> bool:
    if "*" in allowed:
        return True
    return (association or "NONE").upper() in allowed


def _glob(pattern: str) -> re.Pattern[str]:
    # Only * and ? are wildcards: brackets are literal, so "*[bot]" means "ends with [bot]"
    # (fnmatch would read [bot] as a character class).
    body = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.compile(f"^{body}$", re.I)


def author_ignored(login: str, patterns: list[str]) -> bool:
    """Whether a PR author matches an ``ignore_authors`` entry (globs, case-insensitive)."""
    return any(_glob(p).match(login) for p in patterns)
