"""A PR's state as people read it — open, draft, merged or closed — and a record's status in
words, for every page (the PR list, the PR page's header, the status page) and the APIs.

The state in a PR session's facts is as of its last turn; a PR closed, merged or turned draft
since gets no new turn, but its work record says so (``closed_seen_at`` and ``merged``, set by
the poller or a webhook; ``draft``), so the record wins when there is one.
"""

from __future__ import annotations

from typing import Any

from ..work.records import PrRecord

LAST_TURN = "as of the PR's last turn"
STATES = ("open", "draft", "merged", "closed")


def from_facts(pr: dict[str, Any]) -> str | None:
    """The state a turn saw (``pr`` facts): merged and draft come from its meta."""
    if pr.get("merged"):
        return "merged"
    state = pr.get("state")
    if state == "open" and pr.get("draft"):
        return "draft"
    return state if state in STATES else None


def from_record(rec: PrRecord) -> tuple[str, str]:
    """(state, why) from a work record."""
    if rec.closed_seen_at is not None:
        return (("merged", "seen merged") if rec.merged
                else ("closed", "seen closed (or merged: a poll that finds a PR missing from "
                                "the open list cannot tell)"))
    if rec.draft:
        return "draft", "a draft: reviews wait until it is ready for review"
    if rec.paused_by:
        return "open", f"open; automatic reviews paused by {rec.paused_by} (/bot resume)"
    return "open", "open when last seen"


STATUS_WORDS = {"reviewed": "reviewed", "reviewing": "review owed",
                "missing_instructions": "waits for its review instructions",
                "gave_up": "gave up"}


def status_words(rec: PrRecord) -> str:
    """A record's status as the status page says it (never a raw ``gave_up``)."""
    if rec.closed_seen_at is not None:
        return "merged" if rec.merged else "closed"
    if rec.draft and rec.status == "reviewing":
        return "draft: waits until ready for review"
    words = STATUS_WORDS.get(rec.status, rec.status.replace("_", " "))
    if rec.paused_by:
        # /bot pause: an owed automatic review waits for /bot resume.
        return f"{words}; automatic reviews paused by {rec.paused_by} (/bot resume)"
    return words
