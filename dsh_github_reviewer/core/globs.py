"""Brace alternatives in path globs (``src/*.{ts,tsx}``), as the shells and .gitignore-style
tools read them: the docs promise them in every glob of the config (``review.exclude``, the
repository config's ``exclude`` and ``path_instructions``, ``applyTo``). ``fnmatch`` knows
no braces, so a pattern is expanded into its alternatives first; a pattern whose braces do not
pair up is refused where the config is validated, with the reason."""

from __future__ import annotations

from functools import lru_cache

BRACE_EXPANSIONS = 256   # one pattern's alternatives at most ({a,b}{c,d}... multiplies)


class GlobError(ValueError):
    """A glob whose braces do not pair up, or that expands to too many alternatives."""


def _brace_groups(pattern: str) -> tuple[int, int] | None:
    """The first top-level ``{...}`` that holds a comma: (start, end) indexes, or None."""
    depth, start = 0, -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise GlobError(f"{pattern!r}: a '}}' without its '{{'")
            if depth == 0 and split_top(pattern[start + 1:i]) != [pattern[start + 1:i]]:
                return start, i
    if depth:
        raise GlobError(f"{pattern!r}: a '{{' without its '}}'")
    return None


def split_top(text: str) -> list[str]:
    """``text`` split at the commas outside braces."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += (ch == "{") - (ch == "}")
        cur.append(ch)
    parts.append("".join(cur))
    return parts


@lru_cache(maxsize=1024)
def expand_braces(pattern: str) -> tuple[str, ...]:
    """``src/*.{ts,tsx}`` -> ``src/*.ts``, ``src/*.tsx`` (nested and repeated groups too, as in
    the shells and .gitignore-style tools); braces without a comma stay literal. Raises
    ``GlobError`` for unpaired braces or more than ``BRACE_EXPANSIONS`` alternatives."""
    group = _brace_groups(pattern)
    if group is None:
        return (pattern,)
    start, end = group
    out: list[str] = []
    for alt in split_top(pattern[start + 1:end]):
        for tail in expand_braces(pattern[:start] + alt + pattern[end + 1:]):
            if tail not in out:
                out.append(tail)
            if len(out) > BRACE_EXPANSIONS:
                raise GlobError(f"{pattern!r} expands to more than {BRACE_EXPANSIONS} "
                                "alternatives")
    return tuple(out)


def check_glob(pattern: str) -> str:
    """A config glob, validated where it is read (``GlobError`` names what is wrong)."""
    expand_braces(pattern)
    return pattern
