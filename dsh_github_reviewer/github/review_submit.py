"""Posting the review: once per trigger, atomically, with no pending review left behind.

The guard keeps the model's review as a local draft and posts it in one REST call
(``POST …/reviews`` with ``event=COMMENT`` and its inline comments). Nothing is pending on
GitHub while the model works, so a crash before the submit leaves nothing behind, and the
github-mcp-server 0.12.1 ``reviews(first: 1)`` problem (re-reviews fail once the bot has an
older review) cannot occur. The review body carries a hidden trigger marker; before posting,
the PR's reviews are checked for it, so a retried or resumed turn never posts twice. Only the
bot's own reviews count there (``core/triggers.py``): a marker anyone else typed into a review
is plain text and never stands in for the bot's review.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ..core import severity
from ..core.sanitizer import redact_secrets
from ..core.triggers import BotIdentity, Trigger, fixed_marker, posted_answer, review_marker
from .client import GitHubClient
from .errors import GitHubError
from .models import Review

log = logging.getLogger(__name__)

@dataclass
class DraftComment:
    path: str
    body: str
    subject_type: str
    line: int | None = None
    side: str | None = None
    start_line: int | None = None
    start_side: str | None = None
    severity: str = "minor"
    # Drafted after the turn's posting budget was spent: listed in the review body.
    over_budget: bool = False

    @property
    def location(self) -> str:
        if self.line is None:
            return self.path
        if self.start_line is not None and self.start_line != self.line:
            return f"{self.path}:{self.start_line}-{self.line}"
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class FindingLimits:
    """What goes inline: at least ``min_severity``, at most ``max_findings`` (0 = no cap); and
    a turn's two budgets, kept apart so reading never starves posting: ``read_calls`` reads
    (``review.max_read_calls``), ``comment_calls`` findings drafted inline
    (``review.max_comment_calls``; later ones are listed in the review body)."""

    min_severity: str = "nit"
    max_findings: int = 0
    read_calls: int = 30
    comment_calls: int = 50


@dataclass
class Draft:
    commit_id: str
    comments: list[DraftComment] = field(default_factory=list)
    limits: FindingLimits = field(default_factory=FindingLimits)
    # The bot's earlier threads the model says this push fixed (resolved after posting), and
    # each as people know it ("path:line (first words)"), for the review body.
    fixed: list[int] = field(default_factory=list)
    fixed_labels: list[tuple[str, str]] = field(default_factory=list)


LISTED_CHARS = 600
# GitHub rejects a review body over 65,536 characters (422) and the whole review with it.
BODY_CHARS = 65_536
# Kept free for the markers, the section heads and the "…and N more" line.
BODY_RESERVE = 2_000
MODEL_BODY_CHARS = 20_000   # the model's own summary text
NOTE_CHARS = 4_000          # one file-level comment


def _code(text: str) -> str:
    return text.replace("`", "'")


def _words(text: str, limit: int = 60) -> str:
    """A finding's first words, cut at a word boundary."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"


def _listed(c: DraftComment) -> str:
    """One finding as a line of the review body: severity, place, its text up to the first
    code block (a suggestion cannot be applied from the body)."""
    text = redact_secrets(c.body).split("```", 1)[0]
    text = " ".join(text.split())
    if len(text) > LISTED_CHARS:
        text = text[:LISTED_CHARS].rstrip() + "…"
    return f"- {severity.render(c.severity, f'`{c.location}`')}: {text}"


def split_findings(draft: Draft) -> tuple[list[DraftComment], dict[str, list[DraftComment]]]:
    """(inline comments, listed ones by reason). Nothing is dropped: every LINE comment is
    either inline or listed; FILE comments are always folded into the body."""
    limits = draft.limits
    lines = [c for c in draft.comments if c.subject_type == "LINE"]
    listed: dict[str, list[DraftComment]] = {"budget": [], "cap": [], "severity": []}
    candidates = []
    for c in lines:
        if c.over_budget:
            listed["budget"].append(c)
        elif not severity.at_least(c.severity, limits.min_severity):
            listed["severity"].append(c)
        else:
            candidates.append(c)
    if limits.max_findings and len(candidates) > limits.max_findings:
        keep = sorted(candidates, key=lambda c: severity.rank(c.severity))[:limits.max_findings]
        kept = {id(c) for c in keep}
        listed["cap"] = [c for c in candidates if id(c) not in kept]
        candidates = [c for c in candidates if id(c) in kept]
    return candidates, listed


class _Room:
    """What is left of the review body's size limit: items are taken while they fit, the
    rest only counted."""

    def __init__(self, chars: int):
        self.chars, self.left_out = chars, 0

    def take(self, items: list[str], sep: str) -> list[str]:
        kept = []
        for item in items:
            if len(item) + len(sep) <= self.chars:
                kept.append(item)
                self.chars -= len(item) + len(sep)
            else:
                self.left_out += 1
        return kept


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "\n\n…[cut: too long]"


def review_payload(draft: Draft, body: str, trigger: Trigger
                   ) -> tuple[str, list[dict[str, Any]]]:
    """The review body (redacted, file-level notes and findings not posted inline folded in,
    marker last) and the line comments, each led by its severity.

    The body stays under GitHub's limit (a 422 would lose the whole review): the model's text
    is capped, then listed findings are taken while they fit and the rest are counted in one
    line — they stay in the PR's summary comment and the session log."""
    room = _Room(BODY_CHARS - BODY_RESERVE)
    parts = [_capped(redact_secrets(body).strip(), MODEL_BODY_CHARS)]
    room.chars -= len(parts[0])
    notes = room.take([f"**`{c.path}`**: "
                       + severity.render(c.severity, _capped(redact_secrets(c.body), NOTE_CHARS))
                       for c in draft.comments if c.subject_type == "FILE"], "\n\n")
    if notes:
        parts.append("File comments:\n\n" + "\n\n".join(notes))
    inline, listed = split_findings(draft)
    heads = {"budget": "Findings drafted after this review's posting budget "
                       f"(`review.max_comment_calls`, {draft.limits.comment_calls}) was spent, "
                       "not posted inline",
             "cap": f"Findings past `max_findings` ({draft.limits.max_findings}), not posted "
                    "inline",
             "severity": f"Findings below `min_severity` ({draft.limits.min_severity}), not "
                         "posted inline"}
    for reason in ("budget", "cap"):
        lines = room.take([_listed(c) for c in listed[reason]], "\n")
        if lines:
            parts.append(f"**{heads[reason]}:**\n\n" + "\n".join(lines))
    lines = room.take([_listed(c) for c in listed["severity"]], "\n")
    if lines:
        parts.append(f"<details><summary>{heads['severity']}: {len(listed['severity'])}"
                     "</summary>\n\n" + "\n".join(lines) + "\n\n</details>")
    if room.left_out:
        parts.append(f"…and {room.left_out} more finding(s) not listed here: GitHub limits a "
                     "review body to 65,536 characters. They are in this PR's summary comment "
                     "and in the review session.")
    if draft.fixed_labels:
        # Which findings, by place and first words: thread ids are internal.
        parts.append("**Fixed since the last review:**\n\n" + "\n".join(
            f"- `{_code(where)}`" + (f" ({redact_secrets(_words(first))})" if first else "")
            for where, first in draft.fixed_labels))
    if draft.fixed:
        parts.append(fixed_marker(draft.fixed))
    parts.append(review_marker(trigger))
    comments = []
    for c in inline:
        item: dict[str, Any] = {"path": c.path,
                                "body": severity.render(c.severity, redact_secrets(c.body)),
                                "line": c.line, "side": c.side}
        if c.start_line is not None:
            item.update({"start_line": c.start_line, "start_side": c.start_side})
        comments.append(item)
    return "\n\n".join(parts), comments


async def find_posted(client: GitHubClient, owner: str, repo: str, number: int,
                      trigger: Trigger, me: BotIdentity) -> Review | None:
    """The bot's own review answering ``trigger``, if it is on the PR."""
    return posted_answer(await client.list_reviews(owner, repo, number), me, trigger)


async def post_review(client: GitHubClient, owner: str, repo: str, number: int,
                      draft: Draft, body: str, trigger: Trigger, me: BotIdentity
                      ) -> tuple[Review, bool]:
    """(the review, whether this call posted it) — an earlier post for the trigger is reused."""
    existing = await find_posted(client, owner, repo, number, trigger, me)
    if existing is not None:
        log.info("%s/%s#%d: review for trigger %s already posted (%s)", owner, repo, number,
                 trigger, existing.id)
        return existing, False
    full_body, comments = review_payload(draft, body, trigger)
    try:
        review = await client.create_review(owner, repo, number, commit_id=draft.commit_id,
                                            body=full_body, event="COMMENT", comments=comments)
    except GitHubError as exc:
        if exc.status != 422 or "pending review" not in str(exc):
            raise
        # A pending review of ours (left by an older version or a manual MCP session) blocks
        # any new review; pending reviews are visible to their author only, so all listed
        # ones are ours.
        for stale in await client.list_reviews(owner, repo, number):
            if stale.state == "PENDING":
                log.warning("%s/%s#%d: deleting a stale pending review %s", owner, repo,
                            number, stale.id)
                await client.delete_pending_review(owner, repo, number, stale.id)
        review = await client.create_review(owner, repo, number, commit_id=draft.commit_id,
                                            body=full_body, event="COMMENT", comments=comments)
    return review, True
