"""The review threads of a pull request and their resolution state (GraphQL ``reviewThreads``):
read before a review turn (feedback) and after a post (resolving fixed threads)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .client import GitHubClient
from .errors import GitHubError

log = logging.getLogger(__name__)

THREAD_PAGES = 10
THREADS_QUERY = (
    "query($owner: String!, $name: String!, $number: Int!, $after: String) { "
    "repository(owner: $owner, name: $name) { pullRequest(number: $number) { reviewThreads("
    "first: 100, after: $after) { pageInfo { hasNextPage endCursor } nodes { id isResolved "
    "isOutdated resolvedBy { login } comments(first: 1) { nodes { databaseId } } } } } } }")


@dataclass
class ThreadState:
    resolved: bool
    outdated: bool
    resolved_by: str | None
    node_id: str | None = None   # for resolveReviewThread


async def thread_states(client: GitHubClient, owner: str, repo: str, number: int
                        ) -> dict[int, ThreadState]:
    """Root comment id -> resolution; empty (and logged) when GraphQL is unavailable."""
    out: dict[int, ThreadState] = {}
    after = None
    try:
        for _ in range(THREAD_PAGES):
            data = await client.graphql(THREADS_QUERY, {"owner": owner, "name": repo,
                                                        "number": number, "after": after})
            threads = data["repository"]["pullRequest"]["reviewThreads"]
            for node in threads["nodes"]:
                roots = node["comments"]["nodes"]
                if roots and roots[0].get("databaseId") is not None:
                    by = node.get("resolvedBy") or {}
                    out[int(roots[0]["databaseId"])] = ThreadState(
                        bool(node["isResolved"]), bool(node["isOutdated"]), by.get("login"),
                        node.get("id"))
            if not threads["pageInfo"]["hasNextPage"]:
                break
            after = threads["pageInfo"]["endCursor"]
    except (GitHubError, KeyError, TypeError) as exc:
        log.warning("%s/%s#%d: thread resolution unavailable: %s", owner, repo, number, exc)
    return out
