"""Which 👎 on the bot's findings count as dismissals.

A comment's ``reactions`` roll-up has counts only, and anyone can react: the PR's author could
hide the bot's critical finding with a 👎. So a 👎 dismisses a finding only when it comes from a
person the account lets run commands (``review.command_author_associations``) who is not the
PR's author. Who reacted needs the comment's reaction list — one request per finding whose
roll-up shows 👎, and only when that count changed since this process last read the list.

GitHub's reaction list names the people but not their association with the repository: it is
read from what they wrote on the PR (its comments and review comments carry
``author_association``). A 👎 from someone who wrote nothing there does not dismiss (unless the
allowlist is ``*``): a finding then stays open rather than being hidden by a stranger.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

from ..core.commands import association_allowed
from .client import GitHubClient
from .models import Comment, ReviewComment

# (api url, owner/repo, comment id) -> (the 👎 count the list was read at, who gave 👎).
CACHE_CAP = 4096
_seen: OrderedDict[tuple[str, str, int], tuple[int, frozenset[str]]] = OrderedDict()


def associations(comments: Iterable[Comment]) -> dict[str, str]:
    """Each commenter's association with the repository (login lowercased)."""
    return {c.user.login.lower(): (c.author_association or "NONE").upper() for c in comments}


async def known_associations(client: GitHubClient, owner: str, repo: str, number: int,
                             review_comments: Sequence[ReviewComment]) -> dict[str, str]:
    """The association of everyone who wrote on the PR: its review comments (already read)
    and its conversation comments (one conditional listing)."""
    issue = await client.list_issue_comments(owner, repo, number)
    return associations([*review_comments, *issue])


async def down_voters(client: GitHubClient, owner: str, repo: str, comment: ReviewComment
                      ) -> frozenset[str]:
    """The logins (lowercased) who gave the comment a 👎; no request when its roll-up shows
    none, or the same count as when the list was last read."""
    count = comment.reactions.minus_one if comment.reactions is not None else 0
    if count <= 0:
        return frozenset()
    key = (client.api_url, f"{owner}/{repo}".lower(), comment.id)
    known = _seen.get(key)
    if known is not None and known[0] == count:
        _seen.move_to_end(key)
        return known[1]
    votes = await client.list_reactions(owner, repo, comment.id, review_comment=True)
    who = frozenset(v.user.login.lower() for v in votes
                    if v.content == "-1" and v.user is not None)
    _seen[key] = (count, who)
    _seen.move_to_end(key)
    while len(_seen) > CACHE_CAP:
        _seen.popitem(last=False)
    return who


def counted(voters: frozenset[str], pr_author: str | None, known: dict[str, str],
            allowed: list[str]) -> int:
    """How many of the 👎 count as dismissals: from an allowlisted person, not the author."""
    author = (pr_author or "").lower()
    return sum(1 for login in voters
               if login != author and association_allowed(known.get(login), allowed))


async def dismissed(client: GitHubClient, owner: str, repo: str, number: int,
                    roots: Sequence[ReviewComment], comments: Sequence[ReviewComment],
                    pr_author: str | None, allowed: list[str]) -> dict[int, int]:
    """Root comment id -> the 👎 that count as dismissals (only roots with some). ``roots``:
    the bot's threads; ``comments``: the PR's review comments."""
    roots = [r for r in roots if r.reactions is not None and r.reactions.minus_one > 0]
    if not roots:
        return {}
    known = await known_associations(client, owner, repo, number, comments)
    out = {}
    for root in roots:
        n = counted(await down_voters(client, owner, repo, root), pr_author, known, allowed)
        if n:
            out[root.id] = n
    return out
