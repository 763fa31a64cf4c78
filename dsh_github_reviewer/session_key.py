"""Session ids of PR conversations: ``github:<account>:<owner>:<repo>:pr:<n>`` (spec §4)."""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "github"
_OUTSIDE = re.compile(r"[^A-Za-z0-9_.-]+")
_SEGMENT = r"([A-Za-z0-9_.-]+)"
_SESSION = re.compile(rf"^github:{_SEGMENT}:{_SEGMENT}:{_SEGMENT}:pr:([1-9][0-9]*)$")


def sanitize_account_name(name: str) -> str:
    """Runs of characters outside ``[A-Za-z0-9_.-]`` become one ``_``."""
    return _OUTSIDE.sub("_", name)


@dataclass(frozen=True)
class PrKey:
    account: str
    owner: str
    repo: str
    number: int

    @property
    def session_id(self) -> str:
        return (f"{PREFIX}:{sanitize_account_name(self.account)}:{self.owner.lower()}:"
                f"{self.repo.lower()}:pr:{self.number}")

    @property
    def cursor_key(self) -> str:
        """Key of the PR inside the account's cursor record: ``owner/repo#n``."""
        return f"{self.owner.lower()}/{self.repo.lower()}#{self.number}"

    @property
    def title(self) -> str:
        return f"Review {self.owner}/{self.repo} PR {self.number}"


def parse_session_id(session_id: str) -> PrKey | None:
    m = _SESSION.match(session_id)
    if not m:
        return None
    return PrKey(account=m.group(1), owner=m.group(2), repo=m.group(3), number=int(m.group(4)))
