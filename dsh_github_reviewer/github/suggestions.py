"""GitHub suggestions: a fenced block with the info string ``suggestion`` in a review comment.

Its lines replace the commented range (``start_line``..``line`` of the new file) when the
author applies it. GitHub rejects a whole review (422) over one suggestion whose range is not
on the RIGHT side inside one diff hunk, so the guard refuses such a comment before anything is
posted, and the sandbox GitHub rejects it like GitHub does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*suggestion[ \t]*$")


@dataclass(frozen=True)
class Suggestion:
    lines: list[str]   # the replacement for the commented range


class SuggestionError(ValueError):
    pass


def suggestions(body: str) -> list[Suggestion]:
    """Every suggestion block of a comment body; an unclosed one is an error (GitHub would
    render the rest of the comment as its replacement)."""
    out: list[Suggestion] = []
    lines = body.split("\n")
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(1)
        close = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        for j in range(i + 1, len(lines)):
            if close.match(lines[j]):
                out.append(Suggestion(lines[i + 1:j]))
                i = j + 1
                break
        else:
            raise SuggestionError("the ```suggestion block is not closed; end it with ``` on "
                                  "its own line")
    return out


def one_suggestion(body: str) -> Suggestion | None:
    found = suggestions(body)
    if len(found) > 1:
        raise SuggestionError(f"{len(found)} ```suggestion blocks in one comment; GitHub "
                              "applies one per comment: put one in each comment, or one "
                              "block covering the whole commented range")
    return found[0] if found else None
