"""Untrusted text (PR titles, bodies, diffs, comments) made safe for a prompt.

The steps run in the spec's order, repeated until nothing changes: one step can expose work for
an earlier one (``&#38;#65;`` decodes to ``&#65;``; removing a zero-width space can join the two
halves of a token), and every step that changes the text makes it shorter, so the loop ends and
the result is a fixed point — sanitizing twice gives the same text.
"""

from __future__ import annotations

import re
import unicodedata

from .text_cache import short_text_cache
from .triggers import defuse_markers

REDACTED = "[REDACTED_SECRET]"

_ENTITY = re.compile(r"&#(?:[xX]([0-9A-Fa-f]{1,8})|([0-9]{1,10}));")
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
_TAG = re.compile(r"<([A-Za-z][A-Za-z0-9-]*)(\s[^<>]*?)?(/?)>")
_HIDDEN_ATTR = re.compile(
    r"""\s+(?:alt|title|aria-label|placeholder|data-[A-Za-z0-9_.:-]*)"""
    r"""(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>]+))?""", re.I)
# Every image form: inline ![alt](url), full/collapsed reference ![alt][ref] / ![alt][], and
# shortcut ![alt] — the alt text is hidden prose in all of them.
_IMAGE_ALT = re.compile(r"!\[[^\]]+\]")
_LINK_TITLE = re.compile(r"""(\]\(\s*(?:<[^>]*>|[^\s()]+))\s+(?:"[^"]*"|'[^']*'|\([^()]*\))\s*\)""")
# A reference definition's title: [ref]: url "title"
_DEF_TITLE = re.compile(
    r"""^(\s{0,3}\[[^\]]+\]:\s*(?:<[^>]*>|\S+))\s+(?:"[^"]*"|'[^']*'|\([^()]*\))[ \t]*$""", re.M)
SECRET_PATTERNS = [
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|$)",
               re.S),
]


def _decode_entity(m: re.Match[str]) -> str:
    # The pattern admits only (hex) digits, so int() cannot fail; only printable ASCII decodes.
    code = int(m.group(1), 16) if m.group(1) else int(m.group(2))
    return chr(code) if 32 <= code <= 126 else ""


def _strip_attrs(m: re.Match[str]) -> str:
    attrs = _HIDDEN_ATTR.sub("", m.group(2) or "")
    return f"<{m.group(1)}{attrs}{m.group(3)}>"


def redact_secrets(text: str, keep_lines: bool = False) -> str:
    """Secrets become ``REDACTED``; with ``keep_lines`` a multi-line secret (a private key)
    leaves its newlines behind, so the line numbers of a file or diff stay right.

    Every text the bot posts that it did not compose itself passes here before the bot
    appends its own marker, so the bot's markers are defused here too (``defuse_markers``)."""
    return _redact(text, keep_lines)


# The summary redacts every finding's first line at every update: the same short texts.
@short_text_cache(max_chars=2000)
def _redact(text: str, keep_lines: bool) -> str:
    def replace(m: re.Match[str]) -> str:
        return REDACTED + "\n" * m.group(0).count("\n") if keep_lines else REDACTED
    for pattern in SECRET_PATTERNS:
        text = pattern.sub(replace, text)
    return defuse_markers(text)


def _visible(ch: str) -> bool:
    code = ord(ch)
    if ch in "\n\r\t":
        return True
    if code < 32 or code == 127 or 0x80 <= code <= 0x9F:
        return False
    return unicodedata.category(ch) != "Cf"


def remove_invisible(text: str) -> str:
    return "".join(ch for ch in text if _visible(ch))


def _once(text: str) -> str:
    text = _ENTITY.sub(_decode_entity, text)
    text = _COMMENT.sub("", text)
    text = _TAG.sub(_strip_attrs, text)
    text = _IMAGE_ALT.sub("![]", text)
    text = _LINK_TITLE.sub(r"\1)", text)
    text = _DEF_TITLE.sub(r"\1", text)
    text = redact_secrets(text)
    text = remove_invisible(text)
    return text.strip()


def sanitize_code(text: str | None) -> str:
    """Tool output (diffs, files): line numbers must survive, so only line-neutral steps run.

    HTML comments (a hiding place for instructions) become a marker plus the same number of
    newlines, secrets are redacted (a multi-line key keeps its newlines), invisible characters
    removed; nothing else changes.
    """
    if not text:
        return ""

    def hide(m: re.Match[str]) -> str:
        return "<!-- [comment removed] -->" + "\n" * m.group(0).count("\n")
    return remove_invisible(redact_secrets(_COMMENT.sub(hide, text), keep_lines=True))


def sanitize(text: str | None) -> str:
    if not text:
        return ""
    for _ in range(100):
        cleaned = _once(text)
        if cleaned == text:
            return cleaned
        text = cleaned
    return text


def sanitize_line(text: str | None, limit: int = 300) -> str:
    """A single-line field (PR title, login): sanitized, whitespace folded, length-capped."""
    return _fold(text, limit)


# A review lists the same paths, logins and first lines of the bot's threads at every turn of
# a PR: a pure function of its input, remembered for short texts.
@short_text_cache(max_chars=2000)
def _fold(text: str | None, limit: int) -> str:
    flat = " ".join(sanitize(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "…"

