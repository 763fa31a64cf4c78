"""A page that is a 304 with the ETag it was parsed under is handed back without decoding or
validating it again; a page that changed (or a list evicted from the memo) is decoded, its
changed items validated, and what comes back is always what a fresh client reads."""

from __future__ import annotations

from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient
from tests.reviewer.conftest import BOT_TOKEN, small_repo


def issue_comments(c):
    return c.list_issue_comments("octo", "app", 1)


async def fresh(sandbox, http, read):
    return await read(GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http))


async def test_an_unchanged_list_is_not_parsed_again_and_a_changed_page_is(sandbox, http):
    st = small_repo(sandbox, prs=120)
    client = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http)
    pulls, cached = await client.list_open_pulls("octo", "app")
    assert len(pulls) == 120 and not cached
    sandbox.reset_log()
    again, cached = await client.list_open_pulls("octo", "app")
    assert cached and again == pulls and again is not pulls
    assert all(a is b for a, b in zip(again, pulls, strict=True)), "not parsed again"
    assert [e.status for e in sandbox.log] == [304, 304]

    # A new PR changes the last page only: page 1 is a 304 and its models come back as they
    # were (not decoded again); page 2 is parsed afresh.
    st.commit("octo/app", "feature-new", {"app.py": "def f(x):\n    return 0\n"})
    st.open_pull("octo/app", "feature-new", title="PR new", body="", author="alice")
    sandbox.reset_log()
    grown, cached = await client.list_open_pulls("octo", "app")
    assert [e.status for e in sandbox.log] == [304, 200] and not cached
    assert grown == (await fresh(sandbox, http, lambda c: c.list_open_pulls("octo", "app")))[0]
    assert [p.title for p in grown][-1] == "PR new" and len(grown) == 121
    assert all(a is b for a, b in zip(grown[:100], pulls[:100], strict=True)), "page 1 reused"


async def test_a_page_that_changed_in_the_middle_is_parsed_again(sandbox, http):
    """Page 1 changing (an item edited) while page 2 stays: page 2's models are reused, page
    1's edited item is new, and the list is what a fresh client reads."""
    st = small_repo(sandbox)
    client = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http)
    made = [st.add_issue_comment("octo/app", 1, "alice", f"note {i}") for i in range(130)]
    first = await issue_comments(client)
    st.edit_issue_comment(made[5], "note 5, edited")
    sandbox.reset_log()
    second = await issue_comments(client)
    assert [e.status for e in sandbox.log] == [200, 304]
    assert second == await fresh(sandbox, http, issue_comments)
    assert second[5].body == "note 5, edited" and second[5] is not first[5]
    assert second[4] is first[4] and all(a is b for a, b in zip(second[100:], first[100:],
                                                                 strict=True))


async def test_review_comments_follow_every_change(sandbox, http):
    st = small_repo(sandbox)
    client = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http)

    def read(c):
        return c.list_review_comments("octo", "app", 1)
    assert await read(client) == []
    for i in range(3):
        st.add_review_comment("octo/app", 1, "alice", f"comment {i}", path="app.py", line=2)
        first = await read(client)
        assert first == await read(client) == await fresh(sandbox, http, read)
        assert [c.body for c in first] == [f"comment {k}" for k in range(i + 1)]


async def test_a_grown_list_validates_only_the_items_that_changed(sandbox, http):
    st = small_repo(sandbox)
    client = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http)
    made = [st.add_issue_comment("octo/app", 1, "alice", f"note {i}") for i in range(3)]
    first = await issue_comments(client)
    st.add_issue_comment("octo/app", 1, "alice", "note 3")
    st.edit_issue_comment(made[1], "note 1, edited")
    second = await issue_comments(client)
    assert second == await fresh(sandbox, http, issue_comments)
    assert [c.body for c in second] == ["note 0", "note 1, edited", "note 2", "note 3"]
    assert second[0] is first[0] and second[2] is first[2], "unchanged items reused"
    assert second[1] is not first[1]


async def test_the_memo_is_bounded_by_items(sandbox, http, monkeypatch):
    import dsh_github_reviewer.github.client as client_module

    small_repo(sandbox, prs=30)
    monkeypatch.setattr(client_module, "LIST_MEMO_ITEMS", 40)
    client = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http)
    for n in range(1, 31):
        await client.list_pull_files("octo", "app", n)
    assert 0 < client._list_items <= 40
    assert client._list_items == sum(e.size for e in client._lists.values())
    # An evicted list is parsed from the ETag cache's text: still a 304, still right.
    sandbox.reset_log()
    files = await client.list_pull_files("octo", "app", 1)
    assert [e.status for e in sandbox.log] == [304]
    assert files == await fresh(sandbox, http,
                                lambda c: c.list_pull_files("octo", "app", 1))
