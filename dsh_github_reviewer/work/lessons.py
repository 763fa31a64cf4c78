"""Lessons a repository's maintainers taught the bot: stored per repository, given to every
review turn of that repository as trusted guidance (``turn/lessons.py`` renders them).

Table ``lessons`` of the reviewer's domain, key ``<account>:<owner>/<repo>`` (lower case):
one ``LessonBook`` per repository, so teaching, listing and forgetting read and write one
record, atomically, on every storage backend. Lesson numbers are never reused: ``/bot forget
3`` names the same lesson before and after another one is removed, and a forgotten lesson is
kept as a tombstone (who removed it, by which comment) so a command run again after a crash
answers the same way instead of removing another one.

Only people whose association may command the bot teach (the caller checks it: the inbox
records nothing from others); the text is sanitized and capped before it is stored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from ..core.sanitizer import sanitize
from ..turn.lessons import LessonNote
from .records import Record

LESSONS = "lessons"
LESSON_CHARS = 600        # one lesson's text, after sanitizing
LESSONS_GIVEN = 30        # the newest this many reach a review turn
LESSONS_KEPT = 200        # active lessons per repository; teaching more removes the oldest

LessonSource = Literal["command", "reply", "vote"]
# ``removed_by`` of a lesson nobody removed by a command: the web UI's button, or the limit.
REMOVED_ON_WEB = "(web UI)"
REMOVED_BY_LIMIT = "(limit)"


class LessonFinding(Record):
    """The bot's finding a lesson was taught on (a review thread's root comment)."""

    comment_id: int
    number: int
    path: str = ""
    line: int | None = None
    text: str = ""
    url: str = ""


class Lesson(Record):
    id: int = Field(ge=1)
    text: str
    # How it was taught: ``/bot learn`` (command), a reasoned reply on a bot thread (reply),
    # a 👎 on the finding plus a reply (vote).
    source: LessonSource
    taught_by: str
    association: str
    taught_at: datetime
    # The comment that taught it (unique: teaching is idempotent per comment).
    comment_id: int
    number: int
    finding: LessonFinding | None = None
    removed_at: datetime | None = None
    removed_by: str | None = None
    removed_by_comment: int | None = None

    @property
    def active(self) -> bool:
        return self.removed_at is None


class LessonBook(Record):
    next_id: int = Field(default=1, ge=1)
    lessons: list[Lesson] = Field(default_factory=list)

    def active(self) -> list[Lesson]:
        return [x for x in self.lessons if x.active]

    def by_comment(self, comment_id: int) -> Lesson | None:
        return next((x for x in self.lessons if x.comment_id == comment_id), None)

    def find(self, lesson_id: int) -> Lesson | None:
        return next((x for x in self.lessons if x.id == lesson_id), None)


def book_key(account: str, repo: str) -> str:
    return f"{account}:{repo.lower()}"


def clean_text(text: str) -> str:
    """A lesson's stored text: sanitized (no hidden or control characters), one paragraph of
    at most ``LESSON_CHARS``."""
    text = " ".join(sanitize(text).split())
    if len(text) > LESSON_CHARS:
        text = text[:LESSON_CHARS].rstrip() + "…"
    return text


class LessonStore:
    """One account's lessons, read and written through the domain's ``lessons`` table."""

    def __init__(self, domain, account: str):
        self.account = account
        self.table = domain.table(LESSONS)

    async def book(self, repo: str) -> LessonBook:
        return await self.table.get(book_key(self.account, repo)) or LessonBook()

    async def active(self, repo: str) -> list[Lesson]:
        return (await self.book(repo)).active()

    async def all_books(self) -> dict[str, LessonBook]:
        """This account's books by ``owner/repo``."""
        prefix = f"{self.account}:"
        return {k[len(prefix):]: b for k, b in (await self.table.all()).items()
                if k.startswith(prefix)}

    async def teach(self, repo: str, *, text: str, source: LessonSource, taught_by: str,
                    association: str, at: datetime, comment_id: int, number: int,
                    finding: LessonFinding | None = None) -> Lesson | None:
        """Record a lesson (once per teaching comment: run again, it returns the same
        lesson). None when the text is empty after sanitizing."""
        cleaned = clean_text(text)
        if not cleaned:
            return None
        out: list[Lesson] = []

        def apply(book: LessonBook | None) -> LessonBook:
            book = book or LessonBook()
            known = book.by_comment(comment_id)
            if known is not None:
                out.append(known)
                return book
            lesson = Lesson(id=book.next_id, text=cleaned, source=source, taught_by=taught_by,
                            association=association.upper(), taught_at=at,
                            comment_id=comment_id, number=number, finding=finding)
            book.next_id += 1
            book.lessons.append(lesson)
            active = book.active()
            for old in active[:max(0, len(active) - LESSONS_KEPT)]:
                old.removed_at, old.removed_by = at, REMOVED_BY_LIMIT
            out.append(lesson)
            return book
        await self.table.update(book_key(self.account, repo), apply)
        return out[0]

    async def forget(self, repo: str, lesson_id: int, *, by: str, at: datetime,
                     comment_id: int | None) -> tuple[Lesson | None, bool]:
        """(the lesson, whether this call or this very comment removed it). A lesson already
        removed by another comment gives (lesson, False); an unknown number (None, False)."""
        out: list[tuple[Lesson | None, bool]] = []

        def apply(book: LessonBook | None) -> LessonBook | None:
            lesson = book.find(lesson_id) if book is not None else None
            if lesson is None:
                out.append((None, False))
                return book
            if lesson.active:
                lesson.removed_at, lesson.removed_by = at, by
                lesson.removed_by_comment = comment_id
                out.append((lesson, True))
            else:
                same = comment_id is not None and lesson.removed_by_comment == comment_id
                out.append((lesson, same))
            return book
        await self.table.update(book_key(self.account, repo), apply)
        return out[0]


def notes(lessons: list[Lesson]) -> tuple[LessonNote, ...]:
    """The newest ``LESSONS_GIVEN`` active lessons as a review turn gives them."""
    out = []
    for x in [x for x in lessons if x.active][-LESSONS_GIVEN:]:
        where = ""
        if x.finding is not None:
            where = x.finding.path + (f":{x.finding.line}" if x.finding.line else "") \
                + f" in #{x.finding.number}"
            if x.finding.text:
                # A reply such as "not a bug, validated upstream" means nothing to a later
                # review without the finding it answers (the bot's own first line).
                where += f", which said: {x.finding.text}"
        out.append(LessonNote(id=x.id, text=x.text, taught_by=x.taught_by, where=where))
    return tuple(out)
