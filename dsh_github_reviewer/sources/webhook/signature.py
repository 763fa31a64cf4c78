"""``X-Hub-Signature-256`` verification (GitHub: ``sha256=<hex HMAC-SHA256 of the raw body>``).

Checked against the raw bytes before anything parses them, with ``hmac.compare_digest`` so the
time taken does not tell an attacker how much of a forged signature was right. Several accounts
may have different secrets: every configured secret is tried (each comparison constant time) and
the matching ones are returned, so the caller can require that the account the payload names is
one the signature vouches for.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable

_HEADER = re.compile(r"^sha256=([0-9a-fA-F]{64})$")


def sign(secret: str, body: bytes) -> str:
    """The header value GitHub would send for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def matching_secrets(header: str | None, body: bytes, secrets: Iterable[str]) -> set[str]:
    """The secrets among ``secrets`` that signed ``body``; empty when unsigned or forged."""
    m = _HEADER.match((header or "").strip())
    if m is None:
        return set()
    given = m.group(1).lower().encode()
    out = set()
    for secret in secrets:
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest().encode()
        if hmac.compare_digest(expected, given):
            out.add(secret)
    return out
