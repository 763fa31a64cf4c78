"""The status of the bot's findings (open, fixed, dismissed) as the PR's session log tells it,
for the PR page: the page must not call GitHub, and the log already holds what the bot was told
and did — the open threads a re-review listed (thread id, place, text), the threads each submit
named as fixed (``fixedThreads``), and people's feedback (a thread resolved by someone, reopened,
voted down)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..core import severity

_OPEN = re.compile(r"^- thread (\d+): (\S+?): (.*)$", re.M)
_FEEDBACK = re.compile(r"^- (\S+) \(thread (\d+); your comment: (.*)\)$", re.M)
_RESOLVED = re.compile(r"^  thread (\d+) resolved(?: by .+)?$", re.M)
_REOPENED = re.compile(r"^  thread (\d+) unresolved again", re.M)
_VOTES = re.compile(r"^  thread (\d+) reactions: \+1 x(\d+), -1 x(\d+)$", re.M)


def _key(text: str) -> str:
    return " ".join(severity.parse(text.strip())[1].split())[:40]


@dataclass
class FindingBook:
    threads: dict[int, tuple[str, str]] = field(default_factory=dict)
    fixed: set[int] = field(default_factory=set)
    resolved: dict[int, bool] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)

    def told(self, text: str) -> None:
        """A review turn's user message."""
        for ident, where, first in _OPEN.findall(text):
            self.threads[int(ident)] = (where, _key(first))
        for where, ident, first in _FEEDBACK.findall(text):
            self.threads.setdefault(int(ident), (where, _key(first)))
        for ident in _RESOLVED.findall(text):
            self.resolved[int(ident)] = True
        for ident in _REOPENED.findall(text):
            self.resolved[int(ident)] = False
            self.fixed.discard(int(ident))
        for ident, up, down in _VOTES.findall(text):
            (self.down.add if int(down) > int(up) else self.down.discard)(int(ident))

    def submitted(self, args: dict[str, Any]) -> None:
        fixed = args.get("fixedThreads")
        if isinstance(fixed, list):
            self.fixed.update(i for i in fixed if isinstance(i, int))

    def status(self, path: str, line: int | None, body: str) -> str:
        where, key = f"{path}:{line}" if line else path, _key(body.split("\n", 1)[0])
        ids = [i for i, (w, k) in self.threads.items()
               if w == where and (key.startswith(k) or k.startswith(key))]
        if any(i in self.fixed for i in ids):
            return "fixed"
        if any(self.resolved.get(i) or i in self.down for i in ids):
            return "dismissed"
        return "open"
