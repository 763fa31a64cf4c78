"""What a piece of the bot's work answers (its *trigger*), and the hidden markers that carry it.

A trigger is ``<account>:<kind>:<ident>`` on the wire — in stored PR records, in give-up
notices, in the turn meta of sessions and inside the markers of everything the bot posts — so
a crash after a post finds the post by its marker instead of posting again. The account is
part of it: two accounts reviewing one PR never take each other's work for their own.

Kinds (``ident`` in brackets):

* ``auto`` (head SHA): the automatic review of a new head.
* ``retarget`` (``<head SHA>:<base SHA>``): the automatic review of the same head after the PR
  moved to another base branch.
* ``cmd`` (comment id): a review asked for with ``/review``.
* ``chat`` (comment id): the model turn answering a ``/bot`` question.
* ``bot`` (comment id): the work of answering one ``/bot`` (its give-up notice).
* ``ci`` (``<run id>.<attempt>``): a review by one CI job attempt.

Automatic reviews (``auto`` and ``retarget``) are the ones ``review.max_reviews_per_pr`` caps.
The format of both triggers and markers is fixed: records and posts written by earlier
versions must keep parsing and matching.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

Kind = Literal["auto", "retarget", "cmd", "chat", "bot", "ci"]
KINDS: tuple[str, ...] = get_args(Kind)
AUTOMATIC: frozenset[str] = frozenset({"auto", "retarget"})

# Every outbound text of the bot (reviews, replies, notices) carries a marker starting so.
OWN_MARKER = "<!-- dsh-github-reviewer:"
REVIEW_MARKER = OWN_MARKER + "trigger:{trigger} -->"
REVIEW_MARKER_PREFIX = OWN_MARKER + "trigger:"
REPLY_MARKER = OWN_MARKER + "reply-to:{id} -->"
NOTICE_MARKER = OWN_MARKER + "gave-up:{trigger} -->"
# In a review's body: the bot's earlier threads the model said this push fixed.
FIXED_MARKER = OWN_MARKER + "fixed:{ids} -->"
# On the bot's reply in a thread it resolved: it is never resolved by the bot again.
FIXED_IN_MARKER = OWN_MARKER + "fixed-in:{id} -->"
# The PR's one living summary comment, edited in place.
SUMMARY_MARKER = OWN_MARKER + "summary -->"


@dataclass(frozen=True)
class Trigger:
    account: str
    kind: Kind
    ident: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"trigger kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if not self.account or ":" in self.account:
            raise ValueError(f"trigger account {self.account!r} must be non-empty without ':'")
        if not self.ident:
            raise ValueError("a trigger needs an ident")

    @classmethod
    def parse(cls, text: str) -> Trigger:
        """``<account>:<kind>:<ident>``; a ValueError names what is wrong."""
        account, _, rest = str(text).partition(":")
        kind, sep, ident = rest.partition(":")
        if not sep:
            raise ValueError(f"not a trigger (want <account>:<kind>:<ident>): {text!r}")
        return cls(account, kind, ident)  # type: ignore[arg-type]

    def format(self) -> str:
        return f"{self.account}:{self.kind}:{self.ident}"

    __str__ = format

    @property
    def automatic(self) -> bool:
        """An automatic review (new head, retarget): counted toward ``max_reviews_per_pr``."""
        return self.kind in AUTOMATIC

    @property
    def comment_id(self) -> int | None:
        """The command comment a ``cmd``, ``chat`` or ``bot`` trigger answers."""
        if self.kind in ("cmd", "chat", "bot") and self.ident.isdigit():
            return int(self.ident)
        return None

    # -- constructors, one per kind --------------------------------------------------------

    @classmethod
    def auto(cls, account: str, head_sha: str) -> Trigger:
        return cls(account, "auto", head_sha)

    @classmethod
    def retarget(cls, account: str, head_sha: str, base_sha: str) -> Trigger:
        return cls(account, "retarget", f"{head_sha}:{base_sha}")

    @classmethod
    def cmd(cls, account: str, comment_id: int) -> Trigger:
        return cls(account, "cmd", str(int(comment_id)))

    @classmethod
    def chat(cls, account: str, comment_id: int) -> Trigger:
        return cls(account, "chat", str(int(comment_id)))

    @classmethod
    def bot(cls, account: str, comment_id: int) -> Trigger:
        return cls(account, "bot", str(int(comment_id)))

    @classmethod
    def ci(cls, account: str, run_id: str | int, attempt: str | int) -> Trigger:
        return cls(account, "ci", f"{run_id}.{attempt}")


def review_marker(trigger: Trigger | str) -> str:
    """The hidden line of a posted review: the trigger it answers."""
    return REVIEW_MARKER.format(trigger=trigger)


def reply_marker(comment_id: int) -> str:
    """The hidden line of a ``/bot`` answer: the command comment it answers."""
    return REPLY_MARKER.format(id=int(comment_id))


def notice_marker(trigger: Trigger | str) -> str:
    """The hidden line of a give-up notice: the work it gave up."""
    return NOTICE_MARKER.format(trigger=trigger)


_REVIEW_MARKER_RE = re.compile(re.escape(REVIEW_MARKER_PREFIX) + r"(\S+) -->")


def review_trigger(body: str | None) -> Trigger | None:
    """The trigger a posted review answers, read from its marker (None: not the bot's review,
    or a marker that does not parse)."""
    m = _REVIEW_MARKER_RE.search(body or "")
    if m is None:
        return None
    try:
        return Trigger.parse(m.group(1))
    except ValueError:
        return None


def is_own_post(body: str | None) -> bool:
    """Any of the bot's markers: its reviews, replies and notices."""
    return OWN_MARKER in (body or "")


def is_review_post(body: str | None) -> bool:
    """A review the bot posted (it carries a trigger marker)."""
    return REVIEW_MARKER_PREFIX in (body or "")
