"""The status of the bot's findings (open, fixed, dismissed) as the PR's session log tells it,
for the PR page: the page must not call GitHub, and the log already holds what the bot was told
and did.

The facts are data: each review turn's meta ``told`` (``turn/told.py``) names the threads it
reported resolved or reopened, the reactions it reported (fact keys
``reactions:<id>:<+1>:<-1>:<the -1 that dismiss>``, ``github/votes.py``) and where each thread
it named stands (``places``: path, posted line, first line); each accepted submit names the
threads it fixed (``fixedThreads``, checked by the guard against the bot's own open threads).
Nothing a person writes — a PR body, a commit message, a reply — is read.

Turns recorded before the meta existed fall back to the bot's own lines and nothing else: the
blocks the bot appends at the very end of a review message (``<your_open_threads>`` last, the
``<feedback_on_your_threads>`` before it), found from the end of the message, and within them
only the lines the bot writes (``- thread <id>: …``, ``- <where> (thread <id>; …)``, and the
two-space-indented ``thread <id> …`` facts; a person's quoted reply is indented by four). A
line elsewhere in the message — in the PR body, a commit message, the diff — is never read.
Turns with meta but without ``places`` (recorded in between) take only the places from there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..core import severity
from ..core.sanitizer import sanitize_line
from ..turn.told import TOLD, ThreadPlace, Told

OPEN_BLOCK = ("\n\n<your_open_threads>\n", "\n</your_open_threads>")
FEEDBACK_BLOCK = ("\n\n<feedback_on_your_threads>\n", "\n</feedback_on_your_threads>")
_OPEN_LINE = re.compile(r"^- thread (\d+): (.*)$")
_FEEDBACK_ROOT = re.compile(r"^(\d+); your comment: (.*)\)$")
_RESOLVED = re.compile(r"^  thread (\d+) resolved(?: by .+)?$")
_REOPENED = re.compile(r"^  thread (\d+) unresolved again")


def _key(text: str) -> str:
    return " ".join(severity.parse(text.strip())[1].split())[:40]


def told_of(meta: Mapping[str, Any] | None) -> Told | None:
    raw = (meta or {}).get(TOLD)
    if not isinstance(raw, dict):
        return None
    try:
        return Told.model_validate(raw)
    except ValidationError:
        return None


def trailing_block(text: str, block: tuple[str, str]) -> tuple[list[str], str] | None:
    """The lines of a bot block that ends the text, and the text before it; None when the
    text does not end with one."""
    start, end = block
    if not text.endswith(end):
        return None
    at = text.rfind(start)
    if at < 0:
        return None
    return text[at + len(start):len(text) - len(end)].split("\n"), text[:at]


@dataclass
class FindingBook:
    places: dict[int, ThreadPlace] = field(default_factory=dict)
    # Old turns: the bot's own line naming a thread, kept whole (the place is matched against
    # the posted findings, never split out of the line: a path may hold spaces or colons).
    legacy: list[tuple[int | None, str]] = field(default_factory=list)
    fixed: set[int] = field(default_factory=set)
    resolved: dict[int, bool] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)

    def review_turn(self, meta: Mapping[str, Any] | None, text: str) -> None:
        """A review turn's meta and user message (the message only for turns without meta)."""
        told = told_of(meta)
        if told is None:
            self._legacy(text, facts=True)
            return
        if told.places:
            for ident, place in told.places.items():
                if ident.isdigit():
                    self.places[int(ident)] = place
        else:
            self._legacy(text, facts=False)
        for ident, resolution in told.threads.items():
            if not ident.isdigit():
                continue
            self.resolved[int(ident)] = resolution == "resolved"
            if resolution == "reopened":
                self.fixed.discard(int(ident))
        for key in told.facts:
            parts = key.split(":")
            # "reactions:<id>:<+1>:<-1>:<dismissing -1>": only the 👎 from allowlisted people
            # other than the PR's author dismiss (``github/votes.py``). A key without the last
            # field (recorded before it) dismisses nothing: anyone could have moved its counts.
            if len(parts) == 5 and parts[0] == "reactions" and all(p.isdigit()
                                                                   for p in parts[1:]):
                (self.down.add if int(parts[4]) else self.down.discard)(int(parts[1]))

    def _legacy(self, text: str, facts: bool) -> None:
        found = trailing_block(text, OPEN_BLOCK)
        if found is not None:
            lines, text = found
            for line in lines:
                m = _OPEN_LINE.match(line)
                if m:
                    self.legacy.append((int(m.group(1)), m.group(2)))
        found = trailing_block(text, FEEDBACK_BLOCK)
        if found is None:
            return
        for line in found[0]:
            if line.startswith("- ") and " (thread " in line:
                self.legacy.append((None, line))  # its id is read where its place ends
            if not facts:
                continue
            if m := _RESOLVED.match(line):
                self.resolved[int(m.group(1))] = True
            elif m := _REOPENED.match(line):
                self.resolved[int(m.group(1))] = False
                self.fixed.discard(int(m.group(1)))

    def submitted(self, args: dict[str, Any]) -> None:
        fixed = args.get("fixedThreads")
        if isinstance(fixed, list):
            self.fixed.update(i for i in fixed if isinstance(i, int) and not isinstance(i, bool))

    def ids_of(self, path: str, line: int | None, body: str) -> list[int]:
        """The threads that are this posted finding: same path and line, same first words."""
        key = _key(body.split("\n", 1)[0])

        def same(first: str) -> bool:
            k = _key(first)
            return key.startswith(k) or k.startswith(key)

        ids = [i for i, p in self.places.items()
               if p.path == path and p.line == line and same(p.first)]
        where = sanitize_line(path, 200) + (f":{line}" if line else "")
        for ident, rest in self.legacy:
            if ident is not None:   # "- thread <id>: <where>: <first>"
                if rest.startswith(where + ": ") and same(rest[len(where) + 2:]):
                    ids.append(ident)
            elif rest.startswith(f"- {where} (thread "):   # "- <where> (thread <id>; …)"
                m = _FEEDBACK_ROOT.match(rest[len(where) + 11:])
                if m and same(m.group(2)):
                    ids.append(int(m.group(1)))
        return ids

    def status(self, path: str, line: int | None, body: str) -> str:
        ids = self.ids_of(path, line, body)
        if any(i in self.fixed for i in ids):
            return "fixed"
        if any(self.resolved.get(i) or i in self.down for i in ids):
            return "dismissed"
        return "open"

