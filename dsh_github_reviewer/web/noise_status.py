"""The noise figures for ``status --json``, folded from the sessions' logs (``web.noise``)."""

from __future__ import annotations

from typing import Any

from ..core.session_key import parse_session_id
from . import noise
from .facts import update


async def by_repository(harness: Any, account: str) -> dict[str, dict[str, Any]]:
    """``status --json``: an account's figures per repository, folded from its PR sessions'
    logs (read-only; the web UI keeps the same folds in its index)."""
    totals: dict[str, dict[str, Any]] = {}
    for sid in await harness.sessions.store.list_ids():
        key = parse_session_id(sid)
        if key is None or key.account != account:
            continue
        log = await harness.sessions.read(sid)
        repo = f"{key.owner}/{key.repo}"
        t = totals.setdefault(repo, {"noise": noise.empty(), "reviewed": 0, "cost": 0.0})
        t["cost"] += sum(e.usage.cost_usd for e in log.events
                         if e.type in ("assistant_message", "compaction"))
        if key.persona not in (None, "coordinator"):
            continue   # a persona posts nothing; its cost counts
        facts: dict[str, Any] = {}
        update(log.header, facts, list(log.events))
        pr = facts.get("pr") or {}
        t["reviewed"] += pr.get("reviews", 0) > 0
        noise.add(t["noise"], pr.get("noise") or noise.empty())
    return {repo: noise.rates(t["noise"], t["reviewed"], t["cost"])
            for repo, t in sorted(totals.items())}
