"""What the PR's work adds to one review turn beyond the PR itself, decided from its record
and storage: the repository's lessons, a ``/review full`` request, and whether the drafted
findings get a second look before the post. Rides along on ``TrustedInstructions.extras``
(never part of the system prompt)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .lessons import LessonNote


@dataclass(frozen=True)
class TurnExtras:
    lessons: tuple[LessonNote, ...] = ()
    # ``/review full``: the whole prepared diff, not only what changed since the last review.
    full: bool = False
    # ``review.verify`` (or ``verify`` in the repository config): the second look.
    verify: bool = False
    # Where the second look's outcome is kept before the review is posted (the work layer's
    # store; the summary comment lists the dropped findings from it).
    save_second_look: Callable[[Any], Awaitable[None]] | None = None


def extras_of(instructions: object | None) -> TurnExtras:
    found = getattr(instructions, "extras", None)
    return found if isinstance(found, TurnExtras) else TurnExtras()
