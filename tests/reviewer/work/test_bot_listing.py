"""``/bot lessons`` answers in one comment GitHub accepts (at most 65,536 characters), however
many lessons the repository keeps: the newest shown, the rest counted and pointed to."""

from __future__ import annotations

from datetime import UTC, datetime

from dsh_github_reviewer.turn.lessons import LessonNote, lessons_part
from dsh_github_reviewer.work.bot_commands import listing
from dsh_github_reviewer.work.lessons import LESSON_CHARS, LESSONS_GIVEN, LESSONS_KEPT, Lesson

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



def test_past_the_newest_given_the_listing_and_the_turn_say_so():
    text = listing("acme/shop", [lesson(i) for i in range(1, LESSONS_GIVEN + 2)])
    assert f"the newest {LESSONS_GIVEN} are given" in text
    # Lesson 1 fell out of the newest given: the turn does not claim a maintainer removed it.
    out, meta = lessons_part([LessonNote(2, "b", "m")], {1: "digest of lesson 1"})
    assert "no longer among the newest lessons given" in out and "lesson 1." in out
    assert meta == {"given": {"2": meta["given"]["2"]}, "withdrawn": [1]}


def test_a_lesson_taught_on_a_finding_tells_the_reviewer_what_that_finding_said():
    """'Not a bug, we validate upstream' means nothing to a later review without the finding it
    answers: the note names the place and the finding's first words (the bot's own)."""
    from dsh_github_reviewer.work.lessons import LessonFinding, notes

    x = lesson(1).model_copy(update={"text": "Not a bug: validated upstream.",
                                     "finding": LessonFinding(
                                         comment_id=7, number=1, path="shop/orders.py", line=15,
                                         text="**[critical]** `eval()` on caller input")})
    (note,) = notes([x])
    assert note.where.startswith("shop/orders.py:15 in #1") and "`eval()` on caller input" in \
        note.where
    text, _ = lessons_part([note], {})
    assert "`eval()` on caller input" in text and "Not a bug: validated upstream." in text


def test_listing_lessons_pings_nobody():
    """GitHub notifies every ``@login`` and ``@org/team`` in a comment: ``/bot lessons`` would
    ping every teacher (up to 200 people) and every team a lesson names, each time it is
    asked."""
    x = lesson(1).model_copy(update={"text": "Ask @acme/security about crypto changes."})
    text = listing("acme/shop", [x])
    assert "@maintainer" not in text.replace("`@maintainer`", "")
    assert "@acme/security" not in text and "acme/security about crypto" in text


def test_who_removed_a_lesson_reads_as_words():
    from dsh_github_reviewer.work.bot_commands import removed_by

    def gone(by: str) -> str:
        return removed_by(lesson(1).model_copy(update={"removed_by": by}))
    assert gone("maintainer") == "by `@maintainer`"
    assert gone("(web UI)") == "on the web UI" and "@" not in gone("(limit)")
