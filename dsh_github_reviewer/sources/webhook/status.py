"""The receiver as ``status`` and the web UI show it: where it listens, what it last received.

Read from storage (the delivery log), so ``dsh github-reviewer status`` in another process sees
it too; a running receiver in this process adds its counters (rejections are never stored).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC
from typing import TYPE_CHECKING, Any

from . import deliveries

if TYPE_CHECKING:
    from ...app import ReviewerApp


async def webhook_status(app: ReviewerApp) -> list[dict[str, Any]]:
    enabled = [(i, c.webhook) for i, c in app.instances.items() if c.webhook.enabled]
    if not enabled:
        return []
    domain = await app.harness.storage.domain(deliveries.DOMAIN)
    records = await domain.table(deliveries.TABLE).all()
    last = max(records.values(), key=lambda r: r.received_at, default=None)
    outcomes = Counter(r.outcome for r in records.values())
    running = {s.instance: s for s in app.webhooks}
    out = []
    for instance, hook in enabled:
        server = running.get(instance)
        row: dict[str, Any] = {
            "instance": instance, "listen": f"{hook.host}:{hook.port}{hook.path}",
            "reconcile_interval_s": hook.reconcile_interval_s,
            "remembered_deliveries": dict(outcomes),
            "last_delivery_at": (last.received_at.astimezone(UTC).isoformat(timespec="seconds")
                                 if last else None),
            "last_event": last.event if last else None}
        if server is not None:
            c = server.receiver.counters
            row["since_start"] = {"received": c.received, "recorded": c.recorded,
                                  "duplicates": c.duplicates, "ignored": c.ignored,
                                  "rejected": c.rejected, "failed": c.failed}
        out.append(row)
    return out
