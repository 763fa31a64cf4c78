"""One PR's work, run from its record in order: the owed review, give-up notices, then the
queued ``/bot`` commands — each step either completes its item or records a failure with
backoff, so the loop always ends."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import timedelta

from dsh_harness import OPEN_FENCE, Fence, FencedOut

from ..core.failures import local_failure
from ..core.session_key import PrRef
from ..core.triggers import Trigger
from ..github.errors import BadCredentials, GitHubError, RateLimited
from . import fixes, reactions
from . import pause as account_pause
from .chat import CommandProcedure
from .context import WorkContext, short_error
from .notices import post_notice
from .records import PrRecord, backoff
from .review import ReviewProcedure

log = logging.getLogger(__name__)

# A PR's work is a handful of items; more steps than this in one run means records are not
# changing as they should, and the run yields to the scheduler instead of spinning.
MAX_STEPS = 50

Slot = Callable[[], AbstractAsyncContextManager[None]]


class PrWorker:
    def __init__(self, ctx: WorkContext, review_slot: Slot, chat_slot: Slot):
        self.ctx = ctx
        self.review = ReviewProcedure(ctx)
        self.command = CommandProcedure(ctx)
        self.review_slot, self.chat_slot = review_slot, chat_slot

    def due_at(self, rec: PrRecord | None):
        if rec is None:
            return None
        now = self.ctx.clock()
        paused = account_pause.work_held_until(self.ctx.pause, now)
        due = rec.due_at(self.ctx.cfg.poll_interval_s, now)
        # A paused account (rejected credentials) runs nothing before the pause ends.
        return due if due is None or paused is None else max(due, paused)

    def fenced(self, fence: Fence) -> PrWorker:
        """This worker for one PR's run under its lease: every GitHub write and session append
        of the run proves ``fence`` first (``WorkContext.fenced``)."""
        if fence is OPEN_FENCE:
            return self
        return PrWorker(self.ctx.fenced(fence), self.review_slot, self.chat_slot)

    async def run(self, ref: PrRef, fence: Fence = OPEN_FENCE) -> None:
        worker = self.fenced(fence)
        for _ in range(MAX_STEPS):
            if not await worker.step(ref):
                return
        log.warning("%s: %d work steps in one run; yielding", ref, MAX_STEPS)

    async def step(self, ref: PrRef) -> bool:
        """Run the next due item of the PR; False when nothing is due now (or the account is
        paused; after a credential pause, one PR's step at a time probes it)."""
        if not account_pause.take_probe(self.ctx.pause, ref, self.ctx.clock()):
            return False
        try:
            return await self._step(ref)
        finally:
            account_pause.release_probe(self.ctx.pause, ref)

    async def _step(self, ref: PrRef) -> bool:
        rec = await self.ctx.store.pr(ref)
        now = self.ctx.clock()
        if reactions.due(rec, now):
            # Acknowledge first: 👀/😕 never wait behind a review (also for drafts).
            await reactions.add_owed(self.ctx, ref)
            return True
        if fixes.due(rec, now):
            # A posted review's fixed threads GitHub failed to resolve (also for drafts: the
            # review is already on the PR).
            await self._resolve_fixes(ref)
            return True
        if rec is None:
            return False
        interval = self.ctx.cfg.poll_interval_s
        due = rec.review_due_at(interval, now)
        if due is not None and due <= now:
            # (A draft's owed review too, once per head: the procedure reads whether the
            # base reviews drafts, and records the head it waits on when not.)
            async with self.review_slot():
                await self.review.run(ref, rec)
            return True
        if rec.draft:
            return False
        for notice in rec.notices:
            if not notice.posted and (notice.next_attempt_at or now) <= now:
                await self._post_notice(ref, notice.trigger)
                return True
        for cmd in rec.queued:
            if (cmd.next_attempt_at or now) <= now:
                async with self.chat_slot():
                    await self.command.run(ref, rec, cmd)
                return True
        return False

    async def acknowledge(self, ref: PrRef, fence: Fence = OPEN_FENCE) -> None:
        """Add owed reactions while the PR's ordered work is busy (a long review), under the
        same lease (``fence``) as that work."""
        try:
            await reactions.add_owed(self.fenced(fence).ctx, ref)
        except FencedOut:
            pass  # the lease is lost: its fence said so once; the new holder adds them
        except Exception as exc:
            log.warning("%s: reactions not added yet: %s", ref, short_error(exc))

    async def _resolve_fixes(self, ref: PrRef) -> None:
        try:
            await fixes.resolve_owed(self.ctx, ref)
        except BadCredentials as exc:
            await account_pause.pause(self.ctx.pause, "github", short_error(exc), self.ctx.clock())
        except RateLimited as exc:
            await fixes.delay(self.ctx, ref, exc.wait_s, short_error(exc))

    async def _post_notice(self, ref: PrRef, trigger: Trigger) -> None:
        rec = await self.ctx.store.pr(ref)
        notice = next((n for n in rec.notices if n.trigger == trigger), None) if rec else None
        if notice is None:
            return
        error: str | None = None
        wait: float | None = None
        try:
            await post_notice(self.ctx.client, ref.owner, ref.name, ref.number, notice,
                              self.ctx.cfg.review.max_attempts, self.ctx.acct.identity)
        except RateLimited as exc:
            error, wait = short_error(exc), exc.wait_s
        except BadCredentials as exc:
            await account_pause.pause(self.ctx.pause, "github", short_error(exc), self.ctx.clock())
            return
        except Exception as exc:
            if local_failure(exc):
                raise
            if not isinstance(exc, GitHubError):
                log.exception("%s: cannot post the give-up notice", ref)
            error = short_error(exc)
        now = self.ctx.clock()

        def apply(e: PrRecord | None) -> PrRecord | None:
            for n in e.notices if e else []:
                if n.trigger == trigger:
                    if error is None:
                        n.posted, n.next_attempt_at, n.post_error = True, None, None
                    else:
                        n.post_error, n.last_failed_at = error, now
                        n.attempts += 1 if wait is None else 0
                        n.next_attempt_at = now + (timedelta(seconds=wait) if wait else
                                                   backoff(n.attempts,
                                                           self.ctx.cfg.poll_interval_s))
            return e
        await self.ctx.store.update_pr(ref, apply)
        if error:
            log.warning("%s: give-up notice not posted yet: %s", ref, error)


