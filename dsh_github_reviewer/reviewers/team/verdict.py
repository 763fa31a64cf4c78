"""The verdict line of a team review, enforced by code (fail closed).

A persona that produced nothing (error, timeout, empty answer) must never read as "no
findings". The coordinator is told which personas did not complete, but the model is not
trusted to act on it: ``finalize`` replaces whatever verdict the body carries with
``Verdict: cannot merge: <personas> did not complete`` and says which reviewer failed. With
every persona complete the coordinator's verdict stands; a body without one fails closed too.
"""

from __future__ import annotations

import re

VERDICT_LINE = re.compile(r"^[\s*_>#-]*verdict[\s*_]*:", re.I)
CAN_MERGE = "Verdict: can merge"


_CAN_MERGE = re.compile(r"verdict\s*:\s*can merge\s*[.!]?\s*$", re.I)


def can_merge(line: str | None) -> bool:
    """True only for the plain "can merge" verdict; "cannot merge: …" and no verdict fail."""
    return bool(line and _CAN_MERGE.match(line.strip().strip("*_> ").strip()))


def failed_verdict(failed: list[str]) -> str:
    return f"Verdict: cannot merge: {', '.join(failed)} did not complete"


def verdict_of(body: str | None) -> str | None:
    """The last verdict line of a review body (stripped of Markdown emphasis), or None."""
    found = None
    for line in (body or "").splitlines():
        if VERDICT_LINE.match(line):
            found = line.strip().strip("*_> ").strip()
    return found


def finalize(body: str, failed: list[str]) -> str:
    lines = body.rstrip().splitlines()
    if failed:
        kept = "\n".join(line for line in lines if not VERDICT_LINE.match(line)).rstrip()
        which = ", ".join(f"**{name}**" for name in failed)
        note = (f"Incomplete review: the {which} reviewer{'s' if len(failed) > 1 else ''} "
                "did not complete (error, timeout or empty answer), so this review does not "
                "cover that concern. It must not be read as \"no findings\"; re-run the review.")
        return f"{kept}\n\n{note}\n\n{failed_verdict(failed)}".lstrip()
    if verdict_of(body) is None:
        return f"{body.rstrip()}\n\nVerdict: cannot merge: the coordinator gave no verdict"
    return body.rstrip()
