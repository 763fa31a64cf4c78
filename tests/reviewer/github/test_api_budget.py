"""GitHub traffic must not grow with the number of open PRs."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.github.feeds import FeedMarks, poll_repository
from tests.reviewer.conftest import small_repo


@pytest.mark.parametrize("prs", [5, 50])
async def test_idle_poll_costs_three_requests_then_all_304(client, sandbox, prs):
    st = small_repo(sandbox, prs=prs)
    start = st.now()
    marks = FeedMarks(issue_comments_since=start, review_comments_since=start)
    first = await poll_repository(client, "octo", "app", marks)
    assert first.complete and first.pulls == []   # the caller lists the open PRs in full
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


async def _first_and_idle(client, sandbox):
    start = sandbox.state.now()
    marks = FeedMarks(issue_comments_since=start, review_comments_since=start)
    first = await poll_repository(client, "octo", "app", marks)
    assert first.complete and first.marks.pulls_updated_since is not None
    return first


@pytest.mark.parametrize("prs", [3, 250])
async def test_idle_cost_does_not_grow_with_open_prs(client, sandbox, prs):
    """250 open PRs are three listing pages: only the first tick reads them all."""
    small_repo(sandbox, prs=prs)
    first = await _first_and_idle(client, sandbox)
    pages = [page async for page in client.open_pull_pages("octo", "app")]
    assert [len(p) for p in pages] == ([3] if prs == 3 else [100, 100, 50])
    sandbox.reset_log()
    for _ in range(3):
        idle = await poll_repository(client, "octo", "app", first.marks)
        assert idle.unchanged and idle.pulls == [] and not idle.complete
    assert sandbox.stats() == {"total": 9, "not_modified": 9, "rate_limited": 0, "errors": 0}


async def test_a_tick_reads_only_what_changed_and_sees_every_kind_of_change(client, sandbox):
    st = small_repo(sandbox, prs=6)
    for n in range(1, 7):   # distinct update times: only PR 6 sits on the first watermark
        st.advance(1)
        st.set_draft("octo/app", n, False)
    first = await _first_and_idle(client, sandbox)
    st.advance(5)
    st.commit("octo/app", "feature-2", {"app.py": "pushed\n"})      # a push
    st.close_pull("octo/app", 3)                                    # closed
    st.close_pull("octo/app", 4, merged=True)                       # merged
    st.commit("octo/app", "feature-7", {"new.py": "x\n"})
    st.open_pull("octo/app", "feature-7", title="new", body="", author="alice")
    sandbox.reset_log()
    snap = await poll_repository(client, "octo", "app", first.marks)
    assert not snap.complete and not snap.unchanged
    # PR 6 carries the inclusive watermark, so it comes back once; 1 and 5 did not change.
    assert sorted(p.number for p in snap.pulls) == [2, 6, 7]
    assert sorted(snap.closed) == [3, 4]
    assert {p.number: p.head.sha for p in snap.pulls}[2] == st.pull("octo/app", 2).head_sha
    assert sandbox.stats()["total"] == 3, "one listing page, two feeds"
    st.advance(5)
    st.reopen_pull("octo/app", 3)
    again = await poll_repository(client, "octo", "app", snap.marks)
    # The inclusive watermark brings the newest of the last changes back once, never PR 1.
    assert 3 in [p.number for p in again.pulls] and 1 not in [p.number for p in again.pulls]


async def test_a_retarget_is_seen_by_the_next_tick(client, sandbox):
    st = small_repo(sandbox, prs=2)
    st.commit("octo/app", "release", {"README.md": "release\n"})
    first = await _first_and_idle(client, sandbox)
    st.advance(5)
    st.change_base("octo/app", 1, "release")
    snap = await poll_repository(client, "octo", "app", first.marks)
    # PR 2 shares the watermark's second (the inclusive boundary); PR 1 is seen retargeted.
    assert (snap.pulls[0].number, snap.pulls[0].base.ref) == (1, "release")


async def test_more_changes_than_the_page_cap_fall_back_to_a_full_listing(client, sandbox):
    st = small_repo(sandbox, prs=120)
    first = await _first_and_idle(client, sandbox)
    client.page_cap = 1
    st.advance(5)
    for n in range(1, 121):   # 120 updates > one page of 100
        st.set_draft("octo/app", n, False)
    snap = await poll_repository(client, "octo", "app", first.marks)
    assert snap.complete and snap.pulls == [] and snap.closed == []


async def test_the_poll_etags_are_never_evicted_by_other_traffic(client, sandbox):
    """The conditional-request cache used to be smaller than one pass over a big listing and
    evicted each page just before the next tick needed it."""
    small_repo(sandbox, prs=3)
    first = await _first_and_idle(client, sandbox)
    client.cache_limit = 10   # the body cache can hold nothing
    for n in (1, 2, 3):
        await client.get_pull("octo", "app", n)
    sandbox.reset_log()
    idle = await poll_repository(client, "octo", "app", first.marks)
    assert idle.unchanged and sandbox.stats()["not_modified"] == 3


async def test_fresh_asks_without_etags(client, sandbox):
    """After a poll whose answers were never recorded, a 304 would hide them."""
    small_repo(sandbox, prs=2)
    first = await _first_and_idle(client, sandbox)
    sandbox.reset_log()
    snap = await poll_repository(client, "octo", "app", first.marks, fresh=True)
    assert not snap.unchanged and sandbox.stats()["not_modified"] == 0
