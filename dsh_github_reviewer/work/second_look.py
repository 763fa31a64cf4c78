"""The second look's outcomes, kept per PR (table ``second_looks`` of the reviewer's domain,
key = the PR record's key), and what the summary comment shows of them.

An outcome is saved before its review is posted (``TurnExtras.save_second_look``), so a crash
after the post still lists the dropped findings; the newest ``KEPT`` outcomes of a PR are kept
(one per trigger: a retried review replaces its own).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import Field

from ..core.session_key import PrRef
from ..turn.second_look import SecondLookOutcome
from .records import Record

SECOND_LOOKS = "second_looks"
KEPT = 20


class SecondLooks(Record):
    outcomes: list[SecondLookOutcome] = Field(default_factory=list)


def saver(domain: Any, ref: PrRef) -> Callable[[SecondLookOutcome], Awaitable[None]]:
    async def save(outcome: SecondLookOutcome) -> None:
        def apply(rec: SecondLooks | None) -> SecondLooks:
            rec = rec or SecondLooks()
            rec.outcomes = [o for o in rec.outcomes if o.trigger != outcome.trigger]
            rec.outcomes.append(outcome)
            del rec.outcomes[:-KEPT]
            return rec
        await domain.table(SECOND_LOOKS).update(ref.format(), apply)
    return save


async def outcomes(domain: Any, ref: PrRef) -> list[SecondLookOutcome]:
    rec = await domain.table(SECOND_LOOKS).get(ref.format())
    return list(rec.outcomes) if rec is not None else []
