"""Agents on the scripted model server: turns, tools, limits, worlds, titles, retries."""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import UTC, datetime, timedelta

import pytest

from dsh_harness.agents import AgentError
from dsh_harness.sessions.events import RetryNotice, TitleSet, ToolResult, TurnEnd
from dsh_harness.testing import Fault, Reply, ScriptedModelServer
from tests.harness.agent_kit import SYSTEM, canon, make_harness
from tests.waiting import wait_until


@pytest.fixture
def server():
    with ScriptedModelServer() as s:
        yield s


async def test_turn_with_tool_calls_is_logged_and_replayed(tmp_path, server):
    server.push(Reply(content="calling", tool_calls=[("echo", {"text": "a"}),
                                                     ("echo", {"text": "b"})]),
                Reply(content="done: a b", reasoning="thinking about it"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:one")
    outcome = await agent.followup("please echo a and b")
    assert outcome.ok and outcome.text == "done: a b"
    assert outcome.usage.output > 0
    second = server.requests[1]
    assert second["messages"][0] == {"role": "system", "content": SYSTEM}
    tool_msgs = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["echo:a", "echo:b"]
    assert [t["function"]["name"] for t in second["tools"]] == ["big", "echo", "slow"]
    await h.close()


async def test_a_tool_that_ends_the_turn_saves_the_closing_request(tmp_path, server):
    """``ToolText(ends_turn=True)``: no model request only for a closing text; the next turn
    appends to the same prefix (the transcript ends with the tool result)."""
    server.push(Reply(content="posting it", tool_calls=[("echo", {"text": "a"}), ("done", {})]),
                Reply(content="second turn"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:done")
    outcome = await agent.followup("do it")
    assert outcome.ok and outcome.text == "posting it"
    assert len(server.requests) == 1, "no request after the task was done"
    second = await agent.followup("and again")
    assert second.ok and second.text == "second turn"
    first_messages, later = server.requests[0]["messages"], server.requests[1]["messages"]
    assert canon(later[:len(first_messages)]) == canon(first_messages), "a stable prefix"
    assert [m["role"] for m in later[len(first_messages):]] == [
        "assistant", "tool", "tool", "user"]
    await h.close()
    # Replayed from the log, the transcript is the same.
    h2 = make_harness(tmp_path, server.base_url)
    resumed = await h2.agents.resume("test:done")
    server.push(Reply(content="third"))
    await resumed.followup("once more")
    assert canon(server.requests[2]["messages"][:len(later)]) == canon(later)
    await h2.close()


async def test_world_inputs_reach_the_world_hook_on_open_not_on_a_live_agent(tmp_path, server):
    server.push(Reply(content="one"), Reply(content="two"))
    h = make_harness(tmp_path, server.base_url)
    worlds = h.plugins.pm.get_plugin("worlds")
    agent = await h.agents.get_or_open("test:inputs", inputs={"model": "scripted/other-model"})
    assert agent.model == "other-model" and worlds.inputs == [{"model": "scripted/other-model"}]
    assert (await agent.followup("hi")).ok and server.requests[-1]["model"] == "other-model"
    # A live agent keeps its world; evicted and opened again without inputs (the web UI), the
    # owner builds the world from its own facts: here the default model.
    assert await h.agents.get_or_open("test:inputs", inputs={"model": "x/y"}) is agent
    await h.agents.evict("test:inputs")
    agent = await h.agents.resume("test:inputs")
    assert agent.model == "deepseek-v4-flash" and worlds.inputs[-1] is None
    assert (await agent.followup("again")).ok
    await h.close()


async def test_prefix_property_three_turns_and_restart(tmp_path, server):
    server.push(Reply(tool_calls=[("echo", {"text": "1"})]), Reply(content="t1", reasoning="r1"),
                Reply(content="t2"),
                Reply(tool_calls=[("big", {"n": 50})]), Reply(content="t3"),
                Reply(content="t4 after restart"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:prefix")
    for text in ("turn one", "turn two", "turn three"):
        assert (await agent.followup(text)).ok
    await h.close()
    h2 = make_harness(tmp_path, server.base_url)  # a new process, as far as state goes
    agent2 = await h2.agents.resume("test:prefix")
    assert (await agent2.followup("turn four")).ok
    assert agent2.user_messages() == ["turn one", "turn two", "turn three", "turn four"]
    await h2.close()

    reqs = server.requests
    assert len(reqs) == 6
    for prev, cur in itertools.pairwise(reqs):
        n = len(prev["messages"])
        assert canon(cur["messages"][:n]) == canon(prev["messages"]), "prefix changed"
        assert json.dumps(cur["tools"]) == json.dumps(prev["tools"])
    # The assistant reply of each request is replayed exactly, reasoning included.
    assert reqs[2]["messages"][4] == {"role": "assistant", "content": "t1",
                                      "reasoning_content": "r1"}


async def test_retry_after_429_gives_one_turn_without_duplicates(tmp_path, server):
    server.inject(Fault.rate_limit(0.05), Fault.server_error())
    server.push(Reply(content="finally"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:retry")
    outcome = await agent.followup("hello")
    assert outcome.ok and outcome.text == "finally"
    events = agent.session.events
    assert [e.type for e in events if e.type in ("user_message", "assistant_message")] == [
        "user_message", "assistant_message"]
    retries = [e for e in events if isinstance(e, RetryNotice)]
    assert [r.attempt for r in retries] == [1, 2]
    assert retries[0].wait_s == pytest.approx(0.05)
    await h.close()


async def test_retry_after_beyond_the_cap_fails_the_attempt_at_once(tmp_path, server):
    # A server asking for an hour (more than retry_after_max_s): nothing sleeps - neither the
    # hour nor the cap (retrying sooner than asked only meets the limit again). The attempt
    # fails now, saying why, and the caller's backoff takes over.
    server.inject(Fault.rate_limit(3600))
    server.push(Reply(content="never asked for"))
    h = make_harness(tmp_path, server.base_url, extra="retry_after_max_s = 30\n")
    agent = await h.agents.create("test:cap")
    outcome = await asyncio.wait_for(agent.followup("hello"), 20)
    assert not outcome.ok and outcome.failure == "rate_limited"
    assert "asks to wait 3600 s, more than providers." in outcome.error
    assert [e for e in agent.session.events if isinstance(e, RetryNotice)] == []
    assert [s.fault for s in server.served] == ["rate_limit"], "asked once, never retried"
    await h.close()


async def test_a_rejected_key_is_an_auth_failure(tmp_path, server):
    server.inject(Fault.auth())
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:auth")
    outcome = await agent.followup("hello")
    assert not outcome.ok and outcome.failure == "auth" and "HTTP 401" in outcome.error
    await h.close()


def test_retry_after_http_date_is_read():
    from email.utils import format_datetime

    from dsh_harness.llm.openai_provider import retry_after_s

    when = datetime.now(UTC) + timedelta(seconds=120)
    assert 100 < retry_after_s({"retry-after": format_datetime(when, usegmt=True)}) <= 120
    assert retry_after_s({"retry-after": "7"}) == 7
    assert retry_after_s({"retry-after": "soon"}) is None


async def test_stream_cut_is_retried_and_leaves_no_partial_message(tmp_path, server):
    server.inject(Fault.stream_cut())
    server.push(Reply(content="a long answer that will be cut " * 5),
                Reply(content="complete answer"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:cut")
    outcome = await agent.followup("hello")
    assert outcome.ok and outcome.text == "complete answer"
    assistant = [e for e in agent.session.events if e.type == "assistant_message"]
    assert [a.content for a in assistant] == ["complete answer"]
    await h.close()


async def test_missing_api_key_names_the_variable(tmp_path, server, monkeypatch):
    monkeypatch.delenv("DSH_TEST_KEY", raising=False)
    h = make_harness(tmp_path, server.base_url,
                     extra='[providers.nokey]\nbase_url = "http://127.0.0.1:9"\n'
                           'api_key_env = "DSH_TEST_KEY"\n',
                     model="nokey/deepseek-v4-flash")
    agent = await h.agents.create("test:nokey")
    outcome = await agent.followup("hi")
    assert outcome.reason == "error"
    assert "set DSH_TEST_KEY in the environment" in outcome.error
    await h.close()


async def test_tool_errors_timeouts_caps_and_budget(tmp_path, server):
    server.push(Reply(tool_calls=[("nope", {}), ("echo", "not json"), ("slow", {"seconds": 5}),
                                  ("big", {"n": 500}), ("echo", {"text": "over budget"})]),
                Reply(content="ok"))
    h = make_harness(tmp_path, server.base_url, tool_timeout_s=0.2, tool_result_limit=100,
                     max_tool_calls=2)
    agent = await h.agents.create("test:pipeline")
    assert (await agent.followup("go")).ok
    results = [e for e in agent.session.events if isinstance(e, ToolResult)]
    assert results[0].is_error and "unknown tool 'nope'" in results[0].content
    assert results[1].is_error and "not valid JSON" in results[1].content
    assert results[2].is_error and "timed out after 0.2s" in results[2].content
    assert not results[3].is_error
    assert results[3].content == "x" * 100 + "\n...[tool result truncated]"
    assert results[4].is_error and "tool budget exhausted: 2 calls" in results[4].content
    await h.close()


async def test_deadline_and_cancel_close_the_turn(tmp_path, server):
    server.push(Reply(tool_calls=[("slow", {"seconds": 30})]),
                Reply(tool_calls=[("slow", {"seconds": 30})]), Reply(content="next answer"))
    h = make_harness(tmp_path, server.base_url, tool_timeout_s=60)
    agent = await h.agents.create("test:deadline")
    loop = asyncio.get_running_loop()
    outcome = await agent.followup("slow please", deadline=loop.time() + 0.5)
    assert outcome.reason == "deadline"
    fut = agent.followup("slow again")
    # Cancel once the second turn is under way (its model request served, its slow tool
    # running), whatever the machine's load: a fixed sleep could cancel before the turn began.
    await wait_until(lambda: len(server.requests) >= 2, what="the second turn's model request")
    agent.cancel()
    assert (await fut).reason == "aborted"
    ends = [e for e in agent.session.events if isinstance(e, TurnEnd)]
    assert [(e.reason, e.committed) for e in ends] == [("deadline", False), ("aborted", False)]
    assert (await agent.followup("next")).text == "next answer"
    # Failed attempts are never replayed: no orphan tool calls, one user message.
    msgs = server.requests[-1]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[-1]["content"] == "next"
    await h.close()


async def test_one_turn_at_a_time_and_when_idle(tmp_path, server):
    server.push(Reply(content="first"), Reply(content="second"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:queue")
    f1, f2 = agent.followup("one"), agent.followup("two")
    last = await agent.when_idle()
    assert (await f1).text == "first" and (await f2).text == "second"
    assert last.text == "second"
    users = [m for m in server.requests[1]["messages"] if m["role"] == "user"]
    assert [u["content"] for u in users] == ["one", "two"]
    await h.close()


async def test_worlds_scoped_tools_and_restrictions(tmp_path, server):
    from tests.harness.agent_kit import echo, tool

    server.push(*[Reply(content="ok")] * 4)
    h = make_harness(tmp_path, server.base_url)
    h.agents.register_global_tool(tool("global_clock", echo))
    private = await h.agents.create("test:private:1")
    other = await h.agents.create("test:other:1")
    opened = await h.agents.create("test:open:1")
    names = lambda a: [t.name for t in a.tools]  # noqa: E731
    assert "private_only" in names(private) and "private_only" not in names(other)
    assert "global_clock" not in names(private) + names(other)
    assert "global_clock" in names(opened)
    for a in (private, other, opened):
        await a.followup("hi")
    assert [t["function"]["name"] for t in server.requests[1]["tools"]] == [
        "big", "echo", "slow"]
    with pytest.raises(AgentError, match="no plugin provides a world"):
        await h.agents.create("elsewhere:1")
    await h.close()

    # A different code path (a fresh harness, as the CLI or web UI would be) gets the same world.
    h2 = make_harness(tmp_path, server.base_url)
    again = await h2.agents.resume("test:private:1")
    assert names(again) == names(private)
    await h2.close()


async def test_titles_pinned_and_fallback(tmp_path, server):
    server.push(Reply(content="a"), Reply(content="b"))
    h = make_harness(tmp_path, server.base_url)
    pinned = await h.agents.create("test:pinned:1")
    await pinned.followup("a first prompt that would make a fallback title")
    assert pinned.session.title() == ("Pinned test:pinned:1", True)
    plain = await h.agents.create("test:plain:1")
    await plain.followup("  Review   this\nplease  ")
    assert plain.session.title() == ("Review this please", False)
    await h.close()
    h2 = make_harness(tmp_path, server.base_url)
    again = await h2.agents.resume("test:pinned:1")
    titles = [e for e in again.session.events if isinstance(e, TitleSet)]
    assert len(titles) == 1, "resuming must not re-log an unchanged pinned title"
    summaries = {s.id: s for s in await h2.sessions.summaries()}
    assert summaries["test:pinned:1"].title == "Pinned test:pinned:1"
    await h2.close()


async def test_evict_and_resume(tmp_path, server):
    server.push(Reply(content="a"), Reply(content="b"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.get_or_open("test:evict")
    await agent.followup("one")
    assert await h.agents.evict("test:evict")
    assert h.agents.get("test:evict") is None
    agent2 = await h.agents.get_or_open("test:evict")
    assert agent2 is not agent
    await agent2.followup("two")
    assert len(server.requests[1]["messages"]) == 4
    await h.close()


async def test_create_twice_is_an_error(tmp_path, server):
    h = make_harness(tmp_path, server.base_url)
    await h.agents.create("test:dup")
    with pytest.raises(AgentError, match="already exists"):
        await h.agents.create("test:dup")
    await h.close()


async def test_a_tool_text_note_is_logged_but_not_sent_to_the_model():
    """ToolText: a note for the log and the UI (e.g. what a call posted), not for the model."""
    from dsh_harness import Tool, ToolContext, ToolText
    from dsh_harness.agents.pipeline import execute
    from dsh_harness.sessions.events import ToolCall

    async def post(args, ctx):
        return ToolText("Posted.", note="review https://example.test/r/1")
    tools = {"post": Tool(name="post", description="d", parameters={}, handler=post)}
    ctx = ToolContext(session_id="s", turn=1, turn_meta={}, call_id="c1", _consume=lambda: None)
    out = await execute(tools, ToolCall(id="c1", name="post", arguments="{}"), ctx, 5, 100)
    assert (out.content, out.note, out.is_error) == ("Posted.", "review https://example.test/r/1",
                                                     False)
    assert type(out.content) is str, "the model gets plain text"
