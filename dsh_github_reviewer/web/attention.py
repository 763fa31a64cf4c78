"""What needs a maintainer: the PRs of the list that a person should look at, and why.

A PR is listed (``reasons``) when:

* ``critical`` / ``major`` — a finding of that severity is still open (``web.noise``);
* ``failed`` — its owed review failed and waits for a retry (a failure count, an error) or the
  bot gave up on it (``gave_up``, a give-up notice not overtaken by a later review's start);
* ``paused`` — its work waits on a pause: ``/bot pause`` holds an owed automatic review, a rate
  limit put it off (``not_before``), or its account is paused (a rejected token or model key).

Closed and merged PRs are never listed (nothing can be done on them). Reads only what the PR
list already holds (facts and cached work records) and each account's record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..work.records import AccountRecord, PrRecord

REASONS = ("critical", "major", "failed", "paused")
REASON_WORDS = {"critical": "open critical finding", "major": "open major finding",
                "failed": "failed or given up", "paused": "waiting on a pause"}


@dataclass
class Attention:
    row: Any
    reasons: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)

    def matches(self, q: str) -> bool:
        hay = " ".join([*self.why, *self.reasons]).lower()
        return all(w in hay or self.row.matches(w) for w in q.lower().split())


def reasons_of(row: Any, rec: PrRecord | None, account: AccountRecord | None,
               now: datetime) -> Attention:
    out = Attention(row)
    if (row.shown_state or "open") in ("closed", "merged"):
        return out
    open_sev = (row.noise or {}).get("open_by_severity", {})
    for sev in ("critical", "major"):
        if open_sev.get(sev):
            out.reasons.append(sev)
            out.why.append(f"{open_sev[sev]} open {sev} finding"
                           + ("" if open_sev[sev] == 1 else "s"))
    if rec is not None:
        # A notice is kept after it is posted; one older than the last review's start was
        # overtaken by that review (a new head, a /review) and needs nobody now.
        since = rec.last_review_started_at
        standing = [n for n in rec.notices if since is None or n.created_at >= since]
        if rec.status == "gave_up" or standing:
            out.reasons.append("failed")
            last = standing[-1] if standing else None
            out.why.append(f"gave up on {last.what}: {last.error}" if last else
                           f"gave up: {rec.last_error or 'see the status page'}")
        elif rec.status == "reviewing" and rec.fail_count:
            out.reasons.append("failed")
            out.why.append(f"failed {rec.fail_count}×: {rec.last_error or 'no error recorded'}")
        paused = []
        if rec.waits_for_resume:
            paused.append(f"paused by {rec.paused_by} with /bot pause")
        if rec.status == "reviewing" and rec.not_before is not None and rec.not_before > now:
            paused.append(f"put off until {rec.not_before.isoformat(timespec='seconds')}")
        if rec.status == "reviewing" and account is not None and account.paused_until \
                and account.paused_until > now:
            paused.append(f"account paused until "
                          f"{account.paused_until.isoformat(timespec='seconds')}: "
                          f"{account.pause_reason or ''}".rstrip(": "))
        if paused:
            out.reasons.append("paused")
            out.why += paused
    return out


def counts(items: list[Attention]) -> dict[str, dict[str, int]]:
    """Per repository: how many PRs per reason, and open findings per severity."""
    out: dict[str, dict[str, int]] = {}
    for a in items:
        c = out.setdefault(a.row.repo, {**{r: 0 for r in REASONS}, "prs": 0,
                                        "open_critical": 0, "open_major": 0})
        c["prs"] += 1
        for r in a.reasons:
            c[r] += 1
        sev = (a.row.noise or {}).get("open_by_severity", {})
        c["open_critical"] += sev.get("critical", 0)
        c["open_major"] += sev.get("major", 0)
    return dict(sorted(out.items()))
