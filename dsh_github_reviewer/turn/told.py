"""What the bot told the model, kept as data in each review turn's meta — not read back out of
the conversation's prose.

A review turn's meta carries ``told``: the base branch and head it named, the head its
material started from, whether the material was the whole diff, hashes of the PR block and
body it showed, and the feedback facts and thread resolutions it reported. The next turn
decides from these what is news (a retarget, a changed title, a resolution) — so the prompt's
wording can change without changing behaviour, and text a PR author or a commenter writes
(a body line ``base branch: release``, a reply ``thread 555 resolved``) forges nothing.

Sessions from before this meta existed have review turns without ``told``. For those turns
only, the facts are recovered from the text, anchored where the bot's own lines stand and
nowhere else: the PR block is the message's second paragraph (the body comes after it), and a
feedback fact is a line indented by exactly two spaces (a person's quoted reply is indented by
four). A turn with ``told`` is never read as text.

Only the turns the model still sees verbatim count (``Agent.user_turns``): a compacted or
failed turn told the model nothing it can still read.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

TOLD = "told"
REVIEW_FLOW = "Flow: review"

Resolution = Literal["resolved", "reopened"]


class ThreadPlace(BaseModel):
    """Where one of the bot's threads stands, as GitHub lists its root comment: the PR page
    pairs the thread ids a turn names (resolutions, reactions, ``fixedThreads``) with the
    findings it posted by these, never by the prompt's wording."""

    model_config = ConfigDict(extra="ignore")

    path: str
    line: int | None = None   # the line it was posted on (GitHub's ``original_line``)
    first: str = ""           # its first line, severity label left out


class Told(BaseModel):
    """The facts one review turn gave the model (the turn meta's ``told``)."""

    model_config = ConfigDict(extra="ignore")

    base_ref: str
    head: str
    # The last reviewed head the material started from (None: a first review).
    previous_head: str | None = None
    # The material's kind (``ReviewInput.kind``) and whether it held the PR's whole diff.
    kind: str = ""
    whole_diff: bool = False
    block: str = ""   # hash of the PR block shown (title, branches)
    body: str = ""    # hash of the PR body shown
    facts: list[str] = Field(default_factory=list)   # keys of the feedback facts reported
    threads: dict[str, Resolution] = Field(default_factory=dict)   # root id -> resolution
    findings: list[str] = Field(default_factory=list)   # earlier findings listed
    # The threads this turn names (open ones and those with feedback): root id -> place.
    places: dict[str, ThreadPlace] = Field(default_factory=dict)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class SeenTurn(Protocol):
    """``dsh_harness`` ``Agent.user_turns()`` items."""

    @property
    def meta(self) -> Mapping[str, Any]: ...
    @property
    def content(self) -> str: ...


@dataclass(frozen=True)
class _Legacy:
    meta: Mapping[str, Any]
    content: str


_FACT_LINE = re.compile(r"^  (\S.*)$", re.M)
_RESOLUTION = re.compile(r"^thread (\d+) (resolved|unresolved again)\b")
_BASE_LINE = re.compile(r"^base branch: (.*)$", re.M)


@dataclass
class _ToldIndex:
    resolutions: dict[str, Resolution] = field(default_factory=dict)  # root id -> last told
    keys: set[str] = field(default_factory=set)      # fact keys of turns with ``told``
    lines: set[str] = field(default_factory=set)     # feedback lines of turns without


class Conversation:
    """The review turns the model still sees, oldest first, with what each told it."""

    def __init__(self, turns: Iterable[SeenTurn] = ()):
        self.turns: list[tuple[Told | None, str]] = []
        self._index: _ToldIndex | None = None
        for t in turns:
            if not t.content.startswith(REVIEW_FLOW):
                continue  # a chat turn: it told nothing about the review
            self.turns.append((_told_of(t.meta), t.content))

    @classmethod
    def of(cls, history: Conversation | Sequence[str]) -> Conversation:
        """A conversation, or plain user messages (a session without meta)."""
        if isinstance(history, Conversation):
            return history
        return cls(_Legacy({}, m) for m in history)

    @property
    def reviewed(self) -> bool:
        """A review turn is still in the conversation verbatim."""
        return bool(self.turns)

    @property
    def last(self) -> Told | None:
        return self.turns[-1][0] if self.turns else None

    def base_ref(self) -> str | None:
        """The base branch the model was last told."""
        for told, text in reversed(self.turns):
            if told is not None:
                return told.base_ref
            ref = _legacy_base_ref(text)
            if ref is not None:
                return ref
        return None

    def showed(self, block: str, body: str) -> tuple[bool, bool]:
        """Whether this PR block and this body are already in the conversation."""
        b, d = digest(block), digest(body)
        same_block = same_body = False
        for told, text in self.turns:
            if told is not None:
                same_block |= told.block == b
                same_body |= told.body == d
            else:
                same_block |= _legacy_block(text) == block
                same_body |= body in text
        return same_block, same_body

    def resolution(self, root_id: int) -> Resolution | None:
        """The thread's resolution the model was told last."""
        return self._told().resolutions.get(str(root_id))

    def told_fact(self, key: str, fact: str) -> bool:
        """Whether a feedback fact was reported: by its key in a turn's meta, or (an old turn)
        by its text on one of the turn's feedback lines."""
        told = self._told()
        return key in told.keys or fact.split("\n", 1)[0] in told.lines

    def _told(self) -> _ToldIndex:
        """Every turn's resolutions and facts, gathered once: a review asks about each of
        the bot's threads, and a walk of every turn per thread grew with the PR squared."""
        if self._index is None:
            index = self._index = _ToldIndex()
            for told, text in self.turns:
                if told is not None:
                    index.resolutions.update(told.threads)
                    index.keys.update(told.facts)
                    continue
                facts = _legacy_facts(text)
                index.lines |= facts
                for fact in facts:
                    m = _RESOLUTION.match(fact)
                    if m:
                        index.resolutions[str(int(m.group(1)))] = (
                            "resolved" if m.group(2) == "resolved" else "reopened")
        return self._index


# Read-only metas (``Agent.user_turns`` hands out the same ones at every review of a PR) ->
# their parsed ``Told``: a conversation is read before every review, and validating every
# turn's meta again grew with the PR. Bounded; the meta itself is kept, so its id stays its.
_PARSED: OrderedDict[int, tuple[Mapping[str, Any], Told | None]] = OrderedDict()
_PARSED_MAX = 4096


def _told_of(meta: Mapping[str, Any]) -> Told | None:
    if not isinstance(meta, MappingProxyType):
        return _parse_told(meta)
    hit = _PARSED.get(id(meta))
    if hit is not None and hit[0] is meta:
        _PARSED.move_to_end(id(meta))
        return hit[1]
    told = _PARSED[id(meta)] = (meta, _parse_told(meta))
    if len(_PARSED) > _PARSED_MAX:
        _PARSED.popitem(last=False)
    return told[1]


def _parse_told(meta: Mapping[str, Any]) -> Told | None:
    raw = meta.get(TOLD)
    if not isinstance(raw, dict):
        return None
    try:
        return Told.model_validate(raw)
    except ValidationError:
        return None  # a meta of another version: read the turn as text


def _legacy_block(text: str) -> str | None:
    """The PR block of an old turn: its second paragraph, if that is a block (the body and
    everything a PR author wrote come after it)."""
    parts = text.split("\n\n", 2)
    if len(parts) >= 2 and parts[1].startswith("<pull_request>\n") \
            and parts[1].endswith("\n</pull_request>"):
        return parts[1]
    return None


def _legacy_base_ref(text: str) -> str | None:
    block = _legacy_block(text)
    if block is None:
        return None
    m = _BASE_LINE.search(block)
    return m.group(1) if m else None


def _legacy_facts(text: str) -> set[str]:
    """The feedback lines of an old turn (two-space indent inside its feedback block)."""
    start = text.find("\n<feedback_on_your_threads>\n")
    if start < 0:
        return set()
    end = text.find("\n</feedback_on_your_threads>", start)
    return set(_FACT_LINE.findall(text[start:end if end >= 0 else None]))
