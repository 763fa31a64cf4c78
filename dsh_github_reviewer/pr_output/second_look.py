"""The second look's part of the PR's summary comment: the findings it dropped before posting,
each with the verifier's reason, in a collapsed section (never lost), and what the verifier's
own session cost, apart from the reviews'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.sanitizer import redact_secrets

SHOWN = 50


@dataclass(frozen=True)
class DroppedFinding:
    path: str
    line: int | None
    severity: str
    text: str
    reason: str


def _cell(text: str) -> str:
    """One line of model text inside the collapsed section: no tag in it can close the
    section or open another (GitHub renders HTML in comments), so ``<`` and ``>`` are
    entities."""
    text = redact_secrets(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(text.split())


def render_second_look(dropped: Sequence[DroppedFinding], cost_usd: float = 0.0,
                       prompt_tokens: int = 0, cache_read_tokens: int = 0) -> str:
    """"" when there is nothing to say (no second look ran on this PR)."""
    parts = []
    if dropped:
        rows = [f"- `{_cell(d.path + (f':{d.line}' if d.line else ''))}` [{d.severity}] "
                f"{_cell(d.text)[:200]} — **dropped:** {_cell(d.reason)[:300]}"
                for d in dropped[:SHOWN]]
        more = len(dropped) - SHOWN
        parts.append(f"<details><summary>Second look: {len(dropped)} drafted finding"
                     f"{'' if len(dropped) == 1 else 's'} dropped before posting</summary>\n\n"
                     + "\n".join(rows) + (f"\n- …and {more} more" if more > 0 else "")
                     + "\n\n</details>")
    if prompt_tokens:
        hit = 100.0 * cache_read_tokens / prompt_tokens
        parts.append(f"Cost of the second look (its own session): ${cost_usd:.4f} · prompt "
                     f"cache hit {hit:.0f} %")
    return "\n\n".join(parts)
