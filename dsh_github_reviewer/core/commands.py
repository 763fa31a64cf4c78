"""Comment commands: ``/review``, ``/review full`` and ``/bot <message>``.

``/bot`` followed by one of the built-in words (``help``, ``pause``, ``resume``, ``lessons``,
``forget <n>``, ``learn <lesson>``) is answered by the bot itself, without a model turn; any
other message is a question for the PR's conversation (a chat turn).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_COMMAND = re.compile(r"^/(review|bot)(?=\s|$)", re.I)

# What a ``/bot`` command does: "chat" asks the model; the others are the bot's own.
BotAction = Literal["chat", "help", "pause", "resume", "lessons", "forget", "learn"]
# Built-in words that take no argument, and those that take the rest of the message.
_BARE: dict[str, BotAction] = {"help": "help", "pause": "pause", "resume": "resume",
                               "lessons": "lessons"}
_WITH_ARG: dict[str, BotAction] = {"forget": "forget", "learn": "learn"}

HELP_TEXT = """\
Commands (people whose association may command this bot):

- `/review` — review the current head now (only what changed since the last review).
- `/review full` — review the whole pull request again, not only what changed.
- `/bot <question>` — ask about this pull request (on a review thread: about that finding).
- `/bot pause` — no automatic reviews of this pull request until `/bot resume`; commands are \
still answered.
- `/bot resume` — automatic reviews again; the current head is reviewed if it is owed.
- `/bot learn <lesson>` — teach a lesson for every pull request of this repository.
- `/bot lessons` — list this repository's lessons.
- `/bot forget <n>` — remove lesson number n.
- `/bot help` — this list.

A 👎 on a finding of the bot plus a reply giving the reason, or a reply such as "this is \
intended because …", also teaches a lesson."""


@dataclass(frozen=True)
class ParsedCommand:
    kind: Literal["review", "bot"]
    message: str = ""
    # ``/bot``: which action; ``/review``: always "chat" (unused).
    action: BotAction = "chat"
    # ``/review full``: the whole PR, not only what changed since the last review.
    full: bool = False


def parse_command(body: str | None) -> ParsedCommand | None:
    """The command in a comment body, or None. ``/bot`` needs a message; case-insensitive."""
    text = (body or "").strip()
    m = _COMMAND.match(text)
    if not m:
        return None
    kind = m.group(1).lower()
    rest = text[m.end():].strip()
    if kind == "review":
        word = rest.split(None, 1)[0].lower() if rest else ""
        return ParsedCommand("review", full=word == "full")
    if not rest:
        return None
    first = rest.split(None, 1)
    word, arg = first[0].lower(), (first[1].strip() if len(first) > 1 else "")
    if word in _BARE and not arg:
        return ParsedCommand("bot", rest, _BARE[word])
    if word in _WITH_ARG:
        return ParsedCommand("bot", arg, _WITH_ARG[word])
    return ParsedCommand("bot", rest)


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
