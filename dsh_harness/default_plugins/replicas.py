"""Built-in plugin: a replica's heartbeat while ``dsh run`` runs on shared storage.

With a shared storage backend (postgres) every ``dsh run`` process records itself in the
database (``Leases.heartbeat``: host, pid, start time, last beat) every ``HEARTBEAT_S``, so
status pages can list the replicas and how fresh each one is; a clean shutdown removes the
entry and lets its leases go. On a backend of one process it does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..hookspecs import hookimpl

STATE_KEY = "dsh.replicas"
HEARTBEAT_S = 10.0

log = logging.getLogger(__name__)


async def _beat(harness, stop: asyncio.Event) -> None:
    # Stopped by the event, never cancelled mid-query (a cancelled statement would leave
    # its pooled connection to be cleaned up while shutdown retires the replica).
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), HEARTBEAT_S)
        if stop.is_set():
            return
        try:
            await harness.leases.heartbeat({"version": _version()})
        except Exception as exc:  # the database is away: beat again at the next interval
            log.warning("replica heartbeat failed: %s", exc)


def _version() -> str:
    from ..harness import HARNESS_VERSION

    return HARNESS_VERSION


@hookimpl
async def dsh_startup(harness):
    if harness.run_once or not harness.leases.shared:
        return
    await harness.leases.heartbeat({"version": _version()})
    stop = asyncio.Event()
    harness.plugin_state[STATE_KEY] = (stop, asyncio.create_task(_beat(harness, stop),
                                                                 name="dsh-replica-heartbeat"))


@hookimpl
async def dsh_shutdown(harness):
    state = harness.plugin_state.pop(STATE_KEY, None)
    if state is None:
        return
    stop, task = state
    stop.set()
    await task
    try:
        await harness.leases.retire()
    except Exception as exc:  # its entry ages out; its leases expire
        log.warning("replica %s could not retire: %s", harness.replica_id, exc)
