"""O(new) turns: the incremental transcript equals the reference, resumes read only what was
appended, the prompt estimate is the same number, and per-session state goes with the session."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import pytest

from dsh_harness.agents import compaction
from dsh_harness.sessions.events import (
    AssistantMessage,
    Compaction,
    TitleSet,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from dsh_harness.sessions.history import model_messages
from dsh_harness.sessions.jsonl_store import dump_line, file_name
from dsh_harness.sessions.transcript import Transcript, encode
from dsh_harness.testing import Reply, ScriptedModelServer
from tests.harness.agent_kit import make_harness

AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def server():
    with ScriptedModelServer() as s:
        yield s


def random_log(rng: random.Random, turns: int) -> list:
    """Turns that complete, fail (new attempts), or fail the old way (committed, closed with
    synthesized results); compactions between turns; reasoning, unicode, tool calls."""
    events: list = []

    def add(cls, **kw):
        events.append(cls(seq=len(events) + 1, at=AT, **kw))

    ended: list[int] = []
    floor = 0
    for turn in range(1, turns + 1):
        add(TurnStart, turn=turn)
        add(UserMessage, turn=turn, content=f"ask {turn} ✓ " * rng.randint(1, 3))
        for step in range(rng.randint(0, 3)):
            call = ToolCall(id=f"c{turn}.{step}", name="echo", arguments='{"t": "é"}')
            add(AssistantMessage, turn=turn, content=rng.choice([None, "calling"]),
                reasoning=rng.choice([None, f"think {turn}.{step}"]), tool_calls=[call])
            add(ToolResult, turn=turn, call_id=call.id, name="echo", content="r" * step)
        fate = rng.random()
        if fate < 0.6:
            add(AssistantMessage, turn=turn, content=f"done {turn}", reasoning="why")
            add(TurnEnd, turn=turn, reason="completed")
            ended.append(turn)
        elif fate < 0.85:
            add(TurnEnd, turn=turn, reason="error", error="boom", committed=False)
        else:
            add(TurnEnd, turn=turn, reason="deadline")  # an old log's failed turn
            ended.append(turn)
        later = [t for t in ended[:-1] if t > floor]  # compactions only move forward
        if rng.random() < 0.15 and later:
            floor = rng.choice(later)
            add(Compaction, through_turn=floor, summary=f"summary {turn}")
        if rng.random() < 0.1:
            add(TitleSet, title=f"t{turn}", pinned=rng.random() < 0.5)
    return events


def open_turn(events: list) -> int | None:
    for e in reversed(events):
        if isinstance(e, TurnEnd):
            return None
        if isinstance(e, TurnStart):
            return e.turn
    return None


@pytest.mark.parametrize("mode", ["all", "current_turn", "none"])
def test_incremental_transcript_equals_the_reference_after_every_event(mode):
    for seed in range(25):
        events = random_log(random.Random(seed), 12)
        live = Transcript(mode)
        for n, e in enumerate(events, start=1):
            live.apply(e)
            want = model_messages(events[:n], mode, open_turn(events[:n]))
            assert live.messages() == want, (seed, n)
            assert live.encoded() == [encode(m) for m in want], (seed, n)
            assert live.encoded_size() == sum(len(encode(m)) for m in want)
            assert b"".join(live.encoded_runs()) == b"".join(b"," + encode(m) for m in want)
            # The head through a turn (what a compaction summary request sends): the
            # reference's messages of the events up to that turn, a prefix of messages().
            current = open_turn(events[:n])
            for t in range(0, (current or 13) if n % 7 == 0 else 0):
                head = [e for e in events[:n] if getattr(e, "turn", None) is None
                        or e.turn <= t]
                messages, encoded = live.through(t)
                assert messages == model_messages(head, mode, current), (seed, n, t)
                assert encoded == live.encoded()[:len(encoded)] == [encode(m) for m in messages]
        assert Transcript.of(events, mode).messages() == live.messages()


def test_the_committed_history_is_kept_in_few_runs_reused_by_every_request():
    """A request sends the committed history from the same few buffers until the next commit:
    no history-sized copy per request, and O(log turns) pieces however long the session."""
    events: list = []

    def add(cls, **kw):
        events.append(cls(seq=len(events) + 1, at=AT, **kw))
        live.apply(events[-1])

    live = Transcript("all")
    for turn in range(1, 301):
        add(TurnStart, turn=turn)
        add(UserMessage, turn=turn, content=f"review {turn} " * (1 + turn % 7))
        committed = live.encoded_runs()
        call = ToolCall(id=f"c{turn}", name="echo", arguments="{}")
        add(AssistantMessage, turn=turn, content=None, tool_calls=[call])
        add(ToolResult, turn=turn, call_id=call.id, name="echo", content="r" * turn)
        runs = live.encoded_runs()
        # The running turn's messages come after the very objects of the request before.
        assert all(a is b for a, b in zip(committed[:-1], runs, strict=False))
        assert len(runs) == len(committed)
        add(AssistantMessage, turn=turn, content=f"done {turn}")
        add(TurnEnd, turn=turn, reason="completed")
        assert len(live.encoded_runs()) <= 2 * (turn.bit_length() + 1)
    assert b"".join(live.encoded_runs()) == b"".join(b"," + e for e in live.encoded())


async def test_prompt_estimate_is_the_serialized_estimate(tmp_path, server):
    server.push(Reply(content="a", tool_calls=[("echo", {"text": "ü"})]), Reply(content="b"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:estimate")
    assert (await agent.followup("one ✓")).ok
    for _ in range(2):
        req = agent.request(agent.session.last_turn)
        payload = {"messages": req.wire_messages(), "tools": req.tools}
        assert agent.prompt_tokens() == compaction.estimate_tokens(payload)
        await agent.session.record(TurnStart, turn=2)
        await agent.session.record(UserMessage, turn=2, content="x" * 37)
    await h.close()


async def test_resume_after_evict_reads_only_what_was_appended(tmp_path, server):
    sid = "test:incremental"
    path = tmp_path / "home" / "sessions" / file_name(sid)
    server.push(Reply(content="one"), Reply(content="two"), Reply(content="three"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.get_or_open(sid)
    assert (await agent.followup("first")).ok
    assert await h.agents.evict(sid)
    # Another writer appended an event while no agent was live: it is read and applied.
    seq = agent.session.events[-1].seq + 1
    with path.open("ab") as f:
        f.write(dump_line(TitleSet(seq=seq, at=AT, title="set elsewhere", pinned=True)))
    again = await h.agents.get_or_open(sid)
    assert again.session is agent.session, "the released session was taken back"
    assert again.session.title() == ("set elsewhere", True)
    assert (await again.followup("second")).ok
    users = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["first", "second"]
    # A rewritten tail (not the bytes this process left) means a whole load.
    assert await h.agents.evict(sid)
    lines = path.read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    last["usage"]["output"] += 1
    lines[-1] = (json.dumps(last, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    path.write_bytes(b"".join(lines))
    third = await h.agents.get_or_open(sid)
    assert third.session is not agent.session
    assert third.session.events[-1].usage.output == last["usage"]["output"]
    assert (await third.followup("third")).ok
    await h.close()


def _damage_head(path) -> None:
    """Corrupt line 3 in place (same length, same inode), far before the checked tail."""
    raw = path.read_bytes()
    assert len(raw) > 100_000
    lines = raw.split(b"\n")
    lines[2] = lines[2].replace(b'"turn":1', b'"turn":x', 1)
    with path.open("r+b") as f:
        f.write(b"\n".join(lines))


async def test_a_same_length_rewrite_means_a_whole_load(tmp_path, server):
    """The tail checksum cannot see an edit before its window, but a file of the released
    length with another mtime is not the one this process left: it is loaded whole, and the
    damage is reported instead of being papered over by the in-memory copy."""
    sid = "test:rewrite"
    path = tmp_path / "home" / "sessions" / file_name(sid)
    server.push(Reply(content="one " * 30_000))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.get_or_open(sid)
    assert (await agent.followup("first")).ok
    assert await h.agents.evict(sid)
    size = path.stat().st_size
    _damage_head(path)
    assert path.stat().st_size == size
    with pytest.raises(Exception, match="line 3 is corrupted"):
        await h.agents.get_or_open(sid)
    await h.close()


async def test_incremental_resume_skips_a_damaged_head(tmp_path, server):
    """Proof that the prefix is not re-read: when the file also grew (another writer
    appended), damage beyond the checked tail window goes unnoticed by the resume after evict,
    and is reported by a whole read (the documented limit of the mark)."""
    sid = "test:head"
    path = tmp_path / "home" / "sessions" / file_name(sid)
    server.push(Reply(content="one " * 30_000), Reply(content="two"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.get_or_open(sid)
    assert (await agent.followup("first")).ok
    assert await h.agents.evict(sid)
    _damage_head(path)
    seq = agent.session.events[-1].seq + 1
    with path.open("ab") as f:
        f.write(dump_line(TitleSet(seq=seq, at=AT, title="set elsewhere", pinned=True)))
    again = await h.agents.get_or_open(sid)
    assert again.session is agent.session
    assert (await again.followup("second")).ok
    with pytest.raises(Exception, match="line 3 is corrupted"):
        await h.sessions.read(sid)
    await h.close()


async def test_per_session_state_goes_with_the_session(tmp_path, server):
    server.push(*[Reply(content="ok")] * 3)
    h = make_harness(tmp_path, server.base_url)
    store = h.sessions.store
    for n in range(3):
        agent = await h.agents.get_or_open(f"test:many:{n}")
        assert (await agent.followup("hi")).ok
        assert await h.agents.evict(f"test:many:{n}")
    assert h.agents._opening == {}
    assert store._fds == {} and store._ends == {}
    await h.close()


async def test_the_released_session_cache_is_bounded(tmp_path, server, monkeypatch):
    from dsh_harness.sessions import service

    monkeypatch.setattr(service, "CACHE_SESSIONS", 2)
    server.push(*[Reply(content="ok")] * 3)
    h = make_harness(tmp_path, server.base_url)
    sessions = {}
    for n in range(3):
        agent = await h.agents.get_or_open(f"test:bound:{n}")
        assert (await agent.followup("hi")).ok
        sessions[n] = agent.session
        assert await h.agents.evict(f"test:bound:{n}")
    assert list(h.sessions._released) == ["test:bound:1", "test:bound:2"]
    assert (await h.agents.resume("test:bound:0")).session is not sessions[0]  # loaded whole
    assert (await h.agents.resume("test:bound:2")).session is sessions[2]
    await h.close()
