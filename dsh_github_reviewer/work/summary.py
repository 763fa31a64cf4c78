"""Keeping the PR's summary comment current (``pr_output/summary.py`` renders and posts it):
when a review starts ("reviewing <sha>…"), after it is posted, and after a ``/bot`` answer.
It never fails the work it follows: a GitHub error is logged and the next update catches up."""

from __future__ import annotations

import logging

from ..core.session_key import PrKey
from ..core.triggers import is_review_post
from ..github.errors import GitHubError
from ..github.threads import thread_states
from ..pr_output.summary import Summary, findings_of, render, upsert
from .context import WorkContext, repo_of

log = logging.getLogger(__name__)
FILES_PAGE_CAP = 30


async def update_summary(ctx: WorkContext, key: str, *, reviewing: str | None,
                         last_reviewed: str | None) -> None:
    if not ctx.cfg.review.summary:
        return
    owner, name, number = repo_of(key)
    client = ctx.client
    try:
        files = await client.list_pull_files(owner, name, number, max_pages=FILES_PAGE_CAP)
        reviews = [r for r in await client.list_reviews(owner, name, number)
                   if r.state != "PENDING" and is_review_post(r.body)]
        ids = {r.id for r in reviews}
        comments = await client.list_review_comments(owner, name, number) if ids else []
        roots = any(c.pull_request_review_id in ids and c.in_reply_to_id is None
                    for c in comments)
        states = await thread_states(client, owner, name, number) if roots else {}
        summary = Summary(files=files, findings=findings_of(comments, ids, states),
                          reviewing=reviewing, last_reviewed=last_reviewed,
                          reviews=len(reviews))
        await _usage(ctx, key, summary)
        await upsert(client, owner, name, number, render(summary))
    except GitHubError as exc:
        log.warning("%s: summary comment not updated: %s", key, exc)


async def _usage(ctx: WorkContext, key: str, summary: Summary) -> None:
    """The PR session's tokens and cost, read from its log (no model call)."""
    owner, name, number = repo_of(key)
    sid = PrKey(ctx.acct.key, owner, name, number).session_id
    harness = getattr(ctx.runner, "harness", None)   # the reviewers hold the harness
    if harness is None:
        return
    try:
        log_ = await harness.sessions.read(sid)
    except Exception:   # no session yet (or unreadable): the summary goes without cost
        return
    for e in log_.events:
        usage = getattr(e, "usage", None) if e.type in ("assistant_message",
                                                        "compaction") else None
        if usage is not None:
            summary.cost_usd += usage.cost_usd
            summary.prompt_tokens += usage.prompt
            summary.cache_read_tokens += usage.cache_read
