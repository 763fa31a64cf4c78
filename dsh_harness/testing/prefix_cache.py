"""A deterministic stand-in for DeepSeek's context cache.

Tokens are estimated as 4 bytes of the canonical prompt rendering (tools, then one JSON line per
message, keys sorted — like a chat template, key order does not matter, content does). The cache
remembers every 64-token prefix of every request it has seen; a request's cache hit is its
longest prefix, in whole 64-token units, that an earlier request also had.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

BYTES_PER_TOKEN = 4
UNIT_TOKENS = 64


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> bytes:
    parts = [json.dumps(t, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
             for t in tools or []]
    parts += [json.dumps(m, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
              for m in messages]
    return "\n".join(parts).encode("utf-8")


def estimate_tokens(data: bytes | str) -> int:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return math.ceil(len(data) / BYTES_PER_TOKEN)


class PrefixCache:
    def __init__(self) -> None:
        self._prefixes: set[bytes] = set()

    def account(self, prompt: bytes) -> tuple[int, int]:
        """(prompt tokens, cache-hit tokens) for ``prompt``, then remember its prefixes."""
        total = estimate_tokens(prompt)
        unit = UNIT_TOKENS * BYTES_PER_TOKEN
        h = hashlib.sha256()
        hit_units = 0
        still_hitting = True
        for k in range(len(prompt) // unit):
            h.update(prompt[k * unit:(k + 1) * unit])
            digest = h.copy().digest()
            if still_hitting and digest in self._prefixes:
                hit_units = k + 1
            else:
                still_hitting = False
            self._prefixes.add(digest)
        return total, min(total, hit_units * UNIT_TOKENS)

    def clear(self) -> None:
        self._prefixes.clear()
