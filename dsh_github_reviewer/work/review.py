"""The daemon's review of one PR: the record-free procedure (``work/procedure.py``), its
outcome recorded on the PR's record.

Runs only from the PR's record: the record says ``reviewing`` (with the trigger it answers)
before the model runs and ``reviewed`` only after the review is on GitHub. Every way out —
success, missing instructions, a failed turn, an exception from GitHub, the runner or the
store's reads — ends in a recorded state; failures count attempts with backoff, and after
``review.max_attempts`` on one head the bot gives up visibly (``notices``).

Exactly once, checked by commit: a review already posted for the trigger (found by its
marker, e.g. after a crash between the post and the record) is accepted only if its
``commit_id`` is the head being recorded; one posted on an older head answered its trigger,
and the current head gets its own automatic review.

| outcome               | record transition                                           |
|-----------------------|-------------------------------------------------------------|
| Posted, AlreadyPosted | ``reviewed`` (fixed threads owed on ``fixes`` when unresolved)|
| Closed                | ``closed``                                                  |
| DraftWaits            | ``draft`` (this head is not asked again)                    |
| MissingInstructions   | ``missing_instructions``                                    |
| Refused               | ``skipped`` (``reviewed`` with a note)                      |
| Failed (account)      | none: the account pauses                                    |
| Failed (wait_s)       | ``paused`` until then, no attempt counted                   |
| Failed                | ``failed``: an attempt counted, ``gave_up`` at the limit    |
"""

from __future__ import annotations

import logging
from datetime import timedelta

from ..core.failures import local_failure
from ..core.sanitizer import sanitize_line
from ..core.session_key import PrRef
from ..core.triggers import Trigger
from ..github.models import PullRequest
from ..pr_output.summary import Waiting
from ..turn.extras import TurnExtras
from ..turn.prompts import TrustedInstructions
from ..turn.repo_config import RepoSettings
from . import fixes
from . import pause as account_pause
from .context import WorkContext, short_error
from .procedure import (
    AlreadyPosted,
    Closed,
    DraftWaits,
    Failed,
    Hooks,
    MissingInstructions,
    Outcome,
    Posted,
    Refused,
    ReviewJob,
    ReviewPr,
    missing_message,
)
from .records import InstructionsRecord, PrRecord
from .summary import update_summary
from .turn_extras import turn_extras

log = logging.getLogger(__name__)


class _RecordHooks(Hooks):
    """The daemon's steps inside the procedure: what it records before the model runs."""

    def __init__(self, proc: ReviewProcedure, ref: PrRef, rec: PrRecord):
        self.proc, self.ref, self.rec = proc, ref, rec

    async def answered_elsewhere(self, trigger: Trigger, commit: str | None) -> None:
        proc = self.proc

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None and e.trigger == trigger:
                e.answered_elsewhere(proc._auto(e.head_sha), commit)
            return e
        await proc.ctx.store.update_pr(self.ref, apply)

    async def extras(self, pr: PullRequest, settings: RepoSettings | None) -> TurnExtras:
        # The repository's lessons, /review full, the second look (``work/turn_extras.py``).
        return await turn_extras(self.proc.ctx, self.ref, self.rec, settings)

    async def settings(self, pr: PullRequest, settings: RepoSettings | None) -> None:
        error = settings.error if settings is not None else None
        if error != self.rec.config_error:
            await self.proc.ctx.store.update_pr(self.ref, lambda e: e and e.model_copy(
                update={"config_error": error}))

    async def starting(self, pr: PullRequest, instructions: TrustedInstructions,
                       trigger: Trigger) -> None:
        ctx = self.proc.ctx
        # Whole seconds, like GitHub's timestamps: a /review posted in the same second as
        # this start is not treated as covered by it.
        started = ctx.clock().replace(microsecond=0)
        stored = InstructionsRecord(source=instructions.source, text=instructions.text)

        def reviewing(e: PrRecord | None) -> PrRecord:
            assert e is not None
            e.started(started, stored.key)
            e.title, e.base_sha, e.base_ref = sanitize_line(pr.title), pr.base.sha, pr.base.ref
            return e
        self.rec = await ctx.store.start_review(self.ref, stored, reviewing)
        await update_summary(ctx, self.ref, reviewing=pr.head.sha,
                             last_reviewed=self.rec.reviewed_head_sha)


class ReviewProcedure:
    def __init__(self, ctx: WorkContext):
        self.ctx = ctx
        self.procedure = ReviewPr(ctx.deps())

    def _auto(self, head: str) -> Trigger:
        return Trigger.auto(self.ctx.acct.key, head)

    async def run(self, ref: PrRef, rec: PrRecord) -> None:
        ran = rec.trigger or self._auto(rec.head_sha)
        told = await self.ctx.store.instructions(rec.instructions_key)
        job = ReviewJob(ref, ran, previous_head=rec.reviewed_head_sha,
                        requested_by=rec.requested_by,
                        told=told and TrustedInstructions(told.source, told.text),
                        fallback=self._auto(rec.head_sha))
        # A local failure (the store locked, a full disk) is raised from here: not the
        # review's fault, and recording a failed attempt could mark a review already on GitHub
        # as failed. The scheduler retries later; the marker finds a review that was posted.
        try:
            outcome = await self.procedure.run(job, _RecordHooks(self, ref, rec))
        except Exception as exc:
            if local_failure(exc):
                raise
            log.exception("%s: review failed with an exception", ref)
            outcome = Failed(short_error(exc), ran)
        await self.record(ref, rec, outcome)

    async def record(self, ref: PrRef, rec: PrRecord, outcome: Outcome) -> None:
        """The outcome as a ``PrRecord`` transition (the table above)."""
        ctx = self.ctx
        match outcome:
            case Posted(pr=pr, review=review, trigger=trigger):
                if outcome.fix_error is not None:
                    await fixes.owe(ctx, ref, review.id, outcome.fix_error)
                if not isinstance(outcome, AlreadyPosted):
                    await account_pause.resume(ctx.pause, "model", "rate_limit")
                await self._succeeded(ref, rec.trigger, trigger, pr)
                log.info("%s: review %s recorded", ref, review.id)
            case Closed(merged=merged):
                await self._closed(ref, merged)
            case DraftWaits(pr=pr):
                await ctx.store.mark_draft(ref, pr.head.sha)
                log.info("%s: is a draft; the owed review waits until it is ready", ref)
            case MissingInstructions(pr=pr):
                await self._missing(ref, pr)
            case Refused(pr=pr):
                await self._skipped(ref, pr, outcome.note)
            case Failed(account=str(kind)):
                # A rate limit: the wait GitHub stated, within bounds (else a short backoff).
                wait = account_pause.github_wait(ctx.client) if kind == "rate_limit" else None
                until = await account_pause.pause(ctx.pause, kind, outcome.error, ctx.clock(),
                                                  wait=wait)
                if kind == "model" and outcome.pr is not None:
                    # The PR says its review waits, and why, not "reviewing" for the whole
                    # pause (rate limited: no GitHub call until it ends).
                    await update_summary(ctx, ref, reviewing=None,
                                         last_reviewed=rec.reviewed_head_sha,
                                         waiting=Waiting(outcome.pr.head.sha, kind, until))
            case Failed(wait_s=float(wait_s) | int(wait_s)):
                await self._paused(ref, outcome.error, float(wait_s))
            case Failed():
                await self._failed(ref, rec.trigger or outcome.trigger, outcome.head,
                                   outcome.error)

    # -- recording outcomes ---------------------------------------------------------------

    async def _succeeded(self, ref: PrRef, owed: Trigger | None, trigger: Trigger,
                         pr: PullRequest) -> None:
        now = self.ctx.clock()

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is None:
                return None
            # Still owed if the record moved on meanwhile (a push, a /review after the start).
            # A new head's review and a retarget's count toward max_reviews_per_pr; so does
            # one found on GitHub by its marker (posted before a crash or a failed write: the
            # record still owed it, so it was never counted). A /review never counts.
            e.reviewed(pr.head.sha, now, counted=trigger.automatic,
                       answers=(owed, trigger, self._auto(pr.head.sha)))
            return e
        await self.ctx.store.update_pr(ref, apply)

    async def _missing(self, ref: PrRef, pr: PullRequest) -> None:
        now = self.ctx.clock()

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is None:
                return None
            e.seen_at(head_sha=pr.head.sha, title=sanitize_line(pr.title),
                      base_sha=pr.base.sha, base_ref=pr.base.ref)
            e.missing_instructions(now, missing_message(self.ctx.acct.instance))
            return e
        await self.ctx.store.update_pr(ref, apply)
        log.info("%s: no review instructions; marked missing_instructions", ref)

    async def _skipped(self, ref: PrRef, pr: PullRequest, note: str) -> None:
        now = self.ctx.clock()

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None:
                e.skipped(pr.head.sha, now, note)
            return e
        await self.ctx.store.update_pr(ref, apply)
        log.info("%s: %s", ref, note)

    async def _closed(self, ref: PrRef, merged: bool = False) -> None:
        now = self.ctx.clock()

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None:
                e.closed(now, merged)
            return e
        await self.ctx.store.update_pr(ref, apply)
        log.info("%s: closed; its review is no longer owed", ref)

    async def _paused(self, ref: PrRef, error: str, wait_s: float) -> None:
        """The review waits ``wait_s`` without counting an attempt (a rate limit, a
        transient read of the instructions)."""
        until = self.ctx.clock() + timedelta(seconds=wait_s)

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None and e.status == "reviewing":
                e.paused(until, error)
            return e
        await self.ctx.store.update_pr(ref, apply)
        log.warning("%s: %s; review waits until %s", ref, error, until.isoformat())

    async def _failed(self, ref: PrRef, trigger: Trigger, head: str | None, error: str) -> None:
        now = self.ctx.clock()
        limit = self.ctx.cfg.review.max_attempts

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is None or e.status != "reviewing":
                return e
            sha = head or e.head_sha
            if e.trigger not in (trigger, None) and e.trigger != self._auto(sha):
                return e   # the owed work changed during the attempt: it starts afresh
            if e.failed(sha, now, error, limit, trigger):
                log.error("%s: gave up reviewing head %s after %d attempts: %s", ref, sha,
                          e.fail_count, error)
            return e
        await self.ctx.store.update_pr(ref, apply)
