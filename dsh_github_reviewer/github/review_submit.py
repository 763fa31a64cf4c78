"""Posting the review: once per trigger, atomically, with no pending review left behind.

The guard keeps the model's review as a local draft and posts it in one REST call
(``POST …/reviews`` with ``event=COMMENT`` and its inline comments). Nothing is pending on
GitHub while the model works, so a crash before the submit leaves nothing behind, and the
github-mcp-server 0.12.1 ``reviews(first: 1)`` problem (re-reviews fail once the bot has an
older review) cannot occur. The review body carries a hidden trigger marker; before posting,
the PR's reviews are checked for it, so a retried or resumed turn never posts twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ..core.sanitizer import redact_secrets
from ..core.triggers import Trigger, review_marker
from .client import GitHubClient
from .errors import GitHubError
from .models import Review

log = logging.getLogger(__name__)

@dataclass
class DraftComment:
    path: str
    body: str
    subject_type: str
    line: int | None = None
    side: str | None = None
    start_line: int | None = None
    start_side: str | None = None


@dataclass
class Draft:
    commit_id: str
    comments: list[DraftComment] = field(default_factory=list)


def review_payload(draft: Draft, body: str, trigger: Trigger | str
                   ) -> tuple[str, list[dict[str, Any]]]:
    """The review body (redacted, file-level notes folded in, marker last) and line comments."""
    notes = [f"**`{c.path}`**: {redact_secrets(c.body)}" for c in draft.comments
             if c.subject_type == "FILE"]
    parts = [redact_secrets(body).strip()]
    if notes:
        parts.append("File comments:\n\n" + "\n\n".join(notes))
    parts.append(review_marker(trigger))
    comments = []
    for c in draft.comments:
        if c.subject_type != "LINE":
            continue
        item: dict[str, Any] = {"path": c.path, "body": redact_secrets(c.body), "line": c.line,
                                "side": c.side}
        if c.start_line is not None:
            item.update({"start_line": c.start_line, "start_side": c.start_side})
        comments.append(item)
    return "\n\n".join(parts), comments


async def find_posted(client: GitHubClient, owner: str, repo: str, number: int,
                      trigger: Trigger | str) -> Review | None:
    tag = review_marker(trigger)
    for review in await client.list_reviews(owner, repo, number):
        if review.state != "PENDING" and review.body and tag in review.body:
            return review
    return None


async def post_review(client: GitHubClient, owner: str, repo: str, number: int,
                      draft: Draft, body: str, trigger: Trigger | str) -> tuple[Review, bool]:
    """(the review, whether this call posted it) — an earlier post for the trigger is reused."""
    existing = await find_posted(client, owner, repo, number, trigger)
    if existing is not None:
        log.info("%s/%s#%d: review for trigger %s already posted (%s)", owner, repo, number,
                 trigger, existing.id)
        return existing, False
    full_body, comments = review_payload(draft, body, trigger)
    try:
        review = await client.create_review(owner, repo, number, commit_id=draft.commit_id,
                                            body=full_body, event="COMMENT", comments=comments)
    except GitHubError as exc:
        if exc.status != 422 or "pending review" not in str(exc):
            raise
        # A pending review of ours (left by an older version or a manual MCP session) blocks
        # any new review; pending reviews are visible to their author only, so all listed
        # ones are ours.
        for stale in await client.list_reviews(owner, repo, number):
            if stale.state == "PENDING":
                log.warning("%s/%s#%d: deleting a stale pending review %s", owner, repo,
                            number, stale.id)
                await client.delete_pending_review(owner, repo, number, stale.id)
        review = await client.create_review(owner, repo, number, commit_id=draft.commit_id,
                                            body=full_body, event="COMMENT", comments=comments)
    return review, True
