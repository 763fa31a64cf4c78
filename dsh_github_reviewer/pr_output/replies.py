"""Posting /bot answers exactly once, in the right place.

Each reply carries a hidden marker naming the command comment it answers; before posting,
the PR's comments are checked for it, so a command re-run after a crash never answers twice.
Only the bot's own comments count there: anyone else's comment quoting the marker never
silences a command.
"""

from __future__ import annotations

from typing import Literal, Protocol

from ..core.sanitizer import redact_secrets
from ..core.triggers import BotIdentity, answers_command, reply_marker
from ..github.client import GitHubClient

# GitHub refuses a comment over 65,536 characters (422): a longer answer is cut, leaving room
# for the marker, instead of failing (and being paid for again) on every retry.
REPLY_CHARS = 65_000


class CommandRef(Protocol):
    """The command a reply answers (``work.records.Command`` satisfies it)."""

    @property
    def comment_id(self) -> int: ...
    @property
    def source(self) -> Literal["issue", "review"]: ...
    @property
    def thread_root(self) -> int | None: ...


def reply_body(text: str, comment_id: int) -> str:
    """The answer to command ``comment_id`` as posted: redacted, cut to fit, marker last."""
    text = redact_secrets(text).strip()
    if len(text) > REPLY_CHARS:
        text = text[:REPLY_CHARS].rstrip() + "\n\n…[cut: too long]"
    return f"{text}\n\n{reply_marker(comment_id)}"


async def already_replied(client: GitHubClient, owner: str, repo: str, number: int,
                          cmd: CommandRef, me: BotIdentity) -> bool:
    """The bot already answered ``cmd`` (its own reply carrying the command's marker)."""
    if cmd.source == "review":
        comments = await client.list_review_comments(owner, repo, number)
    else:
        comments = await client.list_issue_comments(owner, repo, number)
    return any(answers_command(c, me, cmd.comment_id) for c in comments)


async def post_reply(client: GitHubClient, owner: str, repo: str, number: int, cmd: CommandRef,
                     text: str, me: BotIdentity) -> bool:
    """Post the answer (review thread or issue comment); False if it was already there."""
    if await already_replied(client, owner, repo, number, cmd, me):
        return False
    body = reply_body(text, cmd.comment_id)
    if cmd.source == "review":
        await client.reply_to_review_comment(owner, repo, number,
                                             cmd.thread_root or cmd.comment_id, body)
    else:
        await client.post_issue_comment(owner, repo, number, body)
    return True
