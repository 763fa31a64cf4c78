"""Resolving the bot's threads a push fixed, exactly once.

The model names the fixed threads when it submits (``fixedThreads``); the posted review carries
them in a hidden marker, so this runs from what is on GitHub — after the post, and again after
a crash before the PR's record said ``reviewed``. For each named thread: only a thread whose root
comment the bot wrote in one of its reviews; resolved through GraphQL ``resolveReviewThread``,
then one reply "Fixed in <sha>" carrying a marker. The marker makes every step idempotent and
keeps the bot's hands off a thread a person unresolved: a thread that is open again although the
bot already replied in it was reopened by someone, and stays open.
"""

from __future__ import annotations

import logging

from ..core.triggers import FIXED_IN_MARKER, is_review_post
from ..github.client import GitHubClient
from ..github.models import Review
from ..github.threads import thread_states

log = logging.getLogger(__name__)

RESOLVE = ("mutation($input: ResolveReviewThreadInput!) { resolveReviewThread(input: $input) "
           "{ thread { id isResolved } } }")


def fixed_reply(root_id: int, head_sha: str) -> str:
    return f"Fixed in {head_sha}.\n\n{FIXED_IN_MARKER.format(id=root_id)}"


async def resolve_fixed(client: GitHubClient, owner: str, repo: str, number: int,
                        review: Review, fixed: list[int]) -> list[int]:
    """Resolve and answer the threads ``review`` names as fixed; the ids resolved now."""
    if not fixed:
        return []
    reviews = [r for r in await client.list_reviews(owner, repo, number)
               if r.state != "PENDING" and is_review_post(r.body)]
    bot = (review.user.login if review.user else "").lower()
    mine = {r.id for r in reviews if r.user and r.user.login.lower() == bot}
    comments = await client.list_review_comments(owner, repo, number)
    roots = {c.id: c for c in comments if c.in_reply_to_id is None
             and c.pull_request_review_id in mine and c.user.login.lower() == bot}
    states = await thread_states(client, owner, repo, number)
    head = review.commit_id or ""
    done = []
    for root_id in fixed:
        root, state = roots.get(root_id), states.get(root_id)
        if root is None or state is None or state.node_id is None:
            log.warning("%s/%s#%d: thread %d is not one of the bot's threads; not resolved",
                        owner, repo, number, root_id)
            continue
        marker = FIXED_IN_MARKER.format(id=root_id)
        replied = any(c.in_reply_to_id == root_id and marker in (c.body or "")
                      for c in comments)
        if replied and not state.resolved:
            log.info("%s/%s#%d: thread %d was reopened by a person; left open", owner, repo,
                     number, root_id)
            continue
        if not state.resolved:
            await client.graphql(RESOLVE, {"input": {"threadId": state.node_id}})
            done.append(root_id)
        if not replied:
            await client.reply_to_review_comment(owner, repo, number, root_id,
                                                 fixed_reply(root_id, head))
    if done:
        log.info("%s/%s#%d: resolved fixed thread(s) %s", owner, repo, number, done)
    return done
