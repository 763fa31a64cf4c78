"""Fences: before each side effect, leased work proves that its lease still holds.

The storage's own writes are fenced inside their transaction (``leases.py``). A side effect the
database cannot see — a request to another service, an append to a session log on another
database — is fenced by the ``Fence`` the leased work is given (passed in, never looked up):

* ``alive(what)``: the local deadline. The lease was last granted (or renewed) by a request
  sent at monotonic time ``t``; the database cannot give it to anyone else before ``t + ttl``,
  so before that (less a margin) it is still ours without asking. A process resumed after a
  pause (SIGSTOP, a GC pause, VM steal) sees the deadline passed and refuses at once.
* ``check(what)``: the above, then a synchronous renewal with the lease's fencing token (one
  database round trip): it proves nobody took the lease over (or deleted it) and extends the
  deadline to a whole ``ttl`` from now, so the write that follows has the longest margin.

A refusal raises ``FencedOut`` and is final: the fence stays lost (the stale holder never
retries), it is logged once (here, not by every caller), and ``on_lost`` tells the work's owner
to stop the work. What remains is the window between the last check and the other service
receiving the request; see the replicas section of the deployment docs.

Work that one process owns alone (``json``/``sqlite`` backends) gets ``OPEN_FENCE``: it always
passes and costs nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from fnmatch import fnmatchcase

from .leases import Lease, LeaseLost, Leases

log = logging.getLogger(__name__)


class FencedOut(LeaseLost):
    """A side effect was refused: the writer's lease is lost or its local deadline passed (a
    stale writer). Never retried by that writer; the lease's new holder does the work."""


class Fence:
    """Always passes: the fence of work that no other process can run (one process)."""

    #: The lease whose token the writes carry (None: not leased).
    lease: Lease | None = None

    @property
    def lost(self) -> bool:
        return False

    def alive(self, what: str) -> None:
        """Refuse (``FencedOut``) when the lease is known lost or its local deadline passed."""

    async def check(self, what: str) -> None:
        """``alive``, then prove the lease with the database (a synchronous renewal)."""

    def lose(self, why: str) -> bool:
        """Mark the lease lost (a write was refused elsewhere, e.g. inside a store's
        transaction); True when this call is the first to learn it."""
        return False


OPEN_FENCE = Fence()


class TokenFence(Fence):
    """A lease's token alone (``Leases.fenced(lease)``): storage writes check it in their
    transaction; there is no local deadline."""

    def __init__(self, lease: Lease):
        self.lease = lease


class LeaseFence(Fence):
    """The fence of work running under ``lease`` (see the module doc)."""

    def __init__(self, leases: Leases, lease: Lease, ttl_s: float, *, granted_at: float,
                 clock: Callable[[], float] = time.monotonic,
                 on_lost: Callable[[], None] | None = None):
        self.leases, self.lease, self.ttl_s = leases, lease, ttl_s
        self.clock = clock
        self.on_lost = on_lost
        # The database computes the expiry from its own ``now()``, which is after the request
        # was sent; a margin covers a clock that runs a little fast here.
        self.margin_s = min(1.0, ttl_s / 10)
        self.deadline = granted_at + ttl_s - self.margin_s
        self._lost: str | None = None

    @property
    def lost(self) -> bool:
        return self._lost is not None

    def renewed(self, lease: Lease, sent_at: float) -> None:
        """The lease was renewed by a request sent at ``sent_at`` (monotonic)."""
        if self._lost is None:
            self.lease = lease
            self.deadline = max(self.deadline, sent_at + self.ttl_s - self.margin_s)

    def lose(self, why: str) -> bool:
        if self._lost is not None:
            return False
        self._lost = why
        log.warning("%s: %s; this replica stops the work and writes nothing more (the new "
                    "holder of the lease does it)", self.lease.name, why)
        if self.on_lost is not None:
            self.on_lost()
        return True

    def alive(self, what: str) -> None:
        if self._lost is None and self.clock() >= self.deadline:
            self.lose(f"the lease (token {self.lease.token}) expired here before {what} "
                      "(the process was paused or starved)")
        if self._lost is not None:
            raise FencedOut(f"{what} refused: {self.lease.name}: {self._lost}")

    async def check(self, what: str) -> None:
        self.alive(what)
        sent = self.clock()
        renewed = await self.leases.renew(self.lease, self.ttl_s)
        if renewed is None:
            self.lose(f"the lease (token {self.lease.token}) was taken over")
        else:
            self.renewed(renewed, sent)
        # Also when renewed: a pause during the round trip may have outlasted the lease.
        self.alive(what)


STOP_ENV = "DSH_TEST_STOP_AT"
_stop_matches: dict[str, int] = {}


def stop_point(name: str) -> None:
    """Fault injection for the replica tests: a process whose ``DSH_TEST_STOP_AT`` holds
    ``glob`` or ``glob#n`` stops itself (SIGSTOP) at the first (the n-th) point whose name
    matches, once; the test resumes it (SIGCONT) when it chooses. Without the variable (always,
    outside those tests) this does nothing."""
    spec = os.environ.get(STOP_ENV)
    if not spec:
        return
    pattern, _, nth = spec.partition("#")
    if not fnmatchcase(name, pattern):
        return
    seen = _stop_matches[spec] = _stop_matches.get(spec, 0) + 1
    if seen < int(nth or 1):
        return
    del os.environ[STOP_ENV]
    log.warning("test stop point %r: stopping this process", name)
    os.kill(os.getpid(), signal.SIGSTOP)
