"""Giving up visibly: one short PR comment per abandoned piece of work, posted once.

The comment carries ``<!-- dsh-github-reviewer:gave-up:<trigger> -->``; before posting, the
PR's issue comments are checked for it, so a crash between the post and the record never
posts it twice.
"""

from __future__ import annotations

from ..core.sanitizer import redact_secrets
from ..core.triggers import notice_marker
from ..github.client import GitHubClient
from .records import Notice


def notice_body(notice: Notice, attempts: int) -> str:
    error = " ".join(redact_secrets(notice.error).split())[:300]
    return (f"dsh-github-reviewer gave up on {notice.what} after {attempts} failed attempts. "
            f"Last error: `{error.replace('`', '')}`.\n\n"
            + ("Post the `/bot` command again to retry." if notice.trigger.kind == "bot" else
               "Comment `/review` to try again.")
            + f"\n\n{notice_marker(notice.trigger)}")


async def post_notice(client: GitHubClient, owner: str, repo: str, number: int,
                      notice: Notice, attempts: int) -> bool:
    """Post the notice unless it is already there; False if it was."""
    tag = notice_marker(notice.trigger)
    for c in await client.list_issue_comments(owner, repo, number):
        if c.body and tag in c.body:
            return False
    await client.post_issue_comment(owner, repo, number, notice_body(notice, attempts))
    return True
