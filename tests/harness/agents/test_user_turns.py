"""``Agent.user_turns`` from an index kept up to date per event answers exactly what the full
scan of the log answers: on random sequences of turns, failed attempts, compactions and
irregular logs, at every step, after a reload, and after another writer appended to the log."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsh_harness.agents.user_turns import UserTurnIndex, scan_user_turns
from dsh_harness.sessions.events import (
    AssistantMessage,
    Compaction,
    SessionHeader,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from dsh_harness.sessions.jsonl_store import JsonlSessionStore
from dsh_harness.sessions.log import Session

VIEW = "agents.user_turns"
T0 = datetime(2026, 1, 2, tzinfo=UTC)


def steps(rng: random.Random, n: int) -> list[tuple[type, dict]]:
    """Random events as ``Session.record`` takes them: mostly well-formed turns, some failed,
    compactions (sometimes naming an older turn than the last one did) and irregular logs (a
    turn's meta written again, a message without a turn start or after its failed end)."""
    out: list[tuple[type, dict]] = []
    turn = 0
    while len(out) < n:
        r = rng.random()
        if r < 0.55:
            turn += 1
            out.append((TurnStart, {"turn": turn, "meta": {"n": rng.randrange(5)}}))
            out.append((UserMessage, {"turn": turn, "content": f"message {turn}"}))
            out.append((AssistantMessage, {"turn": turn, "content": "ok"}))
            ok = rng.random() < 0.8
            out.append((TurnEnd, {"turn": turn, "reason": "completed" if ok else "error",
                                  "committed": ok}))
        elif r < 0.7 and turn:
            out.append((Compaction, {"through_turn": rng.randint(0, turn), "summary": "s"}))
        elif r < 0.8 and turn:
            out.append((TurnStart, {"turn": rng.randint(1, turn),
                                    "meta": {"again": rng.randrange(3)}}))
        elif r < 0.9 and turn:
            out.append((UserMessage, {"turn": rng.randint(1, turn + 1), "content": "odd"}))
        elif turn:
            out.append((TurnEnd, {"turn": rng.randint(1, turn), "reason": "error",
                                  "committed": False}))
    return out


def same(session: Session, rng: random.Random) -> None:
    index = session.view(VIEW, UserTurnIndex.of)
    top = max((getattr(e, "turn", 0) for e in session.events), default=0)
    for through in (0, rng.randint(0, top + 1)):
        assert index.turns(through) == scan_user_turns(session.events, through)


@pytest.mark.parametrize("seed", range(40))
async def test_the_index_answers_what_the_full_scan_answers(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    store = JsonlSessionStore(tmp_path / "sessions")
    header = SessionHeader(id=f"test:s:{seed}", created_at=T0)
    await store.create(header)
    session = Session(store, header, [])
    plan = steps(rng, 120)
    opened_at = rng.randrange(len(plan))   # the index is built from whatever came before
    for i, (cls, fields) in enumerate(plan):
        await session.record(cls, **fields)
        if i >= opened_at:
            same(session, rng)
    await session.flush()
    before = session.view(VIEW, UserTurnIndex.of).turns()

    # A reload: a new Session, its index built from the loaded log.
    mark = await store.mark(header.id)
    await store.release(header.id)
    loaded = await store.load(header.id)
    reloaded = Session(store, loaded.header, loaded.events)
    assert reloaded.view(VIEW, UserTurnIndex.of).turns() == before
    same(reloaded, rng)

    # Another writer appends (a replica, or another process): the released session takes
    # what follows its mark, event by event, and its index follows.
    other = JsonlSessionStore(tmp_path / "sessions")
    try:
        theirs = await other.load(header.id, repair=True)
        writer = Session(other, theirs.header, theirs.events)
        for cls, fields in steps(rng, 30):
            fields = {**fields, "turn": fields.get("turn", 0) + 1000} \
                if "turn" in fields else fields
            await writer.record(cls, **fields)
        await writer.flush()
    finally:
        await other.close()
    appended = await store.load_after(header.id, mark, repair=True)
    assert appended
    session.extend(appended)
    same(session, rng)
    assert session.view(VIEW, UserTurnIndex.of).turns() == \
        scan_user_turns((await store.load(header.id)).events)
    await store.close()


def test_a_turns_meta_written_again_is_the_one_listed():
    index = UserTurnIndex()
    events = [TurnStart(seq=1, at=T0, turn=1, meta={"a": 1}),
              UserMessage(seq=2, at=T0, turn=1, content="hi")]
    for e in events:
        index.apply(e)
    assert index.turns()[0].meta == {"a": 1}
    again = TurnStart(seq=3, at=T0, turn=1, meta={"a": 2})
    index.apply(again)
    assert index.turns() == scan_user_turns([*events, again])
    assert index.turns()[0].meta == {"a": 2}


def test_the_listed_meta_cannot_be_changed_by_a_caller():
    index = UserTurnIndex.of([TurnStart(seq=1, at=T0, turn=1, meta={"a": 1}),
                              UserMessage(seq=2, at=T0, turn=1, content="hi")])
    with pytest.raises(TypeError):
        index.turns()[0].meta["a"] = 3  # type: ignore[index]
