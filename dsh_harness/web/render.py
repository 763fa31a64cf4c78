"""Turning session events into safe HTML pieces for the templates.

Markdown (assistant text) is rendered by markdown-it with raw HTML disabled, so any HTML in
model output is shown as text; markdown-it's link validation drops ``javascript:``, ``vbscript:``,
``file:`` and ``data:`` links. Everything else reaches the page through Jinja's autoescaping.
"""

from __future__ import annotations

import json
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

RESULT_PREVIEW_CHARS = 4_000

_md = MarkdownIt("commonmark", {"html": False, "linkify": False})


def markdown(text: str | None) -> Markup:
    return Markup(_md.render(text or ""))


def pretty_args(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False, sort_keys=True)
    except (json.JSONDecodeError, TypeError):
        return arguments


def preview(text: str, limit: int = RESULT_PREVIEW_CHARS) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def usage_line(usage: Any) -> str:
    prompt = usage.uncached_input + usage.cache_read
    pct = f"{100 * usage.cache_read / prompt:.1f}%" if prompt else "-"
    return (f"input {usage.uncached_input:,} · cache read {usage.cache_read:,} ({pct}) · "
            f"output {usage.output:,} · ${usage.cost_usd:.6f}")
