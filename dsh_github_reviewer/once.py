"""What failed in a ``dsh run --once`` pass, as lines for its exit status.

cron relies on the exit code, so a pass counts as failed when an account's tick was skipped
(rate limited) or hit errors, or when a review or command of the pass failed or was given up.
A failure left from an earlier pass and not retried in this one is not reported again.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from .work.records import split_pr_key

if TYPE_CHECKING:
    from .app import ReviewerApp
    from .poller import PassResult


async def failures(app: ReviewerApp, results: dict[str, PassResult],
                   started: datetime) -> list[str]:
    out: list[str] = []
    for key, result in sorted(results.items()):
        if result.skipped:
            out.append(f"account {key}: pass skipped: {result.skipped}")
        out += [f"account {key}: {where}: {error}"
                for where, error in sorted(result.errors.items())]
        store = app.accounts[key].store
        if store is None:
            continue
        for pr_key, rec in sorted((await store.prs()).items()):
            _, repo, number = split_pr_key(pr_key)
            if rec.last_failed_at is not None and rec.last_failed_at >= started:
                out.append(f"account {key}: {repo}#{number}: review failed: "
                           f"{rec.last_error or 'no review was posted'}")
            out += [f"account {key}: {repo}#{number}: gave up on {n.what}: {n.error}"
                    for n in rec.notices if n.created_at >= started]
    return out
