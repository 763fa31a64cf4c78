"""Scenarios whose raw request bytes were recorded on main before the O(new) request path.

``python -m tests.harness.replay_kit OUT_DIR`` wrote ``tests/harness/fixtures/replay`` with the
code of main at b99c1b0 (the SDK's ``chat.completions.create`` path). Do not regenerate it with
newer code: the fixture is the "before" side of the byte-stability test.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from starlette.requests import Request

from dsh_harness.sessions.transcript import encode
from dsh_harness.testing import (
    Fault,
    ModelRequest,
    Reply,
    ScriptedModelServer,
    is_compaction_request,
)

from .agent_kit import make_harness

FIXTURE = Path(__file__).parent / "fixtures" / "replay"
OLD_LOG_ID = "test:old:log"
COMPACTION = '[compaction]\nmax_prompt_tokens = 420\nkeep_recent_turns = 1\n'


class RawServer(ScriptedModelServer):
    """The scripted model, also keeping each request body exactly as it arrived and how it
    was framed (its Content-Length and Transfer-Encoding headers)."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.raw: list[bytes] = []
        self.framing: list[tuple[str | None, str | None]] = []

    async def _chat(self, request: Request) -> Any:
        self.raw.append(await request.body())
        self.framing.append((request.headers.get("content-length"),
                             request.headers.get("transfer-encoding")))
        return await super()._chat(request)


def policy(req: ModelRequest) -> Reply:
    """Deterministic replies: tools on ``tools:`` turns, reasoning, unicode, summaries."""
    if is_compaction_request(req):
        return Reply(content=f"summary #{req.number}: the user asked for echoes ✓")
    text = req.last_user_text()
    results = req.tool_results()
    if text.startswith("slow") and not results:
        return Reply(tool_calls=[("slow", {"seconds": 30})])
    if text.startswith("tools") and len(results) < 2:
        return Reply(content=f"step {len(results)} — «calling»",
                     tool_calls=[("echo", {"text": f"é{len(results)}"})],
                     reasoning=f"need echo {len(results)}")
    return Reply(content=f"answer to {text!r}: 完成 \"quoted\" \\ back\nslash",
                 reasoning="done thinking")


TURNS = ["tools one", "plain two ünïcode", "tools three", "plain four", "tools five"]


async def same_history(tmp: Path, server: RawServer, replay: str) -> None:
    """Five successful turns, compaction included, one restart in the middle."""
    extra = f'reasoning_replay = "{replay}"\n' + COMPACTION
    h = make_harness(tmp, server.base_url, extra)
    agent = await h.agents.create(f"test:same:{replay}")
    for text in TURNS[:3]:
        assert (await agent.followup(text)).ok
    await h.close()
    h = make_harness(tmp, server.base_url, extra)
    agent = await h.agents.resume(f"test:same:{replay}")
    for text in TURNS[3:]:
        assert (await agent.followup(text)).ok
    await h.close()


async def old_log(tmp: Path, server: RawServer) -> None:
    """A log written by main: a completed turn, a deadline turn, an error turn, one more."""
    h = make_harness(tmp, server.base_url, tool_timeout_s=60)
    agent = await h.agents.create(OLD_LOG_ID)
    assert (await agent.followup("tools first")).ok
    loop = asyncio.get_running_loop()
    out = await agent.followup("slow second", deadline=loop.time() + 0.5)
    assert out.reason == "deadline"
    server.inject(*[Fault.server_error()] * 4)
    assert (await agent.followup("plain third")).reason == "error"
    assert (await agent.followup("plain fourth")).ok
    await h.close()


async def resume_old_log(tmp: Path, server: RawServer) -> None:
    h = make_harness(tmp, server.base_url)
    agent = await h.agents.resume(OLD_LOG_ID)
    assert (await agent.followup("tools after resume")).ok
    await h.close()


def write_raw(path: Path, raw: list[bytes]) -> None:
    assert all(b"\n" not in r for r in raw)
    path.write_bytes(b"".join(r + b"\n" for r in raw))


def read_raw(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def assert_same_requests(got: list[bytes], want: list[bytes]) -> None:
    """``got`` sends the recorded requests byte for byte — except the compaction summary
    requests: recorded as a conversation of their own (``SUMMARY_SYSTEM``), they now continue
    the session. Each of those must repeat, byte for byte, a prefix of the session's request
    before it (the provider's prefix cache hits) up to the compaction instruction. Their
    answers are the same (the policy numbers them), so every later request is unchanged."""
    assert len(got) == len(want)
    for number, (g, w) in enumerate(zip(got, want, strict=True), start=1):
        if not is_compaction_request(json.loads(w)):
            assert g == w, f"request {number} differs"
            continue
        body = json.loads(g)
        assert is_compaction_request(body), f"request {number} is not a compaction request"
        assert body["tool_choice"] == "none"
        head = g[:g.rindex(b',' + encode(body["messages"][-1]) + b']')]
        assert got[number - 2].startswith(head), \
            f"compaction request {number} is no prefix of request {number - 1}"


async def generate(out: Path, tmp: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - a one-off generator
    for replay in ("all", "current_turn"):
        with RawServer(policy=policy) as server:
            await same_history(tmp / replay, server, replay)
            write_raw(out / f"same_history_{replay}.jsonl", server.raw)
    with RawServer(policy=policy) as server:
        await old_log(tmp / "old", server)
        sessions = tmp / "old" / "home" / "sessions"
        (log_file,) = sessions.iterdir()
        shutil.copy(log_file, out / "old_log.session.jsonl")
    with RawServer(policy=policy) as server:  # a fresh server, as in the test
        await resume_old_log(tmp / "old", server)
        write_raw(out / "old_log_resumed.jsonl", server.raw)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        asyncio.run(generate(Path(sys.argv[1]), Path(d)))
