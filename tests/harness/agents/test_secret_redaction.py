"""Configured secrets never enter a session: the log on disk and the model request hold
``[REDACTED_SECRET]`` instead, byte for byte the same (the replayed prefix is unchanged)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_harness import Harness, hookimpl, parse_config
from dsh_harness.agents import AgentWorld, Tool
from dsh_harness.testing import Reply, ScriptedModelServer
from tests.harness.agent_kit import canon

PROVIDER_KEY = "sk-live-9f8e7d6c5b4a"
WEB_TOKEN = 'tok"en&<web>-0123456789abcdef0123'  # quote and HTML characters: encoded forms


async def leak(args: dict[str, Any], ctx) -> str:
    # A tool result holding both secrets, one raw and one inside JSON (escaped quote).
    return f"found {PROVIDER_KEY} and " + json.dumps({"token": WEB_TOKEN})


class LeakyWorld:
    @hookimpl
    def dsh_agent_world(self, harness, session_id):
        return AgentWorld(system_prompt="test", tools=[
            Tool(name="leak", description="leaks", parameters={"type": "object"},
                 handler=leak)])


@pytest.fixture
def server():
    with ScriptedModelServer() as s:
        yield s


def make(tmp_path, base_url: str) -> Harness:
    text = (f'home = "home"\ndefault_model = "scripted/deepseek-v4-flash"\n'
            f'[providers.scripted]\nbase_url = "{base_url}"\napi_key = "{PROVIDER_KEY}"\n'
            f'[web]\nauth_token = {json.dumps(WEB_TOKEN)}\n')
    return Harness(parse_config(text, "test.toml", tmp_path), load_entry_points=False,
                   plugins=[("leaky", LeakyWorld())])


def assert_clean(text: str) -> None:
    for secret in (PROVIDER_KEY, WEB_TOKEN, json.dumps(WEB_TOKEN)[1:-1], "9f8e7d6c5b4a",
                   "0123456789abcdef0123"):
        assert secret not in text


async def test_user_text_tool_results_and_model_output_are_redacted(tmp_path, server):
    server.push(Reply(content="calling", tool_calls=[("leak", {"q": PROVIDER_KEY})]),
                Reply(content=f"the key is {PROVIDER_KEY}", reasoning=f"saw {WEB_TOKEN}"),
                Reply(content="ok"))
    h = make(tmp_path, server.base_url)
    assert set(h.secret_values()) == {PROVIDER_KEY, WEB_TOKEN}
    agent = await h.agents.create("s1", {"pr": f"body {PROVIDER_KEY}"})
    outcome = await agent.followup(f"review this PR; body: {PROVIDER_KEY} / {WEB_TOKEN}")
    assert outcome.ok and outcome.text == "the key is [REDACTED_SECRET]"
    assert (await agent.followup("again")).ok
    await h.close()

    log_text = h.sessions.store.path("s1").read_text()
    assert_clean(log_text)
    assert log_text.count("[REDACTED_SECRET]") >= 6
    bodies = [json.dumps(r, ensure_ascii=False) for r in server.requests]
    for body in bodies:
        assert_clean(body)
    second = server.requests[1]["messages"]
    assert second[1]["content"] == ("review this PR; body: [REDACTED_SECRET] / "
                                    "[REDACTED_SECRET]")
    tool_msg = next(m for m in second if m["role"] == "tool")
    assert tool_msg["content"] == 'found [REDACTED_SECRET] and {"token": "[REDACTED_SECRET]"}'

    # Redacted once at entry: the next request replays the same bytes, and a fresh process
    # loading the log sends them unchanged too.
    first_n = len(second)
    third = server.requests[2]["messages"]
    assert canon(third[:first_n]) == canon(second)
    server.push(Reply(content="after restart"))
    h2 = make(tmp_path, server.base_url)
    agent2 = await h2.agents.resume("s1")
    assert (await agent2.followup("once more")).ok
    await h2.close()
    fourth = server.requests[3]["messages"]
    assert canon(fourth[:len(third)]) == canon(third)
    assert_clean(json.dumps(server.requests[3], ensure_ascii=False))


async def test_without_secrets_events_keep_their_objects(tmp_path, server):
    server.push(Reply(content="plain"))
    text = (f'home = "home"\ndefault_model = "scripted/deepseek-v4-flash"\n'
            f'[providers.scripted]\nbase_url = "{server.base_url}"\napi_key = "short"\n')
    h = Harness(parse_config(text, "test.toml", tmp_path), load_entry_points=False,
                plugins=[("leaky", LeakyWorld())])
    assert not h.redactor  # keys under 8 characters are not redacted (ordinary words)
    agent = await h.agents.create("s2")
    assert (await agent.followup("hello short")).ok
    assert "hello short" in h.sessions.store.path("s2").read_text()
    await h.close()
