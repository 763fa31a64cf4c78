"""Turning session events into safe HTML pieces for the templates.

Markdown (assistant text) is rendered by markdown-it with raw HTML disabled, so any HTML in
model output is shown as text; markdown-it's link validation drops ``javascript:``, ``vbscript:``,
``file:`` and ``data:`` links. Tables (GitHub's pipe tables) render; an image never becomes an
``<img>`` (a page must not fetch what a model or a PR author names): it is a link to the image
when its address is http(s), else its text. Everything else reaches the page through Jinja's
autoescaping, and every value loses its bidirectional controls (``neutral``): a title or an id
holding U+202E cannot reorder what is shown around it. Links from data (a session's meta, a
hook) are kept only when they are http(s) web addresses (``web_url``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

RESULT_PREVIEW_CHARS = 4_000
MAX_POINTS = 90

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
# Embedding and isolate controls, marks: U+202A-U+202E, U+2066-U+2069, U+200E/F, U+061C.
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_UNSAFE_URL = re.compile(r"[\s\x00-\x1f\x7f\"'<>\\`]")


def web_url(value: Any) -> str | None:
    """``value`` when it is an http(s) address with a host, else None: a link taken from data
    (``javascript:``, ``data:``, a relative path, a value with spaces or quotes) is no link."""
    if not isinstance(value, str) or _UNSAFE_URL.search(value) or BIDI.search(value):
        return None
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or rest[0] in "/?#":
        return None
    return value


def neutral(value: Any) -> Any:
    """A template value without bidirectional controls (Markup stays Markup)."""
    if isinstance(value, Markup):
        return Markup(BIDI.sub("", str(value))) if BIDI.search(value) else value
    if isinstance(value, str):
        return BIDI.sub("", value)
    return value


def _image(renderer, tokens, idx, options, env) -> str:
    """An image as a link to it (http(s) only) or as its text: never an ``<img>``."""
    token = tokens[idx]
    alt = renderer.renderInlineAsText(token.children or [], options, env) or "image"
    url = web_url(token.attrGet("src"))
    if url is None:
        return str(escape(f"[image: {alt}]"))
    return str(Markup('<a class="ext image-link" href="{}" rel="noopener noreferrer">'
                      '[image: {}]</a>').format(url, alt))


_md.add_render_rule("image", _image)
# A Markdown link stays a link only to an http(s) address (no relative path into this UI).
_md.validateLink = lambda url: web_url(url) is not None


def markdown(text: str | None) -> Markup:
    return Markup(_md.render(BIDI.sub("", text or "")))


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


def when(value: Any) -> Markup:
    """A UTC time as ``<time>``; app.js rewrites it in the viewer's zone (shown with it)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        return Markup("")
    utc = value.astimezone(UTC)
    return Markup('<time datetime="{}">{} UTC</time>').format(
        utc.isoformat(), utc.strftime("%Y-%m-%d %H:%M:%S"))


def cost_chart(points: list[tuple[str, list]], caption: str) -> Markup:
    """Server-rendered SVG: cost per point as bars, cache-hit % as a line (no script).

    ``points`` are ``(label, [uncached input, cache read, output, cost])``.
    """
    if not points:
        return Markup("")
    if len(points) > MAX_POINTS:  # narrower bars than a pixel say nothing; keep it small
        caption = f"{caption} (last {MAX_POINTS} of {len(points)})"
        points = points[-MAX_POINTS:]
    w, h, pad, top = 640, 170, 34, 14
    n = len(points)
    step = (w - 2 * pad) / n
    peak = max(p[1][3] for p in points) or 1.0
    bars = []
    # The hit line has a point only where there were prompt tokens: a turn or a day without
    # any has no cache-hit rate (not 0 %), so the line breaks there.
    segments: list[list[tuple[float, float]]] = [[]]
    for i, (label, u) in enumerate(points):
        x = pad + i * step
        bh = (h - pad - top) * u[3] / peak
        prompt = u[0] + u[1]
        if prompt:
            hit = 100.0 * u[1] / prompt
            tip = (f"{label}: ${u[3]:.6f}, cache hit {hit:.1f}%, input {u[0]:,}, "
                   f"cache read {u[1]:,}")
            segments[-1].append((x + step / 2, h - pad - (h - pad - top) * hit / 100))
        else:
            tip = f"{label}: ${u[3]:.6f}, no prompt tokens"
            if segments[-1]:
                segments.append([])
        bars.append(Markup('<rect class="bar" x="{:.1f}" y="{:.1f}" width="{:.1f}" '
                           'height="{:.1f}"><title>{}</title></rect>').format(
            x + step * 0.1, h - pad - bh, max(step * 0.8, 1), bh, tip))
    dots = [d for seg in segments for d in seg]
    line = Markup("").join(
        Markup('<polyline class="hit" points="{}"/>').format(
            " ".join(f"{x:.1f},{y:.1f}" for x, y in seg)) for seg in segments if len(seg) > 1)
    marks = Markup("").join(Markup('<circle class="dot" cx="{:.1f}" cy="{:.1f}" r="2.5"/>'
                                   ).format(x, y) for x, y in dots)
    first, last = points[0][0], points[-1][0]
    return Markup(
        '<figure class="chart"><svg viewBox="0 0 {w} {h}" role="img" aria-label="{cap}">'
        '<line class="axis" x1="{pad}" y1="{base}" x2="{right}" y2="{base}"/>'
        '{bars}{line}{marks}'
        '<text x="2" y="{ty}">${peak}</text><text x="{right}" y="{ty}" text-anchor="end">'
        'hit 100%</text><text x="{pad}" y="{ly}">{first}</text>'
        '<text x="{right}" y="{ly}" text-anchor="end">{last}</text></svg>'
        '<figcaption>{cap} <span class="key-bar">bars: cost</span> '
        '<span class="key-hit">line: cache hit %</span></figcaption></figure>').format(
        w=w, h=h, pad=pad, base=h - pad, right=w - pad, bars=Markup("").join(bars), marks=marks,
        line=line, ty=top - 2, peak=f"{peak:.4f}", ly=h - pad + 16, first=first, last=last,
        cap=caption)


def turn_chart(per_turn: list) -> Markup:
    return cost_chart([(f"turn {t[0]}" + (f" ({t[3]})" if t[3] else ""), t[2])
                       for t in per_turn], "Cost and cache hits per turn")


def every_day(days: dict[str, list]) -> list[tuple[str, list]]:
    """``(YYYY-MM-DD, usage)`` from the first day to the last, days without activity at zero
    (a gap in the data is a gap on the axis, not two bars side by side)."""
    if not days:
        return []
    try:
        first, last = (date.fromisoformat(d) for d in (min(days), max(days)))
    except ValueError:  # not ISO days: as they are
        return sorted(days.items())
    out = []
    day = first
    while day <= last:
        key = day.isoformat()
        out.append((key, days.get(key, [0, 0, 0, 0.0])))
        day += timedelta(days=1)
    return out


def day_chart(days: dict[str, list], caption: str = "Cost and cache hits per day") -> Markup:
    return cost_chart(every_day(days), caption)
