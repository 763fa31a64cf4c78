"""REST client against the sandbox: conditional requests, rate limits, errors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient, file_path, seg
from dsh_github_reviewer.github.errors import BadCredentials, GitHubError, NotFound, RateLimited
from tests.reviewer.conftest import BOT_TOKEN, small_repo


async def test_endpoints(client, sandbox):
    st = small_repo(sandbox)
    st.add_issue_comment("octo/app", 1, "alice", "hello")
    pulls, _ = await client.list_open_pulls("octo", "app")
    assert [p.number for p in pulls] == [1]
    pr = await client.get_pull("octo", "app", 1)
    assert (pr.changed_files, pr.additions, pr.deletions) == (1, 1, 1)
    assert await client.get_file_text("octo", "app", "app.py", pr.head.sha) == \
        "def f(x):\n    return x + 1\n"
    with pytest.raises(NotFound):
        await client.get_file_text("octo", "app", ".github/review_instructions.md", "main")
    c = await client.post_issue_comment("octo", "app", 1, "from the bot")
    assert c.user.login == "dsh-bot" and c.number == 1
    comments = await client.list_issue_comments("octo", "app", 1)
    assert [x.body for x in comments] == ["hello", "from the bot"]
    root = st.add_review_comment("octo/app", 1, "alice", "why?", path="app.py", line=2)
    reply = await client.reply_to_review_comment("octo", "app", 1, root.id, "because")
    assert reply.in_reply_to_id == root.id and reply.path == "app.py"
    review = await client.create_review("octo", "app", 1, commit_id=pr.head.sha, body="sum",
                                        event="COMMENT", comments=[])
    assert [r.id for r in await client.list_reviews("octo", "app", 1)] == [review.id]
    assert await client.list_repositories() == ["octo/app"]


async def test_conditional_requests_are_per_credential(sandbox, http):
    small_repo(sandbox)
    other = sandbox.add_token("other-bot", "ghp_" + "0" * 36)
    a = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http)
    b = GitHubClient(sandbox.api_url, PatAuth(other), http)
    await a.list_open_pulls("octo", "app")
    _, cached = await a.list_open_pulls("octo", "app")
    assert cached and a.counters.not_modified == 1
    shared = GitHubClient(sandbox.api_url, PatAuth(other), http)
    shared._etags = a._etags   # even sharing the cache object, keys differ per token
    _, cached = await shared.list_open_pulls("octo", "app")
    assert not cached
    _, cached = await b.list_open_pulls("octo", "app")
    assert not cached


@pytest.mark.parametrize("kind", ["secondary", "primary"])
async def test_rate_limits_raise_with_wait_and_block_until_then(client, sandbox, kind):
    small_repo(sandbox)
    sandbox.inject_rate_limit(kind, wait_s=120)
    with pytest.raises(RateLimited) as exc:
        await client.list_open_pulls("octo", "app")
    assert 100 <= exc.value.wait_s <= 121
    before = sandbox.stats()["total"]
    with pytest.raises(RateLimited, match="waiting"):
        await client.get_pull("octo", "app", 1)
    assert sandbox.stats()["total"] == before, "no call may be made before the wait passed"
    client.blocked_until = 0
    assert (await client.get_pull("octo", "app", 1)).number == 1


async def test_errors_truncated_and_never_leak_the_token(client, sandbox):
    small_repo(sandbox)
    sandbox.inject_error(502)
    with pytest.raises(GitHubError) as exc:
        await client.get_pull("octo", "app", 1)
    assert exc.value.status == 502 and "HTTP 502" in str(exc.value)
    assert BOT_TOKEN not in str(exc.value)
    with pytest.raises(NotFound):
        await client.get_pull("octo", "app", 999)
    bad = GitHubClient(sandbox.api_url, PatAuth("ghp_" + "9" * 36), client.http)
    with pytest.raises(BadCredentials) as exc:   # the account pauses on it (work/pause.py)
        await bad.get_pull("octo", "app", 1)
    assert str(exc.value) == ("GET repos/octo/app/pulls/1: HTTP 401: GitHub rejected the token "
                              "(bad, revoked or expired credentials)")


async def test_pagination_with_page_cap(sandbox, http):
    st = small_repo(sandbox)
    for i in range(25):
        st.add_issue_comment("octo/app", 1, "alice", f"c{i}")
    client = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http, page_cap=2)
    items, _ = await client.paginate("repos/octo/app/issues/1/comments", per_page=10)
    assert len(items) == 20
    client.page_cap = 10
    items, _ = await client.paginate("repos/octo/app/issues/1/comments", per_page=10)
    assert len(items) == 25


async def test_feeds_since(client, sandbox):
    st = small_repo(sandbox)
    st.add_issue_comment("octo/app", 1, "alice", "old")
    st.advance(10)
    cutoff = st.now()
    st.add_issue_comment("octo/app", 1, "alice", "new")
    st.add_review_comment("octo/app", 1, "alice", "inline", path="app.py", line=2)
    issue, _ = await client.issue_comments_since("octo", "app", cutoff)
    review, _ = await client.review_comments_since("octo", "app", cutoff)
    assert [c.body for c in issue] == ["new"] and [c.body for c in review] == ["inline"]
    assert review[0].number == 1 and issue[0].updated_at >= cutoff
    everything, _ = await client.issue_comments_since("octo", "app", datetime(2000, 1, 1,
                                                                                tzinfo=UTC))
    assert len(everything) == 2


def test_url_encoding():
    assert seg("o w", "r#1") == "o%20w/r%231"
    assert file_path("/dir/a b/c?.md") == "dir/a%20b/c%3F.md"


async def test_ghes_base_url_and_special_paths(sandbox, http):
    st = small_repo(sandbox)
    st.commit("octo/app", "main", {"docs/a b.md": "spaced\n"})
    client = GitHubClient(sandbox.api_url + "/", PatAuth(BOT_TOKEN), http)
    assert client.api_url.endswith("/api/v3")
    assert await client.get_file_text("octo", "app", "docs/a b.md", "main") == "spaced\n"
