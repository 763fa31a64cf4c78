"""One tick's view of a repository at a cost that does not grow with its open PRs.

Per repository, three conditional requests: page 1 of the PR listing ordered by last update
(every state), read down only to the newest update the last tick recorded, and the
repository-wide issue-comment and review-comment feeds. While nothing changes every URL stays
the same and GitHub answers 304 — free of rate limit — so an idle repository costs three free
requests at 10 or 10,000 open PRs. Opening, pushing to, retargeting, closing and merging a PR
all move its ``updated_at``, so each of them is seen by the next tick.

The open PRs are listed in full only when there is no watermark yet (a repository's first
poll) or when more changed since the last tick than the page cap reads. The feeds' ``since``
and the listing's watermark are inclusive, so boundary items come back once more; callers
dedupe (comment ids, recorded heads).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from .client import GitHubClient
from .models import IssueComment, PullSummary, ReviewComment


class FeedMarks(BaseModel):
    """Persisted per repository (in the account's work record)."""

    model_config = ConfigDict(extra="forbid")
    issue_comments_since: datetime
    review_comments_since: datetime
    # The newest PR update recorded; None until the repository's first full listing.
    pulls_updated_since: datetime | None = None


@dataclass
class RepoSnapshot:
    # Open PRs updated since the last tick; empty when ``complete``.
    pulls: list[PullSummary]
    issue_comments: list[IssueComment] = field(default_factory=list)
    review_comments: list[ReviewComment] = field(default_factory=list)
    marks: FeedMarks | None = None
    # PRs closed or merged since the last tick (empty when ``complete``).
    closed: list[int] = field(default_factory=list)
    # Those of them closed by a merge (the listing's ``merged_at``): the web UI says "merged".
    merged: list[int] = field(default_factory=list)
    # The caller must list every open PR (``GitHubClient.open_pull_pages``): a repository's
    # first poll, or more changed than the page cap reads.
    complete: bool = False
    unchanged: bool = False


async def poll_repository(client: GitHubClient, owner: str, repo: str, marks: FeedMarks, *,
                          fresh: bool = False) -> RepoSnapshot:
    """``fresh``: the last poll's answers were never recorded, so ask without ETags (a 304
    would hide what was never recorded)."""
    since = marks.pulls_updated_since
    changes = await client.pulls_updated_since(owner, repo, since, fresh=fresh)
    issue, issue_same = await client.issue_comments_since(
        owner, repo, marks.issue_comments_since, fresh=fresh)
    review, review_same = await client.review_comments_since(
        owner, repo, marks.review_comments_since, fresh=fresh)
    watermark = max([t for t in (since, changes.newest) if t is not None], default=None)
    complete = since is None or not changes.reached
    pulls = [] if complete else [p for p in changes.pulls if p.state == "open"]
    closed = [] if complete else [p.number for p in changes.pulls if p.state != "open"]
    merged = [] if complete else [p.number for p in changes.pulls
                                  if p.state != "open" and p.merged_at is not None]
    new_marks = FeedMarks(
        issue_comments_since=max([marks.issue_comments_since, *(c.updated_at for c in issue)]),
        review_comments_since=max([marks.review_comments_since,
                                   *(c.updated_at for c in review)]),
        pulls_updated_since=watermark)
    return RepoSnapshot(pulls=pulls, issue_comments=issue, review_comments=review,
                        marks=new_marks, closed=closed, merged=merged, complete=complete,
                        unchanged=changes.unchanged and issue_same and review_same)
