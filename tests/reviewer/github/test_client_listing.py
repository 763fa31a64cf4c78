"""All open PRs are listed (no page cap), each page conditional; the ETag cache is bounded by
bytes; malformed JSON is a GitHubError naming the endpoint."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient
from dsh_github_reviewer.github.errors import GitHubError
from tests.reviewer.conftest import BOT_TOKEN, small_repo


async def test_open_pulls_are_listed_past_the_page_cap_and_each_page_is_conditional(
        sandbox, http):
    small_repo(sandbox, prs=120)
    client = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http, page_cap=1)
    pulls, cached = await client.list_open_pulls("octo", "app")
    assert len(pulls) == 120 and not cached, "the newest PRs are not cut off"
    sandbox.reset_log()
    again, cached = await client.list_open_pulls("octo", "app")
    assert len(again) == 120 and cached
    assert sandbox.stats()["total"] == 2 == sandbox.stats()["not_modified"]


async def test_etag_cache_is_bounded_by_bytes_and_still_answers_304(sandbox, http):
    small_repo(sandbox, prs=8)
    client = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http)
    one = len((await http.get(f"{sandbox.api_url}/repos/octo/app/pulls/1",
                              headers={"Authorization": f"Bearer {BOT_TOKEN}"})).text)
    client.cache_limit = 5 * one      # room for about five single-PR answers
    for n in range(1, 9):
        await client.get_pull("octo", "app", n)
    assert 0 < client.cache_bytes <= client.cache_limit
    assert client.cache_bytes == sum(len(t) for c in client._etags.values()
                                     for _, t in c.values())
    sandbox.reset_log()
    assert (await client.get_pull("octo", "app", 8)).number == 8   # recent: a free 304
    assert (await client.get_pull("octo", "app", 1)).number == 1   # evicted: a full answer
    assert [e.status for e in sandbox.log] == [304, 200]


async def test_malformed_json_is_a_github_error_naming_the_endpoint(sandbox, http):
    small_repo(sandbox)
    client = GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http)
    sandbox.inject_bad_json(path_contains="/pulls/1")
    with pytest.raises(GitHubError,
                       match=r"GET repos/octo/app/pulls/1: response is not valid JSON"):
        await client.get_pull("octo", "app", 1)
    assert (await client.get_pull("octo", "app", 1)).number == 1, "nothing bad was cached"
