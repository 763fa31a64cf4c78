"""Resolving the bot's threads a push fixed, exactly once.

The model names the fixed threads when it submits (``fixedThreads``); the posted review carries
them in a hidden marker, so this runs from what is on GitHub — after the post, and again after
a crash before the PR's record said ``reviewed``. For each named thread: only a thread whose root
comment the bot wrote in one of its reviews; resolved through GraphQL ``resolveReviewThread``,
then one reply "Fixed in <sha>" carrying a marker. The marker makes every step idempotent and
keeps the bot's hands off a thread a person unresolved: a thread that is open again although the
bot already replied in it was reopened by someone, and stays open. Only the bot's own words
count: the review naming the threads, the threads' roots and the ``fixed-in`` replies must all
be the bot's (``core/triggers.py``); a person's reply quoting the marker is plain text.
"""

from __future__ import annotations

import logging

from ..core.triggers import BotIdentity, fixed_in_marker, is_bot_review, marks_fixed_in
from ..github.client import GitHubClient
from ..github.models import Review
from ..github.threads import thread_states

log = logging.getLogger(__name__)

RESOLVE = ("mutation($input: ResolveReviewThreadInput!) { resolveReviewThread(input: $input) "
           "{ thread { id isResolved } } }")


def fixed_reply(root_id: int, head_sha: str) -> str:
    return f"Fixed in {head_sha}.\n\n{fixed_in_marker(root_id)}"


async def resolve_fixed(client: GitHubClient, owner: str, repo: str, number: int,
                        review: Review, fixed: list[int], me: BotIdentity) -> list[int]:
    """Resolve and answer the threads ``review`` names as fixed; the ids resolved now."""
    if not fixed or not me.wrote(review):
        return []
    mine = {r.id for r in await client.list_reviews(owner, repo, number)
            if r.state != "PENDING" and is_bot_review(r, me)}
    comments = await client.list_review_comments(owner, repo, number)
    roots = {c.id: c for c in comments if c.in_reply_to_id is None
             and c.pull_request_review_id in mine and me.wrote(c)}
    states = await thread_states(client, owner, repo, number)
    head = review.commit_id or ""
    done = []
    for root_id in fixed:
        root, state = roots.get(root_id), states.get(root_id)
        if root is None or state is None or state.node_id is None:
            log.warning("%s/%s#%d: thread %d is not one of the bot's threads; not resolved",
                        owner, repo, number, root_id)
            continue
        replied = any(c.in_reply_to_id == root_id and marks_fixed_in(c, me, root_id)
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
