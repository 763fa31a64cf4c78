"""What failed in a ``dsh run --once`` pass, as lines for its exit status.

cron relies on the exit code, so a pass counts as failed when an account's tick was skipped
(rate limited) or hit errors, or when any attempt of the pass failed: a review, a ``/bot``
command or a give-up notice — whether it waits to be retried or was given up. A failure left
from an earlier pass and not retried in this one is not reported again.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..app import ReviewerApp
    from ..sources.poll import PassResult


async def failures(app: ReviewerApp, results: dict[str, PassResult],
                   started: datetime) -> list[str]:
    out: list[str] = []
    for key, result in sorted(results.items()):
        if result.skipped:
            out.append(f"account {key}: pass skipped: {result.skipped}")
        out += [f"account {key}: {where}: {error}"
                for where, error in sorted(result.errors.items())]
        store = app.stores.get(key)
        if store is None:
            continue
        for ref, rec in sorted((await store.prs()).items(), key=lambda kv: kv[0].format()):
            where = f"account {key}: {ref.repo}#{ref.number}"
            if _since(rec.last_failed_at, started):
                out.append(f"{where}: review failed: {rec.last_error or 'no review was posted'}")
            out += [f"{where}: /bot {c.comment_id} failed, retried later: {c.last_error}"
                    for c in rec.queued if _since(c.last_failed_at, started)]
            out += [f"{where}: gave up on {n.what}: {n.error}"
                    for n in rec.notices if n.created_at >= started]
            out += [f"{where}: notice about {n.what} not posted: {n.post_error}"
                    for n in rec.notices
                    if not n.posted and _since(n.last_failed_at, started)]
    return out


def _since(at: datetime | None, started: datetime) -> bool:
    return at is not None and at >= started
