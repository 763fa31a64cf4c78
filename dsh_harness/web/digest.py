"""A session's summary for the web UI, folded event by event so a growing log costs only its
new lines: title, turns, open turn, usage and cost in total, per turn and per day, plus the
facts plugins fold in through ``dsh_web_session_facts``. Plain JSON data, so the catalog can
keep 10,000 of them in one index file.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from ..sessions.events import EVENT_ADAPTER, SessionHeader, Usage

# Per-turn usage points kept for a session's cost chart: the chart shows the last 90
# (render.MAX_POINTS); keeping more would only grow the persisted index.
MAX_TURNS_KEPT = 90


class DigestError(Exception):
    """A log line that does not parse (the index skips the session; its page says why)."""


def new_digest(header: SessionHeader, group: list[str], link: str | None) -> dict[str, Any]:
    created = header.created_at.astimezone(UTC)
    return {"id": header.id, "title": None, "pinned": False, "created": created.isoformat(),
            "last": created.isoformat(), "last_ts": created.timestamp(), "turns": 0,
            "open": False, "events": 0, "usage": [0, 0, 0, 0.0], "per_turn": [],
            "days": {}, "facts": {}, "group": group, "link": link, "meta": header.meta}


def _add(acc: list, usage: Usage) -> None:
    acc[0] += usage.uncached_input
    acc[1] += usage.cache_read
    acc[2] += usage.output
    acc[3] += usage.cost_usd


def fold(d: dict[str, Any], events: list) -> None:
    """Fold events (in order) into the digest ``d`` in place."""
    for e in events:
        d["events"] += 1
        at = e.at.astimezone(UTC)
        d["last"], d["last_ts"] = at.isoformat(), at.timestamp()
        kind = e.type
        if kind in ("assistant_message", "compaction"):
            _add(d["usage"], e.usage)
            _add(d["days"].setdefault(at.date().isoformat(), [0, 0, 0, 0.0]), e.usage)
            if d["per_turn"] and kind == "assistant_message" and d["per_turn"][-1][0] == e.turn:
                _add(d["per_turn"][-1][2], e.usage)
        elif kind == "title":
            if e.pinned or not d["pinned"]:
                d["title"], d["pinned"] = e.title, e.pinned
        elif kind == "turn_start":
            d["turns"] += 1
            d["open"] = True
            d["per_turn"].append([e.turn, at.isoformat(), [0, 0, 0, 0.0],
                                  str(e.meta.get("flow", ""))])
            del d["per_turn"][:-MAX_TURNS_KEPT]
        elif kind == "turn_end":
            d["open"] = False


def parse_lines(data: bytes, want_header: bool) -> tuple[SessionHeader | None, list, int]:
    """(header, events, bytes consumed) from whole lines of ``data``; a torn last line waits."""
    end = data.rfind(b"\n") + 1
    header = None
    events = []
    for line in data[:end].split(b"\n")[:-1]:
        try:  # validate_json parses and validates in one pass (about twice as fast)
            if want_header and header is None:
                header = SessionHeader.model_validate_json(line)
            else:
                events.append(EVENT_ADAPTER.validate_json(line))
        except (ValueError, ValidationError) as exc:
            raise DigestError(f"a line does not parse ({type(exc).__name__})") from None
    return header, events, end


def usage_of(d: dict[str, Any]) -> Usage:
    u = d["usage"]
    return Usage(uncached_input=u[0], cache_read=u[1], output=u[2], cost_usd=u[3])


def hit_pct(u: list) -> float:
    prompt = u[0] + u[1]
    return 100.0 * u[1] / prompt if prompt else 0.0


def when(iso: str) -> datetime:
    return datetime.fromisoformat(iso)
