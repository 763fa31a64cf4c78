"""Attempts: a failed turn stays in the log for people and is never replayed to the model.

Each scenario has a committed turn, then a failed attempt (killed before the first answer,
failing mid-stream, timing out in a tool), then a retry with the same user turn. The retry's
first request must be the committed prefix plus that user turn — byte-identical to the failed
attempt's first request, so a full hit on the testing kit's prefix-cache simulator.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from dsh_harness.sessions.events import TurnEnd
from dsh_harness.testing import Fault, Reply, ScriptedModelServer
from dsh_harness.testing.prefix_cache import BYTES_PER_TOKEN, UNIT_TOKENS, render_prompt
from dsh_harness.web.app import build_app
from tests.harness.agent_kit import make_harness
from tests.harness.sessions.test_sessions import _kill_when, _session_file

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def server():
    with ScriptedModelServer() as s:
        yield s


def full_hit(request: dict) -> int:
    """The cache hit of a prompt every whole 64-token unit of which was seen before."""
    prompt = render_prompt(request["messages"], request.get("tools"))
    return len(prompt) // (UNIT_TOKENS * BYTES_PER_TOKEN) * UNIT_TOKENS


def assert_well_formed(messages: list[dict]) -> None:
    roles = [m["role"] for m in messages]
    assert all(not (a == b == "user") for a, b in itertools.pairwise(roles)), roles
    calls = [c["id"] for m in messages for c in m.get("tool_calls", [])]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls == results, "every tool call replayed has its result, and nothing else"


def check_retry(server: ScriptedModelServer, first_of_attempt: int, retry: int,
                committed: int) -> None:
    """``served`` indexes: the failed attempt's first request, the retry's, the committed turn's
    last request."""
    failed, again = server.served[first_of_attempt], server.served[retry]
    assert again.request["messages"] == failed.request["messages"]
    prefix = server.served[committed].request["messages"]
    assert again.request["messages"][:len(prefix)] == prefix
    assert again.request["messages"][len(prefix)]["role"] == "assistant"
    assert again.request["messages"][-1]["role"] == "user"
    assert_well_formed(again.request["messages"])
    assert again.cache_hit_tokens == full_hit(again.request) > 0


async def visible_in_cli_and_web(tmp_path: Path, base_url: str, sid: str, error: str,
                                 capsys) -> None:
    from dsh_harness import cli

    h = make_harness(tmp_path, base_url)
    orig = cli.Harness
    cli.Harness = lambda loaded: make_harness(tmp_path, base_url)
    try:
        assert await asyncio.to_thread(cli.main, ["sessions", "show", sid]) == 0
    finally:
        cli.Harness = orig
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "failed attempt, not replayed" in ln]
    assert "turn_end" in line and error in line
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=build_app(h)),
                                  base_url="http://127.0.0.1") as c:
        page = (await c.get("/sessions/" + sid.replace(":", "%3A"))).text
    assert page.count("failed attempt, not replayed to the model") == 1
    assert error.replace("'", "&#39;") in page
    await h.close()


@pytest.mark.slow
def test_killed_before_the_first_answer_then_retried(tmp_path, server, capsys):
    sid = "test:attempt:kill"
    server.push(Reply(content="first answer"),
                Reply(content="a slowly streamed answer " * 40, chunk_delay_s=0.05),
                Reply(content="recovered"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    async def committed_turn():
        h = make_harness(tmp_path, server.base_url)
        assert (await (await h.agents.create(sid)).followup("first")).ok
        await h.close()
    asyncio.run(committed_turn())
    proc = subprocess.Popen([sys.executable, "-m", "tests.harness.agent_child", str(tmp_path),
                             server.base_url, sid, "second"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL)
    _kill_when(proc, lambda: len(server.served) >= 2)

    async def retry():
        h = make_harness(tmp_path, server.base_url)
        agent = await h.agents.resume(sid)
        (end,) = [e for e in agent.session.events if isinstance(e, TurnEnd) and e.turn == 2]
        assert end.reason == "interrupted" and not end.committed
        outcome = await agent.followup("second")
        await h.close()
        return outcome

    outcome = asyncio.run(retry())
    assert outcome.ok and outcome.text == "recovered" and outcome.turn == 3
    check_retry(server, first_of_attempt=1, retry=2, committed=0)
    asyncio.run(visible_in_cli_and_web(tmp_path, server.base_url, sid,
                                       "the process stopped during this turn", capsys))
    assert _session_file(tmp_path, sid).exists()


async def test_failing_mid_stream_then_retried(tmp_path, server, capsys):
    sid = "test:attempt:stream"
    h = make_harness(tmp_path, server.base_url)  # max_retries = 3
    agent = await h.agents.create(sid)
    server.push(Reply(tool_calls=[("echo", {"text": "x"})]), Reply(content="one"))
    assert (await agent.followup("first")).ok
    server.push(*[Reply(content="cut off " * 30)] * 4, Reply(content="two"))
    server.inject(*[Fault.stream_cut()] * 4)
    failed = await agent.followup("second")
    assert failed.reason == "error" and "gave up after 4 attempts" in failed.error
    assert [s.fault for s in server.served[2:]] == ["stream_cut"] * 4
    # What the model was told leaves the failed attempt out (a plugin builds on this).
    assert agent.user_messages() == ["first"]
    again = await agent.followup("second")
    assert again.ok and again.text == "two"
    check_retry(server, first_of_attempt=2, retry=6, committed=1)
    await h.close()
    await visible_in_cli_and_web(tmp_path, server.base_url, sid, "gave up after 4 attempts",
                                 capsys)


async def test_timing_out_in_a_tool_then_retried(tmp_path, server, capsys):
    sid = "test:attempt:deadline"
    h = make_harness(tmp_path, server.base_url, tool_timeout_s=60)
    agent = await h.agents.create(sid)
    server.push(Reply(content="one"), Reply(content="calling", tool_calls=[
        ("echo", {"text": "fast"}), ("slow", {"seconds": 30})]), Reply(content="two"))
    assert (await agent.followup("first")).ok
    loop = asyncio.get_running_loop()
    failed = await agent.followup("second", deadline=loop.time() + 0.5)
    assert failed.reason == "deadline"
    again = await agent.followup("second")
    assert again.ok and again.text == "two"
    check_retry(server, first_of_attempt=1, retry=2, committed=0)
    # The failed attempt's tool call and result stay in the log, unanswered call included.
    kinds = [e.type for e in agent.session.events if getattr(e, "turn", None) == 2]
    assert kinds.count("tool_call") == 2 and kinds.count("tool_result") == 1
    await h.close()
    await visible_in_cli_and_web(tmp_path, server.base_url, sid, "the turn deadline passed",
                                 capsys)


async def test_failed_attempts_never_reach_compaction_or_replay_after_restart(tmp_path, server):
    sid = "test:attempt:restart"
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create(sid)
    server.push(Reply(content="one"))
    assert (await agent.followup("first")).ok
    server.inject(*[Fault.server_error()] * 4)
    assert (await agent.followup("second")).reason == "error"
    await h.close()
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.resume(sid)
    server.push(Reply(content="two"))
    assert (await agent.followup("second")).ok
    users = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["first", "second"]
    line = json.loads(_session_file(tmp_path, sid).read_text().splitlines()[-1])
    assert line["type"] == "turn_end" and line["committed"] is True
    await h.close()


async def test_a_failed_log_write_fails_the_turn_at_once(tmp_path, server):
    """Disk full (a real ENOSPC from /dev/full) ends the turn with an error, not at its
    deadline; the session is loaded again for the next turn and works."""
    sid = "test:attempt:disk"
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.get_or_open(sid)
    store = h.sessions.store
    server.push(Reply(content="one"))
    assert (await agent.followup("first")).ok

    def full_disk(req):
        os.close(store._fds[sid])
        store._fds[sid] = os.open("/dev/full", os.O_WRONLY)
        return Reply(content="never logged")
    server.policy = full_disk
    loop = asyncio.get_running_loop()
    failed = await agent.followup("second", deadline=loop.time() + 120)
    assert failed.reason == "error" and "No space left on device" in failed.error
    assert agent.session.broken is not None
    # Nothing more is written to the broken session; its next turn fails at once too.
    again = await agent.followup("third")
    assert again.reason == "error" and "not writable" in again.error
    server.policy = None
    server.push(Reply(content="two"))
    agent2 = await h.agents.get_or_open(sid)  # the broken agent is dropped and reloaded
    assert agent2 is not agent
    assert (await agent2.followup("second")).ok
    users = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["first", "second"]
    await h.close()


async def test_an_empty_answer_is_a_failed_attempt_when_text_is_required(tmp_path, server):
    sid = "test:attempt:empty"
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create(sid)
    server.push(Reply(content="one"), Reply(content="  "), Reply(content=""),
                Reply(content="two"))
    assert (await agent.followup("first")).ok
    # Without require_text an empty answer completes the turn (a caller may want that)...
    assert (await agent.followup("second")).ok
    # ...with it, the turn is a failed attempt: logged, never replayed.
    failed = await agent.followup("third", require_text=True)
    assert not failed.ok and failed.reason == "error" and failed.error == "empty answer"
    assert agent.user_messages() == ["first", "second"]
    again = await agent.followup("third", require_text=True)
    assert again.ok and again.text == "two"
    check_retry(server, first_of_attempt=2, retry=3, committed=1)
    await h.close()


async def test_a_failed_flush_after_the_turn_committed_reports_it_completed(tmp_path, server):
    """The turn's end is in the log as committed when its fsync fails (EIO injected at the
    store): the caller is told it completed, so it does not retry the same text and the
    history never holds that user turn twice."""
    sid = "test:attempt:flush"
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.get_or_open(sid)
    store = h.sessions.store
    server.push(Reply(content="one"), Reply(content="two"), Reply(content="three"))
    assert (await agent.followup("first")).ok
    flush = store.flush

    async def failing_flush(session_id):
        store.flush = flush
        raise OSError(5, "Input/output error")
    store.flush = failing_flush
    outcome = await agent.followup("second")
    assert outcome.ok and outcome.text == "two"
    assert "flushing the session log failed" in outcome.error
    assert agent.session.broken is not None
    line = json.loads(_session_file(tmp_path, sid).read_text().splitlines()[-1])
    assert line["type"] == "turn_end" and line["committed"] is True
    agent2 = await h.agents.get_or_open(sid)  # the broken agent is dropped and reloaded
    assert agent2 is not agent
    assert (await agent2.followup("third")).ok
    users = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["first", "second", "third"]
    await h.close()


async def test_a_cancel_while_the_turn_end_is_written_is_too_late(tmp_path, server):
    """``agent.cancel()`` landing during the completed turn's fsync (slowed at the store) used
    to leave the caller's future pending forever; the end is written all the same and the
    caller gets the outcome the log records."""
    sid = "test:attempt:lateflush"
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.get_or_open(sid)
    store = h.sessions.store
    server.push(Reply(content="one"), Reply(content="two"), Reply(content="three"))
    assert (await agent.followup("first")).ok
    flush, flushing = store.flush, asyncio.Event()

    async def slow_flush(session_id):
        store.flush = flush
        flushing.set()
        await asyncio.sleep(0.2)
        await flush(session_id)
    store.flush = slow_flush
    pending = agent.followup("second")
    await flushing.wait()
    agent.cancel()
    outcome = await asyncio.wait_for(pending, 30)
    assert outcome.ok and outcome.text == "two" and outcome.error is None
    line = json.loads(_session_file(tmp_path, sid).read_text().splitlines()[-1])
    assert line["type"] == "turn_end" and line["committed"] is True
    assert (await agent.followup("third")).ok
    users = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["first", "second", "third"]
    await h.close()
