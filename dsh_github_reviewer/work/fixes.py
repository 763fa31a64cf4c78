"""Resolving a posted review's fixed threads until it is done (``PrRecord.fixes``).

Right after a review is posted (or found by its marker after a crash) the review procedure
resolves the threads the review names as fixed. When GitHub fails that (a 502 on
``resolveReviewThread``, on the "Fixed in <sha>" reply, or on a read before them), the work is
recorded on the PR's record — before the review itself is recorded ``reviewed`` — and the PR's
worker retries it with backoff. Every retry starts again from GitHub (the review's marker,
``isResolved``, the reply's ``fixed-in`` marker), so nothing is resolved or answered twice
however many tries and crashes it takes.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from ..core.failures import local_failure
from ..core.session_key import PrRef
from ..core.triggers import BotIdentity, fixed_threads
from ..github.client import GitHubClient
from ..github.errors import BadCredentials, GitHubError, RateLimited
from ..github.models import Review
from ..pr_output.threads import resolve_fixed
from .context import WorkContext, short_error
from .records import PrRecord

log = logging.getLogger(__name__)


def due(rec: PrRecord | None, now) -> list[int]:
    """The review ids whose fixed threads may be tried again now."""
    return [f.review_id for f in (rec.fixes if rec else [])
            if (f.next_attempt_at or now) <= now]


async def try_resolve(client: GitHubClient, me: BotIdentity, ref: PrRef, review: Review
                      ) -> str | None:
    """Resolve ``review``'s fixed threads (record-free: the procedure after a post, the worker's
    retries); the failure to record when GitHub failed it, else None. Rate limits, rejected
    credentials and local failures are raised: they pause the caller's work as a whole."""
    try:
        await resolve_fixed(client, ref.owner, ref.name, ref.number, review,
                            fixed_threads(review, me), me)
    except (RateLimited, BadCredentials):
        raise
    except Exception as exc:
        if local_failure(exc):
            raise
        if not isinstance(exc, GitHubError):
            log.exception("%s: cannot resolve the fixed threads of review %d", ref, review.id)
        return short_error(exc)
    return None


async def resolve(ctx: WorkContext, ref: PrRef, review: Review, owed: bool = False) -> bool:
    """Resolve ``review``'s fixed threads; on a GitHub failure record them as owed.

    ``owed``: the record already owes this review's resolution (cleared when done)."""
    error = await try_resolve(ctx.client, ctx.acct.identity, ref, review)
    if error is not None:
        await _failed(ctx, ref, review.id, error)
        return False
    if owed:
        await ctx.store.update_pr(ref, lambda e: _done(e, review.id))
    return True


async def resolve_owed(ctx: WorkContext, ref: PrRef) -> int:
    """Retry the PR's due resolutions (the worker); the number tried."""
    ids = due(await ctx.store.pr(ref), ctx.clock())
    if not ids:
        return 0
    listed = await _reviews(ctx, ref, ids)
    if listed is None:
        return len(ids)
    reviews = {r.id: r for r in listed}
    for review_id in ids:
        review = reviews.get(review_id)
        if review is None:
            log.warning("%s: review %d is gone; its fixed threads are not resolved", ref,
                        review_id)
            await ctx.store.update_pr(ref, lambda e, rid=review_id: _done(e, rid))
            continue
        if await resolve(ctx, ref, review, owed=True):
            log.info("%s: fixed threads of review %d resolved on a later try", ref, review_id)
    return len(ids)


async def _reviews(ctx: WorkContext, ref: PrRef, ids: list[int]) -> list[Review] | None:
    try:
        return await ctx.client.list_reviews(ref.owner, ref.name, ref.number)
    except (RateLimited, BadCredentials):
        raise
    except GitHubError as exc:
        for review_id in ids:
            await _failed(ctx, ref, review_id, short_error(exc))
        return None


async def _failed(ctx: WorkContext, ref: PrRef, review_id: int, error: str) -> None:
    now, interval = ctx.clock(), ctx.cfg.poll_interval_s
    gave_up = False

    def apply(e: PrRecord | None) -> PrRecord | None:
        nonlocal gave_up
        if e is not None:
            gave_up = e.owe_fix(review_id, error, now, interval) is None
        return e
    await ctx.store.update_pr(ref, apply)
    if gave_up:
        log.warning("%s: gave up resolving the fixed threads of review %d: %s", ref,
                    review_id, error)
    else:
        log.warning("%s: fixed threads of review %d not resolved yet (retried later): %s",
                    ref, review_id, error)


def _done(e: PrRecord | None, review_id: int) -> PrRecord | None:
    if e is not None:
        e.fix_done(review_id)
    return e


async def delay(ctx: WorkContext, ref: PrRef, wait_s: float, error: str) -> None:
    """Rate limited: the due resolutions wait ``wait_s``, no try counted."""
    until = ctx.clock() + timedelta(seconds=wait_s)

    def apply(e: PrRecord | None) -> PrRecord | None:
        for f in e.fixes if e else []:
            f.next_attempt_at, f.last_error = max(f.next_attempt_at or until, until), error
        return e
    await ctx.store.update_pr(ref, apply)


async def owe(ctx: WorkContext, ref: PrRef, review_id: int, error: str) -> None:
    """The review procedure could not resolve ``review_id``'s fixed threads: owed, retried by
    the worker with backoff."""
    await _failed(ctx, ref, review_id, error)
