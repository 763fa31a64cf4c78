"""``/bot lessons`` answers in one comment GitHub accepts (at most 65,536 characters), however
many lessons the repository keeps: the newest shown, the rest counted and pointed to."""

from __future__ import annotations

from datetime import UTC, datetime

from dsh_github_reviewer.work.bot_commands import listing
from dsh_github_reviewer.work.lessons import LESSON_CHARS, LESSONS_KEPT, Lesson

GITHUB_COMMENT_CHARS = 65_536


def lesson(i: int) -> Lesson:
    return Lesson(id=i, text="x" * LESSON_CHARS, source="command", taught_by="maintainer",
                  association="MEMBER", taught_at=datetime(2026, 1, 1, tzinfo=UTC),
                  comment_id=1000 + i, number=1)


def test_the_full_book_fits_one_comment_and_counts_what_it_leaves_out():
    text = listing("acme/shop", [lesson(i) for i in range(1, LESSONS_KEPT + 1)])
    assert len(text) + 200 < GITHUB_COMMENT_CHARS, "room for the reply marker"
    assert f"{LESSONS_KEPT}. " in text, "the newest lesson is shown"
    assert "older lesson" in text and "/bot forget" in text


def test_a_short_book_is_listed_whole():
    text = listing("acme/shop", [lesson(1), lesson(2)])
    assert "1. " in text and "2. " in text and "older lesson" not in text
