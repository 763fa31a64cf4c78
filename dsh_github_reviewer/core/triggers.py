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

**Own words.** A marker is hidden text anyone can type. It counts only on content the bot itself
authored: a review, review comment, issue comment or reply whose author is the bot's identity
(``BotIdentity``: a token's login, an App's ``<slug>[bot]``, learned when the account connects).
The readers below are the only code that looks for markers in a body, and each one takes the
author; in anyone else's text a marker is plain text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, TypeVar, get_args

from pydantic import PlainSerializer, PlainValidator

from .text_cache import short_text_cache

_P = TypeVar("_P", bound="_Posted")

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


def _stored(value: object) -> Trigger:
    if isinstance(value, Trigger):
        return value
    if isinstance(value, str):
        return Trigger.parse(value)
    raise ValueError(f"a trigger is a string <account>:<kind>:<ident>, not {type(value).__name__}")


# A model field holding a Trigger, stored as its string form (unchanged on the wire: records
# and second-look outcomes of earlier versions parse).
StoredTrigger = Annotated[Trigger, PlainValidator(_stored),
                          PlainSerializer(str, return_type=str)]


def _wire(trigger: Trigger) -> str:
    """A trigger's wire form for a marker; only a typed ``Trigger`` is written (a string
    would be a trigger built or passed by hand)."""
    if not isinstance(trigger, Trigger):
        raise TypeError(f"a marker is written from a Trigger, not {type(trigger).__name__}")
    return trigger.format()


def review_marker(trigger: Trigger) -> str:
    """The hidden line of a posted review: the trigger it answers."""
    return REVIEW_MARKER.format(trigger=_wire(trigger))


def turn_meta(flow: str, trigger: Trigger, **more: Any) -> dict[str, Any]:
    """A turn's meta in the session log: its flow and the trigger it answers, stored as the
    trigger's wire form (read back with ``meta_trigger``), and ``more``."""
    return {"flow": flow, "trigger": _wire(trigger), **more}


def meta_trigger(meta: Mapping[str, Any] | None) -> Trigger | None:
    """The trigger a turn's meta says the turn answered. The reviewers store it as its wire
    form (``Trigger.format``) in the session log; None when the meta names none, or one that
    does not parse (another flow's turn, or an old session's): such a turn answers nothing
    asked now, as before."""
    value = (meta or {}).get("trigger")
    if isinstance(value, Trigger):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        return Trigger.parse(value)
    except ValueError:
        return None


def reply_marker(comment_id: int) -> str:
    """The hidden line of a ``/bot`` answer: the command comment it answers."""
    return REPLY_MARKER.format(id=int(comment_id))


def notice_marker(trigger: Trigger) -> str:
    """The hidden line of a give-up notice: the work it gave up."""
    return NOTICE_MARKER.format(trigger=_wire(trigger))


def fixed_marker(ids: Iterable[int]) -> str:
    """The hidden line of a review naming the bot's earlier threads this push fixed."""
    return FIXED_MARKER.format(ids=",".join(str(int(i)) for i in ids))


def fixed_in_marker(root_id: int) -> str:
    """The hidden line of the bot's "Fixed in" reply in a thread it resolved."""
    return FIXED_IN_MARKER.format(id=int(root_id))


def summary_marker() -> str:
    """The hidden line of the PR's summary comment."""
    return SUMMARY_MARKER


def defuse_markers(text: str) -> str:
    """The bot's hidden markers in text it did not write itself (the model's review, findings,
    answers; an error) made inert: ``<!-- dsh-github-reviewer:`` loses its colon, so no marker
    reader (``core/triggers.py``) matches it. A model talked into echoing a marker by a PR it
    reads must not make the bot's own post answer a command, claim a head or the summary.
    Same length, and the result holds no marker, so it is a fixed point."""
    return text.replace(OWN_MARKER, OWN_MARKER[:-1] + " ")


# -- whose words: the only readers of markers ------------------------------------------------


class Authored(Protocol):
    """A review, review comment or issue comment as GitHub lists it: a body and an author
    (``user`` with a ``login``, or the login itself; None for a review by a deleted
    account)."""

    @property
    def body(self) -> str | None: ...
    @property
    def user(self) -> Any: ...


@dataclass(frozen=True)
class BotIdentity:
    """The account the bot posts as: a PAT's login, or ``<slug>[bot]`` for an App. GitHub
    logins are case-insensitive."""

    login: str
    _folded: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.login or not self.login.strip():
            raise ValueError("the bot's identity needs a login")
        # Asked for every item of every listing of a PR: folded once.
        object.__setattr__(self, "_folded", self.login.lower())

    def owns(self, author: str | None) -> bool:
        """``author`` (a login) is the bot."""
        if not author:
            return False
        # GitHub spells the bot's login as configured almost always: no case folding then.
        return author == self.login or str(author).lower() == self._folded

    def wrote(self, item: Authored) -> bool:
        """The bot authored ``item``."""
        user = getattr(item, "user", None)
        return self.owns(user if isinstance(user, str) else getattr(user, "login", None))

    def __str__(self) -> str:
        return self.login


def _own_body(item: Authored, me: BotIdentity) -> str:
    """The body when the bot wrote ``item``, else empty: a stranger's marker is plain text."""
    return (item.body or "") if me.wrote(item) else ""


_REVIEW_MARKER_RE = re.compile(re.escape(REVIEW_MARKER_PREFIX) + r"(\S+) -->")
_FIXED_RE = re.compile(re.escape(OWN_MARKER + "fixed:") + r"([0-9,]*) -->")


def posted_trigger(item: Authored, me: BotIdentity) -> Trigger | None:
    """The trigger a review of the bot's answers, read from its marker (None: not the bot's
    review, or a marker that does not parse)."""
    return _marked_trigger(item.body or "") if me.wrote(item) else None


@short_text_cache(max_chars=4000)
def _marked_trigger(body: str) -> Trigger | None:
    # Every review of a PR is read this way several times per review of it: a pure function
    # of the body (Trigger is frozen), so each body is searched and parsed once.
    m = _REVIEW_MARKER_RE.search(body)
    if m is None:
        return None
    try:
        return Trigger.parse(m.group(1))
    except ValueError:
        return None


def is_bot_review(item: Authored, me: BotIdentity) -> bool:
    """A review the bot posted: its author is the bot and it carries a trigger marker."""
    return REVIEW_MARKER_PREFIX in _own_body(item, me)


def answers_trigger(item: Authored, me: BotIdentity, trigger: Trigger) -> bool:
    """The bot's review posted for ``trigger``."""
    return review_marker(trigger) in _own_body(item, me)


class _Posted(Authored, Protocol):
    @property
    def state(self) -> str: ...


def posted_answer(reviews: Iterable[_P], me: BotIdentity, trigger: Trigger) -> _P | None:
    """The first of ``reviews`` that is the bot's submitted (not pending) review for
    ``trigger``: ``answers_trigger`` with the marker built once for the whole list and the
    author checked only where the marker is (a PR's every review is scanned this way several
    times per review)."""
    marker = review_marker(trigger)
    for r in reviews:
        if r.state != "PENDING" and marker in (r.body or "") and me.wrote(r):
            return r
    return None


def answers_command(item: Authored, me: BotIdentity, comment_id: int) -> bool:
    """The bot's answer to the command comment ``comment_id``."""
    return reply_marker(comment_id) in _own_body(item, me)


def gave_up_on(item: Authored, me: BotIdentity, trigger: Trigger) -> bool:
    """The bot's give-up notice for the work ``trigger``."""
    return notice_marker(trigger) in _own_body(item, me)


def fixed_threads(item: Authored, me: BotIdentity) -> list[int]:
    """The thread ids a review of the bot names as fixed (its ``fixed:`` marker)."""
    m = _FIXED_RE.search(_own_body(item, me))
    return [int(x) for x in m.group(1).split(",") if x] if m else []


def marks_fixed_in(item: Authored, me: BotIdentity, root_id: int) -> bool:
    """The bot's "Fixed in" reply for thread ``root_id`` (it resolved that thread once)."""
    return fixed_in_marker(root_id) in _own_body(item, me)


def is_summary(item: Authored, me: BotIdentity) -> bool:
    """The bot's summary comment of the PR."""
    return SUMMARY_MARKER in _own_body(item, me)
