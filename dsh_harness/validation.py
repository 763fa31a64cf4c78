"""Turn pydantic validation errors into messages with exact field paths.

Operators read these: ``dsh.toml: plugins.github-reviewer.accounts[0].repositories[2]: must be
owner/repo``. The offending *value* is never echoed, because it may be a secret.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import ValidationError


def format_loc(loc: Sequence[int | str], prefix: str = "") -> str:
    """Render a pydantic location tuple as ``a.b[0].c`` under an optional prefix."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(root)"


def error_lines(exc: ValidationError, prefix: str = "") -> list[str]:
    """One ``path: message`` line per validation error, values never included."""
    lines = []
    for err in exc.errors(include_url=False, include_input=False):
        msg = err["msg"]
        # pydantic prefixes messages of custom validators with "Value error, ".
        for noise in ("Value error, ", "Assertion failed, "):
            if msg.startswith(noise):
                msg = msg[len(noise) :]
        lines.append(f"{format_loc(err['loc'], prefix)}: {msg}")
    return lines


def join_errors(source: str, lines: Iterable[str]) -> str:
    return "\n".join(f"{source}: {line}" for line in lines)
