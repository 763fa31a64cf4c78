"""Reads and writes of one account's work records (see ``records`` for the layout).

Every change is a read-modify-write of ONE record under the domain's write lock, or several
records in one ``Domain.transaction()`` (one atomic write), so concurrent PR workers never
overwrite each other and a crash never leaves half of a change.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from dsh_harness import Domain, DomainSpec

from ..core.session_key import PrRef
from .lessons import LESSONS, LessonBook
from .records import (
    ACCOUNTS,
    DOMAIN,
    DOMAIN_VERSION,
    INSTRUCTIONS,
    PRS,
    AccountRecord,
    InstructionsRecord,
    PrRecord,
    migrate_v1,
)
from .second_look import SECOND_LOOKS, SecondLooks

T = TypeVar("T")


def domain_spec() -> DomainSpec:
    return DomainSpec(name=DOMAIN, version=DOMAIN_VERSION,
                      tables={ACCOUNTS: AccountRecord, PRS: PrRecord,
                              INSTRUCTIONS: InstructionsRecord, LESSONS: LessonBook,
                              SECOND_LOOKS: SecondLooks},
                      migrations={1: migrate_v1})


class WorkStore:
    """One account's view of the domain: its account record and its PR records."""

    def __init__(self, domain: Domain, account: str):
        self.domain, self.account = domain, account
        self.accounts = domain.table(ACCOUNTS)
        self.prs_table = domain.table(PRS)
        self.instructions_table = domain.table(INSTRUCTIONS)

    # -- account record ---------------------------------------------------------------------

    async def load_account(self) -> AccountRecord:
        return await self.accounts.get(self.account) or AccountRecord()

    async def update_account(self, fn: Callable[[AccountRecord], None]) -> AccountRecord:
        def apply(current: AccountRecord | None) -> AccountRecord:
            record = current or AccountRecord()
            fn(record)
            return record
        return await self.accounts.update(self.account, apply)

    # -- PR records -------------------------------------------------------------------------

    async def pr(self, ref: PrRef) -> PrRecord | None:
        return await self.prs_table.get(stored_key(ref))

    async def update_pr(self, ref: PrRef, fn: Callable[[PrRecord | None], PrRecord | None]
                        ) -> PrRecord | None:
        return await self.prs_table.update(stored_key(ref), fn)

    async def prs(self) -> dict[PrRef, PrRecord]:
        """Every PR record of this account (a scan: for start-up and status, not per PR);
        each stored key is parsed here, once."""
        refs = ((PrRef.parse(k), r) for k, r in (await self.prs_table.all()).items())
        return {ref: r for ref, r in refs if ref.account == self.account}

    async def mark_draft(self, ref: PrRef, head_sha: str | None = None) -> None:
        """The PR was found a draft when its work was about to run: the work waits (no
        attempt is counted) until a poll or a delivery sees it ready for review. ``head_sha``:
        the base config was read for this head and does not review drafts."""
        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None:
                e.draft = True
                e.draft_waits = head_sha or e.draft_waits
            return e
        await self.update_pr(ref, apply)

    async def delete_pr(self, ref: PrRef) -> bool:
        return await self.prs_table.delete(stored_key(ref))

    # -- instructions -----------------------------------------------------------------------

    async def instructions(self, key: str | None) -> InstructionsRecord | None:
        return None if key is None else await self.instructions_table.get(key)

    async def start_review(self, ref: PrRef, instructions: InstructionsRecord | None,
                           fn: Callable[[PrRecord | None], PrRecord]) -> PrRecord:
        """Store the instructions (once per content) and the PR's ``reviewing`` state in one
        atomic write, before the model runs."""
        async with self.domain.transaction() as tx:
            if instructions is not None and await tx.get(INSTRUCTIONS, instructions.key) is None:
                tx.put(INSTRUCTIONS, instructions.key, instructions)
            return await tx.update(PRS, stored_key(ref), fn)


def stored_key(ref: PrRef) -> str:
    """The storage key of a PR's record: the only place the typed reference becomes its
    string. A string here would be a key built or split by hand: refused."""
    if not isinstance(ref, PrRef):
        raise TypeError(f"a PR record is addressed by a PrRef, not {type(ref).__name__}")
    return ref.format()


def utc_iso(value: datetime | None) -> str | None:
    from datetime import UTC

    return value.astimezone(UTC).isoformat(timespec="seconds") if value else None
