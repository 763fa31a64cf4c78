"""Turn raw token counts into disjoint, priced usage with the per-model cost table."""

from __future__ import annotations

from ..config import ModelSpec
from ..sessions.events import Usage
from .types import RawUsage


def priced(raw: RawUsage, spec: ModelSpec) -> Usage:
    cache_read = min(raw.cache_hit_tokens, raw.prompt_tokens)
    uncached = raw.prompt_tokens - cache_read
    if raw.cost_usd is not None:
        cost = raw.cost_usd  # billed by the provider: exact whatever it routed to
    else:
        cost = (uncached * spec.input + cache_read * spec.cache_read
                + raw.completion_tokens * spec.output) / 1_000_000
    return Usage(uncached_input=uncached, cache_read=cache_read, output=raw.completion_tokens,
                 cost_usd=round(cost, 10))
