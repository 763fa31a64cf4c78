"""Lessons and second-look outcomes in the reviewer's storage domain, on every backend (json,
sqlite, postgres): numbers are never reused, teaching is idempotent per comment, forgetting
leaves a tombstone that answers a re-run the same way; accounts and repositories are apart."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.core.triggers import Trigger
from dsh_github_reviewer.turn.second_look import Checked, SecondLookOutcome
from dsh_github_reviewer.work import second_look
from dsh_github_reviewer.work.lessons import LESSON_CHARS, LessonStore, notes
from dsh_github_reviewer.work.store import domain_spec
from dsh_harness.storage import Domain
from tests.harness.backend_kit import NAMES, make_backend

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=NAMES)
async def domain(request, tmp_path):
    backend = make_backend(request, request.param, tmp_path / "store")
    d = await Domain.open(domain_spec(), backend)
    yield d, backend
    close = getattr(backend, "close", None)
    if close is not None:
        await close()


async def test_lessons_are_numbered_idempotent_and_forgotten_with_a_tombstone(domain):
    d, backend = domain
    store = LessonStore(d, "demo")

    async def teach(text: str, comment: int, repo: str = "acme/shop"):
        return await store.teach(repo, text=text, source="command", taught_by="m",
                                 association="member", at=T0, comment_id=comment, number=1)

    one = await teach("First lesson.\u202e", 10)
    again = await teach("First lesson, sent again by a retry", 10)
    two = await teach("x" * 2000, 11)
    assert (one.id, again.id, two.id) == (1, 1, 2)
    assert one.text == "First lesson." and len(two.text) == LESSON_CHARS + 1
    assert one.association == "MEMBER"
    assert await teach(" \u200b ", 12) is None, "nothing left after sanitizing"
    assert [x.id for x in await store.active("ACME/Shop")] == [1, 2]
    assert await store.active("acme/other") == []
    assert await LessonStore(d, "other-account").active("acme/shop") == []

    lesson, removed = await store.forget("acme/shop", 1, by="m", at=T0, comment_id=20)
    assert lesson.id == 1 and removed
    assert await store.forget("acme/shop", 1, by="m", at=T0, comment_id=20) == (lesson, True)
    _, again_removed = await store.forget("acme/shop", 1, by="n", at=T0, comment_id=21)
    assert not again_removed, "already removed by another comment"
    assert await store.forget("acme/shop", 7, by="m", at=T0, comment_id=22) == (None, False)
    three = await teach("Third.", 13)
    assert three.id == 3, "numbers are never reused"
    assert [n.id for n in notes(await store.active("acme/shop"))] == [2, 3]

    # What was stored is read back the same after reopening the domain.
    reopened = await Domain.open(domain_spec(), backend)
    book = await LessonStore(reopened, "demo").book("acme/shop")
    assert [(x.id, x.active) for x in book.lessons] == [(1, False), (2, True), (3, True)]
    assert book.lessons[0].removed_by_comment == 20


async def test_second_look_outcomes_replace_per_trigger(domain):
    d, _ = domain
    key = PrRef.parse("demo:acme/shop#1")
    save = second_look.saver(d, key)
    checked = [Checked(path="a.py", line=3, severity="major", text="t", action="drop",
                       reason="a.py:3: no")]
    await save(SecondLookOutcome(trigger="demo:auto:abc", head="abc", checked=checked))
    await save(SecondLookOutcome(trigger="demo:auto:abc", head="abc"))
    await save(SecondLookOutcome(trigger="demo:cmd:7", head="abc", checked=checked))
    got = await second_look.outcomes(d, key)
    assert [(o.trigger, len(o.dropped)) for o in got] == [(Trigger.auto("demo", "abc"), 0),
                                                           (Trigger.cmd("demo", 7), 1)]
    # Stored as the trigger's string, as before it was typed: earlier outcomes still load.
    ((stored_key, text),) = await d.texts(second_look.SECOND_LOOKS)
    assert stored_key == "demo:acme/shop#1" and '"trigger":"demo:cmd:7"' in text.replace(" ", "")
