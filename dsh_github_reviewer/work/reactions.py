"""Acknowledging commands at once: the reactions a PR record owes (👀 recorded, 😕 refused).

The inbox records an owed reaction in the same write as the command (before the poll's feed
marks move or the webhook delivery is answered). This adds them and removes each from the
record once GitHub has it. It runs at the front of the PR's work and, when that work is busy
with a long review, on its own (``Scheduler``), so a command is acknowledged within a second of
its webhook delivery. Adding a reaction GitHub already has changes nothing (200, not 201), so a
crash between the add and the record's update never shows two.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from ..core.failures import local_failure
from ..core.session_key import PrRef
from ..github.errors import GitHubError, NotFound, RateLimited
from .context import WorkContext, short_error
from .records import REACTION_ATTEMPTS, PrRecord, Reaction, backoff

log = logging.getLogger(__name__)


def due(rec: PrRecord | None, now) -> list[Reaction]:
    return [r for r in (rec.reactions if rec else []) if (r.next_attempt_at or now) <= now]


async def add_owed(ctx: WorkContext, ref: PrRef) -> int:
    """Add the PR's due reactions; the number handled (added, gone, or given up)."""
    now = ctx.clock()
    owed = due(await ctx.store.pr(ref), now)
    done: set[tuple[int, str]] = set()
    failed: dict[tuple[int, str], tuple[str, float | None]] = {}
    for r in owed:
        ident = (r.comment_id, r.content)
        try:
            await ctx.client.add_reaction(ref.owner, ref.name, r.comment_id, r.content,
                                          review_comment=r.source == "review")
            done.add(ident)
        except NotFound:
            done.add(ident)   # the comment was deleted: nothing to acknowledge
        except RateLimited as exc:
            failed[ident] = (short_error(exc), exc.wait_s)
        except Exception as exc:
            if local_failure(exc):
                raise
            if not isinstance(exc, GitHubError):
                log.exception("%s: cannot add a reaction", ref)
            failed[ident] = (short_error(exc), None)
    if not owed:
        return 0
    interval = ctx.cfg.poll_interval_s

    def apply(e: PrRecord | None) -> PrRecord | None:
        if e is None:
            return None
        kept = []
        for r in e.reactions:
            ident = (r.comment_id, r.content)
            if ident in done:
                continue
            if ident in failed:
                error, wait = failed[ident]
                r.attempts += 1 if wait is None else 0
                if r.attempts >= REACTION_ATTEMPTS:
                    log.warning("%s: gave up adding %s to comment %d: %s", ref, r.content,
                                r.comment_id, error)
                    continue
                r.next_attempt_at = now + (timedelta(seconds=wait) if wait
                                           else backoff(r.attempts, interval))
            kept.append(r)
        e.reactions = kept
        return e
    await ctx.store.update_pr(ref, apply)
    return len(owed)
