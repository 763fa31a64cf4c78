"""Session persistence: crash mid-turn, torn lines, read-only listing, CLI, cache economics."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_harness.sessions.events import ToolResult, TurnEnd
from dsh_harness.sessions.jsonl_store import file_name, session_id_of
from dsh_harness.testing import Reply, ScriptedModelServer
from tests.harness.agent_kit import canon, make_harness

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def server():
    with ScriptedModelServer() as s:
        yield s


def test_file_names_are_safe_and_reversible():
    sid = "github:acct:o:r:pr:7"
    name = file_name(sid)
    assert "/" not in name and ":" not in name
    assert session_id_of(name) == sid
    for weird in ["a/b/../c", "ünï:cødé", "x y%z"]:
        assert session_id_of(file_name(weird)) == weird
    with pytest.raises(Exception, match="cannot be stored"):
        file_name("../escape")


def _kill_when(proc: subprocess.Popen, ready) -> None:
    deadline = time.monotonic() + 30
    while not ready():
        assert proc.poll() is None, "child exited early"
        assert time.monotonic() < deadline, "child never reached the crash point"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def _session_file(tmp_path: Path, sid: str) -> Path:
    return tmp_path / "home" / "sessions" / file_name(sid)


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["tool_call", "streaming"])
def test_sigkill_mid_turn_then_resume(tmp_path, server, moment):
    sid = f"test:crash:{moment}"
    if moment == "tool_call":
        server.push(Reply(content="working", tool_calls=[("slow", {"seconds": 60})]))
    else:
        server.push(Reply(content="a slowly streamed answer " * 20, chunk_delay_s=0.05))
    server.push(Reply(content="recovered"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.harness.agent_child", str(tmp_path),
                             server.base_url, sid, "go"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True)
    path = _session_file(tmp_path, sid)
    if moment == "tool_call":
        _kill_when(proc, lambda: path.exists() and '"type":"tool_call"' in path.read_text())
    else:
        _kill_when(proc, lambda: len(server.served) >= 1 and (time.sleep(0.3) or True))

    async def resume_and_continue():
        h = make_harness(tmp_path, server.base_url)
        log = await h.sessions.read(sid)  # loads as-is, read-only
        assert not any(isinstance(e, TurnEnd) for e in log.events)
        agent = await h.agents.resume(sid)
        ends = [e for e in agent.session.events if isinstance(e, TurnEnd)]
        assert [(e.reason, e.committed) for e in ends] == [("interrupted", False)]
        assert not any(isinstance(e, ToolResult) for e in agent.session.events)
        outcome = await agent.followup("go")  # the retry of the killed attempt
        await h.close()
        return outcome

    outcome = asyncio.run(resume_and_continue())
    assert outcome.ok and outcome.text == "recovered"
    before, after = server.requests[0], server.requests[1]
    assert canon(after["messages"]) == canon(before["messages"])


async def test_torn_final_line_is_dropped_and_repaired_only_on_resume(tmp_path, server, caplog):
    server.push(Reply(content="one"), Reply(content="two"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:torn")
    await agent.followup("first")
    await h.close()
    path = _session_file(tmp_path, "test:torn")
    intact = path.read_bytes()
    path.write_bytes(intact + b'{"seq": 99, "type": "user_mes')
    h2 = make_harness(tmp_path, server.base_url)
    log = await h2.sessions.read("test:torn")
    assert log.dropped_tail > 0 and "torn final line" in log.notes[0]
    assert path.read_bytes().endswith(b'"user_mes'), "reading must not modify the file"
    assert "torn" not in caplog.text, "a read-only look repairs nothing, so warns of nothing"
    agent = await h2.agents.resume("test:torn")
    assert path.read_bytes().startswith(intact)
    # What the cut-off line held is lost: the repair is a warning, once.
    (warning,) = [r for r in caplog.records if "torn final line" in r.getMessage()]
    assert warning.levelname == "WARNING" and "test:torn" in warning.getMessage()
    assert (await agent.followup("second")).text == "two"
    await h2.close()
    h3 = make_harness(tmp_path, server.base_url)
    assert (await h3.sessions.read("test:torn")).dropped_tail == 0
    await h3.close()


async def test_corruption_in_the_middle_is_reported_not_skipped(tmp_path, server):
    server.push(Reply(content="one"))
    h = make_harness(tmp_path, server.base_url)
    agent = await h.agents.create("test:corrupt")
    await agent.followup("first")
    await h.close()
    path = _session_file(tmp_path, "test:corrupt")
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"garbage"
    path.write_bytes(b"\n".join(lines))
    h2 = make_harness(tmp_path, server.base_url)
    with pytest.raises(Exception, match="line 3 is corrupted"):
        await h2.sessions.read("test:corrupt")
    await h2.close()


def test_cli_sessions_list_with_no_sessions_says_so_on_stderr(tmp_path, capsys, monkeypatch):
    """An empty list reads like a wrong home or a hang: say so, keeping stdout empty for scripts."""
    from dsh_harness import cli

    monkeypatch.setattr(cli, "Harness", lambda loaded: make_harness(tmp_path, "http://127.0.0.1:9"))
    assert cli.main(["sessions", "list"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "no sessions in" in err


def test_cli_sessions_list_and_show(tmp_path, server, capsys, monkeypatch):
    from dsh_harness import cli

    server.push(Reply(content="hello back"))

    async def seed():
        h = make_harness(tmp_path, server.base_url)
        agent = await h.agents.create("test:cli")
        await agent.followup("hello")
        await h.close()
    asyncio.run(seed())
    monkeypatch.setattr(cli, "Harness", lambda loaded: make_harness(tmp_path, server.base_url))
    assert cli.main(["sessions", "list", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["id"] == "test:cli" and row["turns"] == 1 and row["title"] == "hello"
    assert row["usage"]["output"] > 0
    assert cli.main(["sessions", "show", "test:cli"]) == 0
    out = capsys.readouterr().out
    assert "assistant_message" in out and "hello back" in out
