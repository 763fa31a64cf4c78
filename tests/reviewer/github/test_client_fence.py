"""A PR's client (``GitHubClient.fenced``): every write proves the PR's lease right before it is
sent; a refused write never reaches GitHub; reads are not fenced; everything else (rate-limit
state, caches, counters) is the account client's."""

from __future__ import annotations

import json

import httpx2
import pytest

from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient
from dsh_harness import OPEN_FENCE, Fence, FencedOut

API = "https://api.example.test"


class Gate(Fence):
    """Counts checks; refuses once ``open`` is False (a stale holder)."""

    def __init__(self) -> None:
        self.open, self.checks = True, []

    async def check(self, what: str) -> None:
        self.checks.append(what)
        if not self.open:
            raise FencedOut(f"{what} refused")


def client(sent: list) -> GitHubClient:
    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(f"{request.method} {request.url.path}")
        if request.url.path.endswith("/graphql"):
            return httpx2.Response(200, json={"data": {"ok": True}})
        if request.method == "GET":
            return httpx2.Response(200, json=[])
        return httpx2.Response(201, json={"id": 1})
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    return GitHubClient(API, PatAuth("ghp_test"), http)


async def test_writes_prove_the_fence_and_a_refused_write_is_never_sent():
    sent: list = []
    account = client(sent)
    gate = Gate()
    pr = account.fenced(gate)
    assert account.fence is OPEN_FENCE and pr.fence is gate
    await pr.add_reaction("o", "r", 5, "eyes", review_comment=False)
    await pr.graphql("mutation($i: X!) { resolveReviewThread(input: $i) { thread { id } } }",
                     {"i": {}})
    await pr.list_reviews("o", "r", 1)  # a read: no proof needed
    await pr.graphql("query { viewer { login } }", {})
    assert gate.checks == ["POST repos/o/r/issues/comments/5/reactions",
                           f"POST {API}/graphql"]
    gate.open = False
    writes = [pr.post_issue_comment("o", "r", 1, "summary"),
              pr.edit_issue_comment("o", "r", 9, "summary"),
              pr.reply_to_review_comment("o", "r", 1, 7, "answer"),
              pr.create_review("o", "r", 1, commit_id="abc", body="b", event="COMMENT",
                               comments=[]),
              pr.delete_pending_review("o", "r", 1, 3),
              pr.graphql("mutation { resolveReviewThread(input: {}) { thread { id } } }", {})]
    before = list(sent)
    for write in writes:
        with pytest.raises(FencedOut):
            await write
    assert sent == before, "no refused write reached GitHub"
    assert len(gate.checks) == 2 + len(writes)
    await account.add_reaction("o", "r", 5, "eyes", review_comment=False)  # the account's
    assert sent[-1] == "POST /repos/o/r/issues/comments/5/reactions"  # own client: unfenced
    await account.http.aclose()


async def test_the_fenced_view_shares_the_account_clients_state():
    sent: list = []
    account = client(sent)
    pr = account.fenced(Gate())
    pr.blocked_until = 123.0  # a rate limit seen by the PR's work holds for the account
    assert account.blocked_until == 123.0
    account.blocked_until = 0.0
    await pr.list_reviews("o", "r", 1)
    assert account.counters.requests == 1 and pr.counters is account.counters
    again = pr.fenced(OPEN_FENCE)
    assert again.fence is OPEN_FENCE and again.counters is account.counters
    assert json.loads(json.dumps(sent)) == ["GET /repos/o/r/pulls/1/reviews"]
    await account.http.aclose()
