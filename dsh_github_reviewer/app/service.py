"""Wires every connected account's inbox, PR worker and poll loop to one scheduler.

Given the parts it wires (``ReviewerApp.build_work`` passes them), never the app itself: the
composition root imports this module, not the other way round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from dsh_harness import Leases

from ..core.clock import utcnow
from ..github.account import ConnectedAccount
from ..reviewers.base import Reviewer
from ..sources.poll import AccountPoller, PassResult
from ..sources.webhook.sink import RecordWork
from ..work.context import WorkContext
from ..work.inbox import Inbox
from ..work.pause import AccountPause
from ..work.scheduler import Scheduler
from ..work.store import WorkStore
from ..work.worker import PrWorker

log = logging.getLogger(__name__)

# How long a graceful stop waits for running turns before leaving them to resume.
STOP_GRACE_S = 60.0


class WorkService:
    def __init__(self, accounts: Mapping[str, ConnectedAccount], stores: Mapping[str, WorkStore],
                 reviewers: Mapping[str, Reviewer], tick_intervals_s: Mapping[str, float],
                 process_cap: int, leases: Leases | None = None,
                 clock: Callable[[], datetime] = utcnow):
        """``leases``: replicas on a shared database take a lease per PR's work and per
        account's poll (``None``: this process is alone)."""
        self.leases = leases
        self.scheduler = Scheduler(process_cap, clock, leases=self.leases)
        self.pollers: dict[str, AccountPoller] = {}
        for key, acct in accounts.items():
            store = stores[key]
            # The account's reviewer strategy (single or team) was chosen when it was
            # configured; the PR work only calls its interface.
            pause = AccountPause(key, store)
            # A lifted pause runs the PR work it held at once, not at its next re-check.
            pause.on_resume = lambda key=key: self.scheduler.wake(key)
            ctx = WorkContext(acct, store, reviewers[key], pause, clock)
            self.scheduler.add_account(
                key, store, lambda review, chat, ctx=ctx: PrWorker(ctx, review, chat),
                acct.config.poll_interval_s, acct.config.max_concurrent_reviews)
            inbox = Inbox(store, acct.config, acct.identity)
            self.pollers[key] = AccountPoller(acct, store, inbox, self.scheduler,
                                              tick_intervals_s[key], clock, pause,
                                              leases=self.leases)

    def record_work(self) -> RecordWork:
        """The webhook receivers' sink: records into the pollers' inboxes, wakes the
        scheduler."""
        return RecordWork(self.pollers, self.scheduler)

    def start(self) -> None:
        """``dsh run``: the scheduler, then every account's poll loop."""
        self.scheduler.start()
        for poller in self.pollers.values():
            poller.start()

    async def run_once(self) -> dict[str, PassResult]:
        """``dsh run --once``: one tick per account, then its due work until none is due."""
        self.scheduler.start()
        results = await asyncio.gather(*(p.tick() for p in self.pollers.values()))
        for key in self.pollers:
            await self.scheduler.drain(key)
        return {r.account: r for r in results}

    async def tick(self, account: str) -> PassResult:
        """One tick of one account and its due work (tests, benches)."""
        self.scheduler.start()
        result = await self.pollers[account].tick()
        await self.scheduler.drain(account)
        return result

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        await asyncio.gather(*(p.stop() for p in self.pollers.values()))
        await self.scheduler.stop(grace_s)
