"""Session ids of PR conversations.

``github:<account>:<owner>:<repo>:pr:<n>`` is the PR's own conversation (the single reviewer,
or the team's coordinator in the daemon's history); a review team adds one session per persona,
``github:<account>:<owner>:<repo>:pr:<n>:persona:<name>`` (the coordinator is the persona
``coordinator``). Old ids parse exactly as before (``persona`` is None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

PREFIX = "github"
PERSONA_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_OUTSIDE = re.compile(r"[^A-Za-z0-9_.-]+")
_SEGMENT = r"([A-Za-z0-9_.-]+)"
_SESSION = re.compile(rf"^github:{_SEGMENT}:{_SEGMENT}:{_SEGMENT}:pr:([1-9][0-9]*)"
                      r"(?::persona:([a-z][a-z0-9_-]{0,31}))?$")


def sanitize_account_name(name: str) -> str:
    """Runs of characters outside ``[A-Za-z0-9_.-]`` become one ``_``."""
    return _OUTSIDE.sub("_", name)


@dataclass(frozen=True)
class PrKey:
    account: str
    owner: str
    repo: str
    number: int
    persona: str | None = None

    @property
    def session_id(self) -> str:
        base = (f"{PREFIX}:{sanitize_account_name(self.account)}:{self.owner.lower()}:"
                f"{self.repo.lower()}:pr:{self.number}")
        return f"{base}:persona:{self.persona}" if self.persona else base

    @property
    def record_key(self) -> str:
        """Key of the PR inside the account's work records: ``owner/repo#n``."""
        return f"{self.owner.lower()}/{self.repo.lower()}#{self.number}"

    @property
    def title(self) -> str:
        base = f"Review {self.owner}/{self.repo} PR {self.number}"
        return f"{base} · {self.persona}" if self.persona else base

    @property
    def pr(self) -> PrKey:
        """The PR itself, without a persona."""
        return replace(self, persona=None)

    def with_persona(self, persona: str) -> PrKey:
        if not PERSONA_RE.match(persona):
            raise ValueError(f"persona name {persona!r} must match {PERSONA_RE.pattern}")
        return replace(self, persona=persona)


def parse_session_id(session_id: str) -> PrKey | None:
    m = _SESSION.match(session_id)
    if not m:
        return None
    return PrKey(account=m.group(1), owner=m.group(2), repo=m.group(3), number=int(m.group(4)),
                 persona=m.group(5))
