"""Unified-diff hunks: which lines of a file a review comment may point at.

GitHub accepts (or, through GraphQL, silently drops) a line comment depending on whether the
line is inside a hunk of the PR's diff: on the RIGHT side an added or context line of the new
file, on the LEFT side a removed or context line of the old file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class CommentableLines:
    right: set[int] = field(default_factory=set)
    left: set[int] = field(default_factory=set)
    # Each hunk's RIGHT lines as (first, last) of the new file: a suggestion's range must lie
    # inside one of them.
    right_hunks: list[tuple[int, int]] = field(default_factory=list)

    def right_hunk(self, start: int, end: int) -> tuple[int, int] | None:
        """The hunk holding new-file lines start..end, if one does."""
        return next(((a, b) for a, b in self.right_hunks if a <= start and end <= b), None)

    def hunk_ranges(self) -> str:
        return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in self.right_hunks
                         if a <= b) or "none"

    def allows(self, side: str, line: int) -> bool:
        return line in (self.right if side == "RIGHT" else self.left)

    def nearest(self, side: str, line: int, count: int = 3) -> list[int]:
        pool = sorted(self.right if side == "RIGHT" else self.left)
        return sorted(sorted(pool, key=lambda n: (abs(n - line), n))[:count])

    def ranges(self, side: str) -> str:
        """Compact description, e.g. ``10-14, 30-35``."""
        pool = sorted(self.right if side == "RIGHT" else self.left)
        if not pool:
            return "none"
        out, start, prev = [], pool[0], pool[0]
        for n in pool[1:]:
            if n != prev + 1:
                out.append(f"{start}-{prev}" if start != prev else str(start))
                start = n
            prev = n
        out.append(f"{start}-{prev}" if start != prev else str(start))
        return ", ".join(out)


def commentable_lines(patch: str | None) -> CommentableLines:
    lines = CommentableLines()
    if not patch:
        return lines
    old = new = first_new = 0
    in_hunk = False
    for raw in patch.split("\n"):
        m = _HUNK.match(raw)
        if m:
            old, new, in_hunk = int(m.group(1)), int(m.group(3)), True
            first_new = new
            lines.right_hunks.append((first_new, first_new - 1))
            continue
        if not in_hunk or raw.startswith("\\"):
            continue  # "\ No newline at end of file"
        tag = raw[:1]
        if tag in ("+", " "):
            lines.right_hunks[-1] = (first_new, new)
        if tag == "+":
            lines.right.add(new)
            new += 1
        elif tag == "-":
            lines.left.add(old)
            old += 1
        elif tag == " ":
            lines.right.add(new)
            lines.left.add(old)
            old += 1
            new += 1
    return lines
