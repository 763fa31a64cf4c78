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
    def ref(self) -> PrRef:
        """The typed reference of the PR's work record (no persona: one record per PR)."""
        return PrRef(self.account, f"{self.owner}/{self.repo}", self.number)

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


@dataclass(frozen=True, order=True)
class PrRef:
    """The PR a work record is about: ``<account>:<owner>/<repo>#<n>`` on the wire.

    The typed value is what code passes around; the string is only the storage key
    (``format``), read back with ``parse``. The wire layout is the one records were always
    stored under, so old records keep loading. ``repo`` is ``owner/name``, lower-cased like
    GitHub compares it.
    """

    account: str
    repo: str
    number: int

    def __post_init__(self) -> None:
        if not self.account or ":" in self.account:
            raise ValueError(f"PR account {self.account!r} must be non-empty without ':'")
        owner, sep, name = self.repo.partition("/")
        if not (sep and owner and name) or "/" in name or "#" in self.repo:
            raise ValueError(f"PR repository {self.repo!r} must be <owner>/<name>")
        if isinstance(self.number, bool) or not isinstance(self.number, int) or self.number < 1:
            raise ValueError(f"PR number {self.number!r} must be a positive integer")
        object.__setattr__(self, "repo", self.repo.lower())

    @classmethod
    def parse(cls, key: str) -> PrRef:
        """A stored record key back to its reference; a ValueError names the key."""
        account, sep, rest = str(key).partition(":")
        repo, hash_, number = rest.rpartition("#")
        if not (sep and hash_) or not number.isascii() or not number.isdigit():
            raise ValueError(f"not a PR record key (want <account>:<owner>/<repo>#<n>): {key!r}")
        try:
            return cls(account, repo, int(number))
        except ValueError as exc:
            raise ValueError(f"not a PR record key {key!r}: {exc}") from None

    def format(self) -> str:
        return f"{self.account}:{self.repo}#{self.number}"

    __str__ = format

    @classmethod
    def parse_v1(cls, account: str, key: str) -> PrRef:
        """A version-1 key (``<owner>/<repo>#<n>``, inside the account's own record) as the
        reference of that account's PR; only the v1 migration reads these."""
        repo, hash_, number = str(key).rpartition("#")
        if not hash_ or not number.isascii() or not number.isdigit():
            raise ValueError(f"not a version-1 PR key (want <owner>/<repo>#<n>): {key!r}")
        return cls(account, repo, int(number))

    @property
    def owner(self) -> str:
        """The repository's owner (lower case)."""
        return self.repo.partition("/")[0]

    @property
    def name(self) -> str:
        """The repository's name without its owner (lower case)."""
        return self.repo.partition("/")[2]

    def session(self, persona: str | None = None) -> PrKey:
        """The id parts of this PR's conversation (``persona``: a team member's or the
        verifier's session)."""
        return PrKey(self.account, self.owner, self.name, self.number, persona)


def parse_session_id(session_id: str) -> PrKey | None:
    m = _SESSION.match(session_id)
    if not m:
        return None
    return PrKey(account=m.group(1), owner=m.group(2), repo=m.group(3), number=int(m.group(4)),
                 persona=m.group(5))
