"""The receiver as ``status`` and the web UI show it: where it listens, what it last received.

Read from storage (the delivery log), so ``dsh github-reviewer status`` in another process sees
it too; a running receiver in this process adds its counters (rejections are never stored).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC
from typing import Any

from dsh_harness import Harness

from ...config import ReviewerConfig
from . import deliveries
from .server import WebhookServer


async def webhook_status(harness: Harness, instances: Mapping[str, ReviewerConfig],
                         running: Iterable[WebhookServer] = ()) -> list[dict[str, Any]]:
    """One row per plugin instance with ``webhook.enabled``; ``running``: this process's."""
    enabled = [(i, c.webhook) for i, c in instances.items() if c.webhook.enabled]
    if not enabled:
        return []
    domain = await harness.storage.domain(deliveries.DOMAIN)
    records = await domain.table(deliveries.TABLE).all()
    last = max(records.values(), key=lambda r: r.received_at, default=None)
    outcomes = Counter(r.outcome for r in records.values())
    running_by = {s.instance: s for s in running}
    out = []
    for instance, hook in enabled:
        server = running_by.get(instance)
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
