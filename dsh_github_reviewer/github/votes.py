"""Which 👎 on the bot's findings count as dismissals.

A comment's ``reactions`` roll-up has counts only, and anyone can react: the PR's author could
hide the bot's critical finding with a 👎. So a 👎 dismisses a finding only when it comes from a
person the account lets run commands (``review.command_author_associations``) who is not the
PR's author. Who reacted needs the comment's reaction list — one request per finding whose
roll-up shows 👎, and only when that count changed since this process last read the list.

GitHub's reaction list names the people but not their association with the repository: it is
read from what they wrote on the PR (its comments and review comments carry
``author_association``). A maintainer who only reacted wrote nothing there, so for a 👎 voter
whose association is still unknown (and who is not the PR's author) the repository's
permission endpoint is asked, conservatively: the repository's owner is OWNER, a person who can
push (admin, maintain, write) is COLLABORATOR, anyone else — triage, read, none, not found —
is NONE, and an answer GitHub refuses (403) or fails to give is NONE too (logged once per
repository): a finding then stays open rather than being hidden by a stranger. Answers are kept
for an hour per person and repository (a failure for a few minutes), so a summary refreshed
while nothing changed asks nothing again.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from ..core.commands import association_allowed
from .client import GitHubClient
from .errors import GitHubError, NotFound, RateLimited
from .models import Comment, ReviewComment

log = logging.getLogger(__name__)

# (api url, owner/repo, comment id) -> (the 👎 count the list was read at, who gave 👎).
CACHE_CAP = 4096
_seen: OrderedDict[tuple[str, str, int], tuple[int, frozenset[str]]] = OrderedDict()

# A person's access changes rarely: an answer is trusted this long (``client.clock`` seconds).
PERMISSION_TTL_S = 3600.0
# A failed lookup (GitHub 5xx, a transport error, a rate limit) is retried after this long:
# soon enough that a maintainer's 👎 is not ignored for an hour, rarely enough that a GitHub
# outage costs at most one request per voter per few minutes.
PERMISSION_ERROR_TTL_S = 300.0
# The legacy base roles that can push (GitHub reports maintain as write; maintain is accepted
# in case it ever is reported as itself).
PUSH_ROLES = frozenset({"admin", "maintain", "write"})
# The associations a permission can prove: looking up is pointless unless one is allowed.
PROVABLE = ("OWNER", "COLLABORATOR")
# (api url, owner/repo, login) -> (until when (client.clock), association).
_permissions: OrderedDict[tuple[str, str, str], tuple[float, str]] = OrderedDict()
# (api url, owner/repo) -> until when the token may not read permissions there (a 403: every
# voter's lookup would be refused alike).
_forbidden: OrderedDict[tuple[str, str], float] = OrderedDict()
# (api url, owner/repo) whose failed lookups were already logged at WARNING.
_warned: OrderedDict[tuple[str, str], None] = OrderedDict()


def _bounded_put(cache: OrderedDict, key: object, value: object) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > CACHE_CAP:
        cache.popitem(last=False)


def forget() -> None:
    """Drop every cached answer (tests; a process otherwise keeps them within the caps)."""
    _seen.clear()
    _permissions.clear()
    _forbidden.clear()
    _warned.clear()


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
    _bounded_put(_seen, key, (count, who))
    return who


def permission_association(owner: str, login: str, permission: str | None) -> str:
    """The association a permission proves, conservatively: the repository's owner → OWNER,
    a person who can push → COLLABORATOR, anyone else (or no answer: ``None``) → NONE."""
    if login.lower() == owner.lower():
        return "OWNER"
    return "COLLABORATOR" if (permission or "").lower() in PUSH_ROLES else "NONE"


def _warn_once(client: GitHubClient, repo_key: str, exc: GitHubError) -> None:
    key = (client.api_url, repo_key)
    if key in _warned:
        log.debug("%s: 👎 voter's permission not read: %s", repo_key, exc)
        return
    _bounded_put(_warned, key, None)
    log.warning("%s: could not read a 👎 voter's permission on the repository, so that 👎 "
                "dismisses nothing (logged once per repository): %s", repo_key, exc)


async def association_of(client: GitHubClient, owner: str, repo: str, login: str) -> str:
    """``login``'s association as its repository permission proves it (see the module doc);
    at most one request per person and repository per ``PERMISSION_TTL_S``, and none for
    the owner or while the repository refuses such lookups."""
    login = login.lower()
    if login == owner.lower():
        return "OWNER"
    repo_key = f"{owner}/{repo}".lower()
    now = client.clock()
    key = (client.api_url, repo_key, login)
    cached = _permissions.get(key)
    if cached is not None and cached[0] > now:
        _permissions.move_to_end(key)
        return cached[1]
    if _forbidden.get((client.api_url, repo_key), 0.0) > now:
        return "NONE"
    ttl = PERMISSION_TTL_S
    try:
        answer = await client.collaborator_permission(owner, repo, login)
        association = permission_association(owner, login, answer.permission)
    except NotFound:
        association = "NONE"       # no such user: nobody who could dismiss
    except GitHubError as exc:
        association = "NONE"       # unknown: a finding stays open rather than hidden
        _warn_once(client, repo_key, exc)
        if exc.status == 403 and not isinstance(exc, RateLimited):
            _bounded_put(_forbidden, (client.api_url, repo_key), now + PERMISSION_TTL_S)
        else:
            ttl = PERMISSION_ERROR_TTL_S
    _bounded_put(_permissions, key, (now + ttl, association))
    return association


async def learn_associations(client: GitHubClient, owner: str, repo: str,
                             voters: Iterable[str], pr_author: str | None,
                             known: dict[str, str], allowed: list[str]) -> dict[str, str]:
    """``known`` plus the association of each 👎 voter it lacks (not the PR's author), read
    from the repository permission — only when such an association could be allowed (not
    under ``*``, which allows anyone anyway)."""
    if "*" in allowed or not any(a in allowed for a in PROVABLE):
        return known
    author = (pr_author or "").lower()
    unknown = sorted({v.lower() for v in voters} - known.keys() - {author})
    if not unknown:
        return known
    out = dict(known)
    for login in unknown:
        out[login] = await association_of(client, owner, repo, login)
    return out


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
        voters = await down_voters(client, owner, repo, root)
        known = await learn_associations(client, owner, repo, voters, pr_author, known,
                                         allowed)
        n = counted(voters, pr_author, known, allowed)
        if n:
            out[root.id] = n
    return out
