"""The compaction summary request continues the session's own prompt.

It used to be a conversation of its own (``SUMMARY_SYSTEM`` and a text transcript of the head),
which the provider had never seen: every token of it was paid uncached. Now it is the session's
system prompt, tools and messages up to the cut — a prefix of the request before it, read from
the prefix cache — then one instruction with tool calls forbidden. A provider that rejects it,
or an answer that is no summary, falls back to the standalone request.
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse

from dsh_harness.agents.compaction import COMPACTION_INSTRUCTION, SUMMARY_SYSTEM
from dsh_harness.sessions.events import Compaction, ToolCallStarted
from dsh_harness.sessions.history import SUMMARY_ACK
from dsh_harness.testing import ModelRequest, Reply, ScriptedModelServer, is_compaction_request
from tests.harness.agent_kit import SYSTEM, canon, make_harness

EXTRA = "[compaction]\nmax_prompt_tokens = 4000\nkeep_recent_turns = 1\n"
TURNS = 8


def _policy(summary: Reply) -> Any:
    def policy(req: ModelRequest) -> Reply:
        if is_compaction_request(req):
            return summary if req.system != SUMMARY_SYSTEM else Reply(content="FALLBACK")
        if not req.tool_results():
            return Reply(tool_calls=[("big", {"n": 2000})])
        return Reply(content=f"answer to {req.last_user_text()}")
    return policy


async def _run(tmp_path, server: ScriptedModelServer) -> list[Any]:
    h = make_harness(tmp_path, server.base_url, extra=EXTRA)
    agent = await h.agents.create("test:compact")
    for i in range(TURNS):
        assert (await agent.followup(f"question {i}")).ok
    await h.close()
    return agent.session.events


def _users(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"
            and m["content"].startswith("question ")]


async def test_the_summary_request_is_a_cached_continuation_of_the_session(tmp_path):
    with ScriptedModelServer(policy=_policy(Reply(content="SUMMARY"))) as server:
        events = await _run(tmp_path, server)
    compactions = [e for e in events if isinstance(e, Compaction)]
    asked = [i for i, s in enumerate(server.served) if is_compaction_request(s.request)]
    assert compactions and len(asked) == len(compactions)
    for c, i in zip(compactions, asked, strict=True):
        served, before = server.served[i], server.served[i - 1].request
        body = served.request
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}
        assert body["tools"] == before["tools"] and body["tool_choice"] == "none"
        assert body["messages"][-1] == {"role": "user", "content": COMPACTION_INSTRUCTION}
        head = body["messages"][:-1]
        # The same messages the session's previous request began with: a prefix-cache hit.
        assert canon(before["messages"][:len(head)]) == canon(head)
        assert served.cache_hit_tokens >= 0.8 * served.prompt_tokens, \
            (served.cache_hit_tokens, served.prompt_tokens)
        # What it asks to summarize ("every message above") is exactly the folded turns: the
        # turns through the cut (and an earlier summary), none of those kept verbatim.
        first = 1 + (compactions.index(c) and compactions[compactions.index(c) - 1].through_turn)
        assert _users(head) == [f"question {t - 1}" for t in range(first, c.through_turn + 1)]
        after = server.served[i + 1].request["messages"]
        assert after[2] == {"role": "assistant", "content": SUMMARY_ACK}
        assert _users(after)[0] == f"question {c.through_turn}"
        assert c.summary == "SUMMARY" and c.usage.cache_read == served.cache_hit_tokens


class RejectsToolChoice(ScriptedModelServer):
    """A provider that does not know ``tool_choice``: HTTP 400, as such servers answer."""

    async def _chat(self, request: Request) -> Any:
        if "tool_choice" in await request.json():
            self.rejected = getattr(self, "rejected", 0) + 1
            return JSONResponse({"error": {"message": "unknown field tool_choice"}},
                                status_code=400)
        return await super()._chat(request)


@pytest.mark.parametrize("answer", ["tool call", "no text", "rejected"])
async def test_a_summary_request_answered_without_a_summary_falls_back(tmp_path, answer):
    reply = (Reply(content="Reading it first.", tool_calls=[("big", {"n": 1})])
             if answer == "tool call" else Reply(content="  "))
    kind = RejectsToolChoice if answer == "rejected" else ScriptedModelServer
    with kind(policy=_policy(reply)) as server:
        events = await _run(tmp_path, server)
    compactions = [e for e in events if isinstance(e, Compaction)]
    assert compactions and all(c.summary == "FALLBACK" for c in compactions)
    fallbacks = [s for s in server.served
                 if s.fault is None and s.request["messages"][0]["content"] == SUMMARY_SYSTEM]
    assert len(fallbacks) == len(compactions)
    if answer == "rejected":
        assert server.rejected == len(compactions)
    else:  # both requests are paid, and the compaction's usage says so
        asked = [s for s in server.served if is_compaction_request(s.request)
                 and s.request["messages"][0]["content"] == SYSTEM]
        assert compactions[0].usage.output == asked[0].completion_tokens \
            + fallbacks[0].completion_tokens
    # The compaction request's tool call never ran: each turn ran only its own one call.
    assert len([e for e in events if isinstance(e, ToolCallStarted)]) == TURNS
