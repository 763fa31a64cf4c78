"""Giving up visibly: one short PR comment per abandoned piece of work, posted once.

The comment carries ``<!-- dsh-github-reviewer:gave-up:<trigger> -->``; before posting, the
PR's issue comments are checked for it, so a crash between the post and the record never
posts it twice. Only the bot's own comments count: a forged marker never suppresses a notice.
"""

from __future__ import annotations

import re

from ..core.sanitizer import redact_secrets
from ..core.triggers import BotIdentity, gave_up_on, notice_marker
from ..github.client import GitHubClient
from .records import Notice

# "HTTP 401: {...body...}": what GitHub or a model provider answered. A public comment keeps the
# status and drops the body (it may quote a key's ends, a URL, internal text).
_BODY = re.compile(r"(HTTP \d{3})\b.*", re.DOTALL)


def public_error(error: str) -> str:
    """The error as a PR may show it: redacted, one line, no raw response body."""
    text = " ".join(redact_secrets(error).split())
    return _BODY.sub(r"\1", text)[:300]


def notice_body(notice: Notice, attempts: int) -> str:
    error = public_error(notice.error)
    return (f"dsh-github-reviewer gave up on {notice.what} after {attempts} failed attempts. "
            f"Last error: `{error.replace('`', '')}`.\n\n"
            + ("Post the `/bot` command again to retry." if notice.trigger.kind == "bot" else
               "Comment `/review` to try again.")
            + f"\n\n{notice_marker(notice.trigger)}")


async def post_notice(client: GitHubClient, owner: str, repo: str, number: int,
                      notice: Notice, attempts: int, me: BotIdentity) -> bool:
    """Post the notice unless the bot already did; False if it was there."""
    for c in await client.list_issue_comments(owner, repo, number):
        if gave_up_on(c, me, notice.trigger):
            return False
    await client.post_issue_comment(owner, repo, number, notice_body(notice, attempts))
    return True
