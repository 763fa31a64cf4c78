"""GitHub traffic must not grow with the number of open PRs."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.github.feeds import FeedMarks, poll_repository

from .conftest import small_repo


@pytest.mark.parametrize("prs", [5, 50])
async def test_idle_poll_costs_three_requests_then_all_304(client, sandbox, prs):
    st = small_repo(sandbox, prs=prs)
    start = st.now()
    marks = FeedMarks(issue_comments_since=start, review_comments_since=start)
    first = await poll_repository(client, "octo", "app", marks)
    assert len(first.pulls) == prs
    sandbox.reset_log()
    idle = await poll_repository(client, "octo", "app", first.marks)
    stats = sandbox.stats()
    assert stats["total"] <= 3
    assert stats["not_modified"] == stats["total"], "an idle poll must be all 304s"
    assert idle.unchanged and idle.marks == first.marks


async def test_new_comment_moves_the_watermark_and_is_seen_once_more_at_most(client, sandbox):
    st = small_repo(sandbox, prs=3)
    start = st.now()
    marks = FeedMarks(issue_comments_since=start, review_comments_since=start)
    snap = await poll_repository(client, "octo", "app", marks)
    st.advance(5)
    c = st.add_issue_comment("octo/app", 2, "alice", "/review")
    snap = await poll_repository(client, "octo", "app", snap.marks)
    assert [x.id for x in snap.issue_comments] == [c.id] and not snap.unchanged
    assert snap.marks.issue_comments_since == c.updated_at
    again = await poll_repository(client, "octo", "app", snap.marks)
    # The inclusive boundary returns the same comment once more (callers dedupe by id); the
    # moved `since` is a new URL, so this poll pays one full request...
    assert [x.id for x in again.issue_comments] == [c.id]
    sandbox.reset_log()
    # ...and from then on, while nothing changes, every request is a free 304.
    idle = await poll_repository(client, "octo", "app", again.marks)
    assert idle.unchanged and sandbox.stats() == {"total": 3, "not_modified": 3,
                                                  "rate_limited": 0, "errors": 0}
