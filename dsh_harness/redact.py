"""Keeping configured secrets out of session logs, model requests, pages and JSON answers.

Sessions redact every text they record (``Session.record``), so a secret that reaches a turn
(a PR body, a tool result, model output) is stored and replayed as ``[REDACTED_SECRET]``. The
web UI redacts again on display (logs written before this rule, text outside sessions).

Redaction happens on the raw text, before any escaping: Jinja's ``finalize`` sees each value
before autoescaping, filters that transform text (Markdown, pretty JSON) redact their input, and
JSON answers are redacted as data before ``json.dumps``. A secret containing ``& < > " '`` would
otherwise survive as ``&amp;…`` or ``\\"…`` in the output. Logged text holds secrets in encoded
forms too — a tool result from github-mcp-server is Go JSON, which writes ``&<>`` as
``\\u0026\\u003c\\u003e``; JSON text inside JSON doubles the backslashes; Markdown turns
character references into characters — so every such form of each secret is replaced, in the
raw text and, as a last line (``scrub``), in the finished body.
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote, quote_plus

from markupsafe import Markup, escape
from pydantic import BaseModel

REDACTED = "[REDACTED_SECRET]"
MIN_SECRET = 8


# Characters JSON encoders write as \\uXXXX to keep JSON safe inside HTML (Go's encoding/json,
# which github-mcp-server uses; others also escape the quote, some in upper-case hex).
_HTML_SAFE_JSON = ("&<>", "&<>'", "&<>'\"")


def _json_forms(s: str) -> set[str]:
    forms = {json.dumps(s, ensure_ascii=False)[1:-1], json.dumps(s)[1:-1]}
    for chars in _HTML_SAFE_JSON:
        for hexfmt in ("\\u{:04x}", "\\u{:04X}"):
            text = "".join(hexfmt.format(ord(c)) if c in chars else c
                           for c in json.dumps(s, ensure_ascii=False)[1:-1].replace('\\"', '"'))
            forms.add(text if '"' in chars else text.replace('"', '\\"'))
    return forms


def _html_forms(s: str) -> set[str]:
    """How HTML writers escape it: markupsafe (``&#34;``), html.escape (``&quot;``, ``&#x27;``),
    markdown-it (``&quot;``, ``'`` as is)."""
    return {s, str(escape(s)), html.escape(s), html.escape(s, quote=False),
            html.escape(s, quote=False).replace('"', "&quot;")}


def encoded_forms(secret: str) -> set[str]:
    """The secret as it can appear in logged text and in a page or JSON answer."""
    plain = {secret, *_json_forms(secret)}
    plain |= {f for p in list(plain) for f in _json_forms(p)}  # JSON text inside JSON
    forms = {f for p in plain for f in _html_forms(p)}
    forms |= {quote(secret, safe=""), quote(secret), quote_plus(secret)}
    return forms


class Redactor:
    def __init__(self, secrets: list[str]):
        raw = sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True)
        self.raw = raw
        forms: set[str] = set()
        for s in raw:
            forms |= encoded_forms(s)
        self.forms = sorted(forms, key=len, reverse=True)

    def text(self, value: str) -> str:
        # Returns ``value`` itself when nothing is replaced (``deep`` relies on it).
        # Every form, not only the raw one: tool-call arguments are JSON text, where a secret
        # with a quote appears as ``\"``.
        for form in self.forms:
            if form in value:
                value = value.replace(form, REDACTED)
        return value

    def __bool__(self) -> bool:
        return bool(self.forms)

    def deep(self, value: Any) -> Any:
        """``data`` that also goes into pydantic models (an event's tool calls), copying only
        what changes, so text without a secret keeps its objects (and its bytes)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, BaseModel):
            changes = {}
            for name in type(value).model_fields:
                old = getattr(value, name)
                new = self.deep(old)
                if new is not old:
                    changes[name] = new
            return value.model_copy(update=changes) if changes else value
        if isinstance(value, dict):
            out = {(self.text(k) if isinstance(k, str) else k): self.deep(v)
                   for k, v in value.items()}
            unchanged = out.keys() == value.keys() and all(out[k] is v for k, v in value.items())
            return value if unchanged else out
        if isinstance(value, list | tuple):
            items = [self.deep(v) for v in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            return type(value)(items) if isinstance(value, tuple) else items
        return value

    def finalize(self, value: Any) -> Any:
        """Jinja ``finalize``: every ``{{ … }}`` value passes here before it is escaped."""
        if isinstance(value, Markup):
            return Markup(self.scrub(str(value)))
        if isinstance(value, str):
            return self.text(value)
        return value

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    scrub = text  # the same replacement, applied again to a finished body
