"""Delivery ids already handled: a redelivery (same ``X-GitHub-Delivery``) does no work twice.

Kept in a storage domain of its own (``dsh_github_reviewer_webhook``, table ``deliveries``, one
record per delivery id) so it survives restarts, and bounded: past ``cap`` ids the oldest are
dropped. GitHub only lets people redeliver recent deliveries, and the PR records dedupe by head
and comment id anyway, so forgetting an old id costs at most a no-op write, never a second post.
An id is remembered only once its work is durable; a delivery that failed can be redelivered.

With replicas (``shared``: the domain is in a database every replica writes), a delivery may
land on any replica, so an id this replica has not seen is also looked up in the database.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from dsh_harness import Domain, DomainSpec

DOMAIN = "dsh_github_reviewer_webhook"
TABLE = "deliveries"
DOMAIN_VERSION = 1
DEFAULT_CAP = 5000


class Delivery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    received_at: datetime
    event: str
    outcome: str  # recorded | ignored | ping


def domain_spec() -> DomainSpec:
    return DomainSpec(name=DOMAIN, version=DOMAIN_VERSION, tables={TABLE: Delivery})


class DeliveryLog:
    def __init__(self, domain: Domain, cap: int = DEFAULT_CAP, shared: bool = False):
        self.domain = domain
        self.shared = shared
        self.table = domain.table(TABLE)
        self.cap = cap
        self._seen: OrderedDict[str, datetime] = OrderedDict()
        self._lock = asyncio.Lock()

    async def load(self) -> DeliveryLog:
        records = await self.table.all()
        for key, rec in sorted(records.items(), key=lambda kv: kv[1].received_at):
            self._seen[key] = rec.received_at
        return self

    def seen(self, delivery_id: str) -> bool:
        return delivery_id in self._seen

    async def known(self, delivery_id: str) -> bool:
        """Handled here, or (replicas) by any replica: the shared table is asked too."""
        if delivery_id in self._seen:
            return True
        if not self.shared:
            return False
        record = await self.table.get(delivery_id)
        if record is None:
            return False
        self._seen[delivery_id] = record.received_at
        return True

    async def remember(self, delivery_id: str, record: Delivery) -> None:
        async with self._lock:
            # Trim in batches, in the same atomic write, so a steady stream pays one write per
            # delivery and one larger write per cap/10 deliveries.
            drop: list[str] = []
            if len(self._seen) + 1 > self.cap + max(1, self.cap // 10):
                drop = list(self._seen)[:len(self._seen) + 1 - self.cap]
            async with self.domain.transaction() as tx:
                tx.put(TABLE, delivery_id, record)
                for old in drop:
                    tx.delete(TABLE, old)
            for old in drop:
                del self._seen[old]
            self._seen[delivery_id] = record.received_at

    def __len__(self) -> int:
        return len(self._seen)
