"""How often the bot's findings are acted on, per PR and per repository — from what the bot
already records in its sessions, never from GitHub.

A PR's figures are folded with its other facts (``web.facts``): every inline finding its posted
reviews carried (once: a re-review repeating a finding at the same place with the same first
line is the same finding), and the status ``web.findings.FindingBook`` gives each — *fixed* (a
later review named its thread in ``fixedThreads``, which the bot then resolved), *dismissed*
(a person resolved its thread without a fix, or 👎 outnumber 👍 on it) or *open*. Suggestion
blocks posted are counted; whether GitHub's "apply suggestion" was used is not recorded
anywhere the bot reads, so no "applied" figure is claimed. "Over time" groups the findings by
the day they were posted (a cohort: of the findings posted that day, how many are fixed,
dismissed or open now).

A repository's figures add up its PRs (main sessions only: a team's personas post nothing)
with the cost of all its sessions: fixed / posted, dismissed / posted, open / posted, inline
findings per reviewed PR, cost per fixed finding.
"""

from __future__ import annotations

from typing import Any

from ..core.severity import SEVERITIES
from ..turn.told import ThreadPlace
from .findings import FindingBook

STATUSES = ("fixed", "dismissed", "open")


def dump_book(book: FindingBook) -> dict[str, Any]:
    return {"places": {str(i): [p.path, p.line, p.first] for i, p in book.places.items()},
            "legacy": [[i, rest] for i, rest in book.legacy],
            "fixed": sorted(book.fixed), "resolved": {str(i): v for i, v in book.resolved.items()},
            "voted_down": sorted(book.down)}


def load_book(raw: dict[str, Any] | None) -> FindingBook:
    book = FindingBook()
    if not raw:
        return book
    book.places = {int(i): ThreadPlace(path=p[0], line=p[1], first=p[2])
                   for i, p in raw.get("places", {}).items()}
    book.legacy = [(i, rest) for i, rest in raw.get("legacy", [])]
    book.fixed = set(raw.get("fixed", []))
    book.resolved = {int(i): bool(v) for i, v in raw.get("resolved", {}).items()}
    # "voted_down", not the old "down": that one counted anyone's 👎 (the PR author's too).
    book.down = set(raw.get("voted_down", []))
    return book


def posted_item(args: dict[str, Any]) -> dict[str, Any]:
    """What a posted inline finding needs for the figures (from the accepted call's args)."""
    body = str(args.get("body", ""))
    line = args.get("line")
    sev = args.get("severity")
    return {"path": str(args.get("path", "")),
            "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
            "first": body.split("\n", 1)[0], "severity": sev if sev in SEVERITIES else None,
            "suggestion": "```suggestion" in body}


def empty() -> dict[str, Any]:
    return {"posted": 0, "fixed": 0, "dismissed": 0, "open": 0, "suggestions": 0,
            "open_by_severity": {}, "days": {}}


def figures(posted: list[dict[str, Any]], book: FindingBook) -> dict[str, Any]:
    """A PR's figures: each distinct posted finding with its status now."""
    out = empty()
    seen: set[tuple] = set()
    for f in posted:
        ident = (f["path"], f["line"], f["first"])
        if ident in seen:
            continue
        seen.add(ident)
        status = book.status(f["path"], f["line"], f["first"])
        out["posted"] += 1
        out[status] += 1
        out["suggestions"] += bool(f.get("suggestion"))
        if status == "open" and f.get("severity"):
            sev = out["open_by_severity"]
            sev[f["severity"]] = sev.get(f["severity"], 0) + 1
        day = out["days"].setdefault(f.get("day") or "?", [0, 0, 0, 0])
        day[0] += 1
        day[1 + STATUSES.index(status)] += 1
    return out


def add(total: dict[str, Any], pr: dict[str, Any]) -> None:
    """Adds one PR's figures into a repository's."""
    for k in ("posted", "fixed", "dismissed", "open", "suggestions"):
        total[k] += pr.get(k, 0)
    for sev, n in pr.get("open_by_severity", {}).items():
        total["open_by_severity"][sev] = total["open_by_severity"].get(sev, 0) + n
    for day, counts in pr.get("days", {}).items():
        acc = total["days"].setdefault(day, [0, 0, 0, 0])
        for i, n in enumerate(counts):
            acc[i] += n


def rates(total: dict[str, Any], reviewed_prs: int, cost_usd: float) -> dict[str, Any]:
    """The repository's figures with their rates (None where the denominator is 0)."""
    posted = total["posted"]

    def pct(n: int) -> float | None:
        return round(100.0 * n / posted, 1) if posted else None
    return {**total, "days": dict(sorted(total["days"].items())),
            "fixed_pct": pct(total["fixed"]), "dismissed_pct": pct(total["dismissed"]),
            "open_pct": pct(total["open"]), "reviewed_prs": reviewed_prs,
            "findings_per_pr": round(posted / reviewed_prs, 2) if reviewed_prs else None,
            "cost_usd": round(cost_usd, 6),
            "cost_per_fixed_usd": round(cost_usd / total["fixed"], 6) if total["fixed"] else None}

