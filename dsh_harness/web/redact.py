"""Keeping configured secrets out of every page and JSON answer.

Redaction happens on the raw text, before any escaping: Jinja's ``finalize`` sees each value
before autoescaping, filters that transform text (Markdown, pretty JSON) redact their input, and
JSON answers are redacted as data before ``json.dumps``. A secret containing ``& < > " '`` would
otherwise survive as ``&amp;…`` or ``\\"…`` in the output. As a last line, ``scrub`` also
replaces the HTML- and JSON-escaped forms of each secret in the finished body.
"""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup, escape

REDACTED = "[REDACTED_SECRET]"
MIN_SECRET = 8


class Redactor:
    def __init__(self, secrets: list[str]):
        raw = sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True)
        self.raw = raw
        forms = set(raw)
        for s in raw:
            forms.add(str(escape(s)))
            forms.add(json.dumps(s, ensure_ascii=False)[1:-1])
            forms.add(json.dumps(s)[1:-1])
        self.forms = sorted(forms, key=len, reverse=True)

    def text(self, value: str) -> str:
        # Every form, not only the raw one: tool-call arguments are JSON text, where a secret
        # with a quote appears as ``\"``.
        for form in self.forms:
            if form in value:
                value = value.replace(form, REDACTED)
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
