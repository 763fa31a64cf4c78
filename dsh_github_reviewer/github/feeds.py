"""One tick's view of a repository at a cost that does not grow with its open PRs.

Per repository: the open-PR listing plus the repository-wide issue-comment and review-comment
feeds, all conditional requests. The feeds' ``since`` only moves when a comment newer than it
arrived, so while nothing changes every URL stays the same and GitHub answers 304 — free of
rate limit. ``since`` is inclusive, so the boundary comment comes back once more; callers
dedupe by comment id.
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


@dataclass
class RepoSnapshot:
    pulls: list[PullSummary]
    issue_comments: list[IssueComment] = field(default_factory=list)
    review_comments: list[ReviewComment] = field(default_factory=list)
    marks: FeedMarks | None = None
    unchanged: bool = False
    pulls_unchanged: bool = False


async def poll_repository(client: GitHubClient, owner: str, repo: str,
                          marks: FeedMarks) -> RepoSnapshot:
    pulls, pulls_cached = await client.list_open_pulls(owner, repo)
    issue, issue_cached = await client.issue_comments_since(owner, repo,
                                                            marks.issue_comments_since)
    review, review_cached = await client.review_comments_since(owner, repo,
                                                               marks.review_comments_since)
    new_marks = FeedMarks(
        issue_comments_since=max([marks.issue_comments_since, *(c.updated_at for c in issue)]),
        review_comments_since=max([marks.review_comments_since,
                                   *(c.updated_at for c in review)]))
    return RepoSnapshot(pulls=pulls, issue_comments=issue, review_comments=review,
                        marks=new_marks,
                        unchanged=pulls_cached and issue_cached and review_cached,
                        pulls_unchanged=pulls_cached)
