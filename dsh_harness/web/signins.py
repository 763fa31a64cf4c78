"""Web sign-ins kept in the storage domain ``web-sessions``, so every replica behind a load
balancer honours a cookie another replica issued, and a logout on one is a logout on all.

A cookie is ``<expiry>.<nonce>.<hmac>``; the signing key is derived from ``web.auth_token``
(configuration, the same on every replica), and the nonce is a record of the domain. A
replica believes a nonce it has checked in the last ``RECHECK_S`` seconds without asking
again (a page polls every 2 s); past that it reads the record, so a logout on another replica
takes effect here within ``RECHECK_S``. Expired records are deleted by the replica that issues
a sign-in, at most once per ``PRUNE_EVERY_S``.

When the storage cannot be read the replica answers from what it checked before (its own
sign-ins included) and logs once: the database being down signs nobody in that was not.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pydantic import BaseModel, Field

from ..errors import StorageError
from ..storage.base import DomainSpec

log = logging.getLogger(__name__)

DOMAIN = "web-sessions"
TABLE = "sessions"
RECHECK_S = 5.0
PRUNE_EVERY_S = 3600.0
LOCAL_MAX = 10_000


class SignIn(BaseModel):
    """One signed-in browser: when its cookie expires (epoch seconds)."""

    expiry: int = Field(ge=0)


def domain_spec() -> DomainSpec:
    return DomainSpec(DOMAIN, 1, {TABLE: SignIn})


class SharedSignIns:
    """The sign-in records of the deployment (all replicas), with a short local memory."""

    def __init__(self, harness: Any):
        self.harness = harness
        self._checked: dict[str, tuple[int, float]] = {}   # nonce -> (expiry, checked at)
        self._pruned_at = 0.0
        self._failing = False

    async def _table(self):
        return (await self.harness.storage.domain(DOMAIN)).table(TABLE)

    def _remember(self, nonce: str, expiry: int, now: float) -> None:
        self._checked[nonce] = (expiry, now)
        if len(self._checked) > LOCAL_MAX:   # the oldest checks go first
            for key in list(self._checked)[:len(self._checked) - LOCAL_MAX]:
                del self._checked[key]

    def _storage_failed(self, what: str, exc: Exception) -> None:
        if not self._failing:
            log.warning("web sign-ins: %s failed (answering from this replica's memory): %s",
                        what, exc)
        self._failing = True

    async def add(self, nonce: str, expiry: int) -> None:
        now = time.monotonic()
        self._remember(nonce, expiry, now)
        try:
            table = await self._table()
            await table.put(nonce, SignIn(expiry=expiry))
            self._failing = False
            if now - self._pruned_at > PRUNE_EVERY_S:
                self._pruned_at = now
                await self._prune(table)
        except StorageError as exc:
            self._storage_failed("recording a sign-in", exc)

    async def _prune(self, table) -> None:
        wall = time.time()
        for key, rec in (await table.all()).items():
            if rec.expiry <= wall:
                await table.delete(key)

    async def holds(self, nonce: str, expiry: int) -> bool:
        """Whether this sign-in is recorded (not logged out anywhere)."""
        now = time.monotonic()
        seen = self._checked.get(nonce)
        if seen is not None and seen[0] == expiry and now - seen[1] < RECHECK_S:
            return True
        try:
            rec = await (await self._table()).get(nonce)
            self._failing = False
        except StorageError as exc:
            self._storage_failed("reading a sign-in", exc)
            return seen is not None and seen[0] == expiry
        if rec is None or rec.expiry != expiry:
            self._checked.pop(nonce, None)
            return False
        self._remember(nonce, expiry, now)
        return True

    async def remove(self, nonce: str) -> None:
        self._checked.pop(nonce, None)
        try:
            await (await self._table()).delete(nonce)
        except StorageError as exc:
            self._storage_failed("recording a sign-out", exc)
