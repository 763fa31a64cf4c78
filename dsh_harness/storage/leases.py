"""Leases: one holder at a time for a named piece of work, with fencing tokens.

A plugin that runs the same work in several processes (replicas on one shared database) takes a
lease before the work (``acquire``), keeps it while working (``renew`` well before it expires)
and lets it go after (``release``). A lease expires by itself when its holder stops renewing
(killed, partitioned, paused), and then another replica may take it. Every acquisition gets a
new, larger token; ``fenced(lease)`` marks the current task so that each storage write it makes
first checks, inside the write's own transaction, that the lease still holds that token: a late
write of a holder that lost its lease is refused (``LeaseLost``) instead of overwriting the
newer holder's work.

Backends that one process owns alone (``json``, ``sqlite``: the home lock keeps a second
``dsh run`` out) get ``LocalLeases``: the same contract within the process, nothing stored. A
shared backend (``postgres``) provides its own (``StorageBackend.leases``).
"""

from __future__ import annotations

import contextvars
import os
import secrets
import socket
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import StorageError


class LeaseLost(StorageError):
    """A write was fenced by a lease this task no longer holds (another holder took over)."""


@dataclass(frozen=True)
class Lease:
    name: str
    owner: str
    token: int
    expires_at: datetime


@dataclass(frozen=True)
class Replica:
    id: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    info: dict[str, Any]


# The fence (``fence.Fence``: the lease whose token guards the storage writes, and its local
# deadline) of the current task and the tasks it starts: set by ``Leases.fenced``.
FENCE: contextvars.ContextVar[Any] = contextvars.ContextVar("dsh_fence", default=None)


def new_replica_id() -> str:
    """``host:pid:random``: unique per process start, readable in status pages."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Leases(ABC):
    """Named leases shared by every process on the same storage (see the module doc)."""

    #: True when the leases exclude other processes (a shared database), not only this one.
    shared: bool = False
    #: The deployment's lease duration (``storage.lease_ttl_s``) for holders that name none.
    ttl_s: float = 60.0

    def __init__(self, owner: str):
        self.owner = owner

    @abstractmethod
    async def acquire(self, name: str, ttl_s: float) -> Lease | None:
        """The lease, with a new token, if it is free or expired; None while it is held (by
        another replica, or by another task of this one: a lease is not reentrant)."""

    @abstractmethod
    async def renew(self, lease: Lease, ttl_s: float) -> Lease | None:
        """Extend a held lease; None when it was lost (taken over after it expired)."""

    @abstractmethod
    async def release(self, lease: Lease) -> None:
        """Let it go at once (a no-op when it was lost)."""

    @abstractmethod
    async def held(self, prefix: str = "") -> list[Lease]:
        """The unexpired leases whose name starts with ``prefix`` (for status pages)."""

    async def heartbeat(self, info: dict[str, Any] | None = None) -> None:  # noqa: B027
        """Record that this replica is alive (shared leases only)."""

    async def replicas(self) -> list[Replica]:
        """The replicas that sent a heartbeat, newest first (shared leases only)."""
        return []

    async def retire(self) -> None:  # noqa: B027 - optional
        """Forget this replica (clean shutdown)."""

    @contextmanager
    def fenced(self, fence: Any) -> Iterator[None]:
        """Fence the storage writes of this task (and the tasks it starts) by ``fence``: a
        ``Fence`` (token and local deadline) or a bare ``Lease`` (its token only)."""
        token = FENCE.set(fence)
        try:
            yield
        finally:
            FENCE.reset(token)

    async def close(self) -> None:  # noqa: B027 - optional
        pass


@dataclass
class LocalLeaseTable:
    leases: dict[str, Lease] = field(default_factory=dict)
    tokens: int = 0


class LocalLeases(Leases):
    """Leases within one process (the storage is not shared with another process)."""

    shared = False

    def __init__(self, owner: str, table: LocalLeaseTable | None = None):
        super().__init__(owner)
        self.table = table or LocalLeaseTable()
        self._leases = self.table.leases

    def _now(self) -> datetime:
        return datetime.now(UTC)

    async def acquire(self, name: str, ttl_s: float) -> Lease | None:
        now = self._now()
        current = self._leases.get(name)
        if current is not None and current.expires_at > now:
            return None
        self.table.tokens += 1
        lease = Lease(name, self.owner, self.table.tokens, now + timedelta(seconds=ttl_s))
        self._leases[name] = lease
        return lease

    async def renew(self, lease: Lease, ttl_s: float) -> Lease | None:
        current = self._leases.get(lease.name)
        if current is None or current.token != lease.token:
            return None
        renewed = Lease(lease.name, lease.owner, lease.token,
                        self._now() + timedelta(seconds=ttl_s))
        self._leases[lease.name] = renewed
        return renewed

    async def release(self, lease: Lease) -> None:
        current = self._leases.get(lease.name)
        if current is not None and current.token == lease.token:
            del self._leases[lease.name]

    async def held(self, prefix: str = "") -> list[Lease]:
        now = self._now()
        return sorted((lease for name, lease in self._leases.items()
                       if name.startswith(prefix) and lease.expires_at > now),
                      key=lambda lease: lease.name)
