"""Prefix-cache economics and compaction, through the simulator."""

from __future__ import annotations

import itertools

import pytest

from dsh_harness.sessions.events import Compaction, TurnStart
from dsh_harness.sessions.history import SUMMARY_ACK
from dsh_harness.testing import (
    ModelRequest,
    PrefixCache,
    Reply,
    ScriptedModelServer,
    is_compaction_request,
)
from dsh_harness.testing.prefix_cache import estimate_tokens, render_prompt
from tests.harness.agent_kit import canon, make_harness


def test_simulator_hits_whole_units_of_a_repeated_prefix():
    cache = PrefixCache()
    a = b"x" * 1000
    assert cache.account(a) == (250, 0)
    total, hit = cache.account(a + b"y" * 100)
    assert total == 275 and hit == 192  # 3 whole 64-token units of the shared 250 tokens
    assert cache.account(b"z" + a)[1] == 0


async def test_second_turn_of_a_20k_session_is_mostly_cache_hits(tmp_path):
    with ScriptedModelServer() as server:
        server.push(Reply(tool_calls=[("big", {"n": 40_000})]), Reply(content="read it"),
                    Reply(tool_calls=[("big", {"n": 30_000})]), Reply(content="reviewed"),
                    Reply(content="second turn answer"))
        h = make_harness(tmp_path, server.base_url)
        agent = await h.agents.create("test:cache")
        assert (await agent.followup("read the big thing")).ok
        assert (await agent.followup("and again")).ok
        assert (await agent.followup("a new question in turn three")).ok
        await h.close()
        served = server.served[-1]
        req = served.request
        assert served.prompt_tokens >= 17_000
        theoretical = estimate_tokens(render_prompt(req["messages"][:-1], req["tools"]))
        assert served.cache_hit_tokens >= 0.95 * theoretical
        assert served.cache_hit_tokens <= theoretical


async def test_compaction_summarizes_old_turns_and_stays_prefix_stable(tmp_path):
    def policy(req: ModelRequest) -> Reply:
        if is_compaction_request(req):
            return Reply(content="SUMMARY of the early turns")
        if not req.tool_results():
            return Reply(tool_calls=[("big", {"n": 400})])
        return Reply(content=f"answer to {req.last_user_text()}")

    with ScriptedModelServer(policy=policy) as server:
        h = make_harness(tmp_path, server.base_url,
                         extra="[compaction]\nmax_prompt_tokens = 900\nkeep_recent_turns = 1\n")
        agent = await h.agents.create("test:compact")
        for i in range(6):
            assert (await agent.followup(f"question {i}")).ok
        await h.close()
        compactions = [e for e in agent.session.events if isinstance(e, Compaction)]
        assert compactions, "the budget must have triggered a compaction"
        first = compactions[0]
        assert first.summary == "SUMMARY of the early turns" and first.tokens_before > 900
        # user_messages(): what the model still sees verbatim, not the summarized turns.
        last = compactions[-1].through_turn
        assert agent.user_messages() == [f"question {i}" for i in range(last, 6)]
        assert first.usage.output > 0

        chat = [r for r in server.requests if not is_compaction_request(r)]
        for req in chat:
            msgs = req["messages"]
            calls = [c["id"] for m in msgs for c in m.get("tool_calls", [])]
            results = [m["tool_call_id"] for m in msgs if m["role"] == "tool"]
            assert calls == results, "a tool call was split from its result"
        after = [r for r in chat if any(m.get("content") == SUMMARY_ACK for m in r["messages"])]
        assert after, "requests after the compaction start with the summary"
        head = after[0]["messages"]
        assert "SUMMARY of the early turns" in head[1]["content"]
        # Until the next compaction, each request extends the previous one byte for byte.
        for prev, cur in itertools.pairwise(after):
            if cur["messages"][1] != prev["messages"][1]:
                break
            n = len(prev["messages"])
            assert canon(cur["messages"][:n]) == canon(prev["messages"])


def _compacting_policy(req: ModelRequest) -> Reply:
    if is_compaction_request(req):
        return Reply(content="SUMMARY")
    if not req.tool_results():
        return Reply(tool_calls=[("big", {"n": 300})])
    return Reply(content="ok")


async def _turns_between_compactions(tmp_path, target: float) -> list[int]:
    with ScriptedModelServer(policy=_compacting_policy) as server:
        h = make_harness(tmp_path, server.base_url,
                         extra="[compaction]\nmax_prompt_tokens = 1500\n"
                               f"keep_recent_turns = 6\ntarget = {target}\n")
        agent = await h.agents.create("test:headroom")
        for i in range(24):
            assert (await agent.followup(f"run {i}")).ok
        await h.close()
    ran_in, turn = [], 0   # the turn each compaction ran in
    for e in agent.session.events:
        if isinstance(e, TurnStart):
            turn = e.turn
        elif isinstance(e, Compaction):
            ran_in.append(turn)
    return [b - a for a, b in itertools.pairwise(ran_in)]


async def test_a_compaction_leaves_headroom_so_runs_append_to_a_stable_prefix(tmp_path):
    """Compacting only down to ``keep_recent_turns`` when those turns nearly fill the budget
    makes every other run compact again (a new head each time: no prefix-cache hit). With
    headroom (``compaction.target``) at least five runs follow a compaction without another."""
    gaps = await _turns_between_compactions(tmp_path / "headroom", 0.5)
    assert gaps and min(gaps) >= 5, gaps
    thrash = await _turns_between_compactions(tmp_path / "none", 1.0)
    assert thrash and min(thrash) < 5, thrash   # what the headroom prevents


@pytest.mark.parametrize("replay", ["current_turn", "none"])
async def test_reasoning_replay_modes(tmp_path, replay):
    with ScriptedModelServer() as server:
        server.push(Reply(content="a", reasoning="r-a"), Reply(content="b"))
        # Lines of `extra` without a table header belong to [providers.scripted].
        h = make_harness(tmp_path, server.base_url, extra=f'reasoning_replay = "{replay}"\n')
        agent = await h.agents.create("test:reasoning")
        await agent.followup("one")
        await agent.followup("two")
        await h.close()
        assert "reasoning_content" not in server.requests[1]["messages"][2]


async def test_user_turns_carry_their_meta_and_leave_out_what_a_compaction_will_fold(tmp_path):
    with ScriptedModelServer() as server:
        server.push(*[Reply(content=f"answer {i}") for i in range(3)])
        h = make_harness(tmp_path, server.base_url,
                         extra="[compaction]\nmax_prompt_tokens = 900\nkeep_recent_turns = 1\n")
        agent = await h.agents.create("test:turns")
        for i in range(3):
            assert (await agent.followup(f"turn {i} " + "x" * 200, meta={"told": i})).ok
        turns = agent.user_turns()
        assert [(t.turn, t.meta, t.content[:6]) for t in turns] == [
            (1, {"told": 0}, "turn 0"), (2, {"told": 1}, "turn 1"), (3, {"told": 2}, "turn 2")]
        assert [t.content for t in turns] == agent.user_messages()
        # A next message this big makes the next turn compact all but the last turn: the
        # turns it will summarize are not "still seen" any more.
        assert [t.turn for t in agent.user_turns(upcoming_tokens=2_000)] == [3]
        assert [t.turn for t in agent.user_turns(upcoming_tokens=1)] == [1, 2, 3]
        await h.close()


async def test_dropping_compacted_turns_keeps_every_later_request_identical(tmp_path):
    """CI sessions travel in the Actions cache: their logs are rewritten without what the
    latest compaction summarized, and the model must not see a byte of difference."""
    import shutil

    def policy(req: ModelRequest) -> Reply:
        if is_compaction_request(req):
            return Reply(content="SUMMARY of the early turns")
        if not req.tool_results():
            return Reply(tool_calls=[("big", {"n": 400})])
        return Reply(content=f"answer to {req.last_user_text()}")

    extra = "[compaction]\nmax_prompt_tokens = 900\nkeep_recent_turns = 1\n"
    with ScriptedModelServer(policy=policy) as server:
        h = make_harness(tmp_path / "a", server.base_url, extra=extra)
        agent = await h.agents.create("test:compact")
        for i in range(6):
            assert (await agent.followup(f"question {i}")).ok
        await h.close()
        shutil.copytree(tmp_path / "a", tmp_path / "b")
        log_b = next((tmp_path / "b/home/sessions").glob("*.jsonl"))
        before = log_b.stat().st_size

        h = make_harness(tmp_path / "b", server.base_url, extra=extra)
        assert await h.sessions.drop_compacted("test:compact") > 0
        assert log_b.stat().st_size < 0.6 * before
        assert await h.sessions.drop_compacted("test:compact") == 0, "nothing more to drop"
        sent = []
        for home in ("a", "b"):
            h = make_harness(tmp_path / home, server.base_url, extra=extra)
            agent = await h.agents.get_or_open("test:compact")
            n = len(server.requests)
            assert (await agent.followup("question 6")).ok
            await h.close()
            sent.append([canon(r["messages"]) for r in server.requests[n:]])
        # The first request replays the stored history: identical bytes from either log (later
        # ones carry tool-call ids the scripted server numbers per request).
        assert sent[0][0] == sent[1][0] and len(sent[0]) == len(sent[1])
