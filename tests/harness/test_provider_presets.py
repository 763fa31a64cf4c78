"""Built-in provider presets (DeepSeek, OpenAI, OpenRouter, Ollama, vLLM).

Defining a provider never removes the built-in ones; a block named like a preset overrides only
what it sets; and each preset's cost is exact against the scripted model server answering with
that provider's usage shape (where its cache hits, and OpenRouter's billed cost, are reported).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_harness import ConfigError, Harness, parse_config
from dsh_harness.provider_presets import PRESETS
from dsh_harness.testing.model_server import Reply, ScriptedModelServer
from tests.harness.agent_kit import WorldsPlugin

HERE = Path(".")


def providers(text: str) -> dict:
    return parse_config(text, "t.toml", HERE, env={}).config.providers


def test_defining_a_provider_keeps_every_built_in_one():
    defined = providers('[providers.mine]\nbase_url = "https://llm.example.com/v1"\n')
    assert set(defined) == {"mine", *PRESETS}
    assert defined["deepseek"].url == "https://api.deepseek.com"
    assert defined["deepseek"].api_key_env == "DEEPSEEK_API_KEY"
    assert defined["openai"].url == "https://api.openai.com/v1"
    assert defined["openai"].api_key_env == "OPENAI_API_KEY"
    # Another provider never reads a built-in one's key, nor its prices.
    assert defined["mine"].api_key_env is None and defined["mine"].models == {}


def test_a_block_named_like_a_preset_overrides_only_what_it_sets():
    defined = providers('[providers.openai]\ntimeout_s = 12\n'
                        '[providers.openai.models."gpt-4.1"]\ninput = 1.5\n'
                        '[providers.openai.models.my-finetune]\ninput = 3\ncache_read = 1\n'
                        'output = 9\n')
    openai = defined["openai"]
    assert (openai.url, openai.timeout_s, openai.cache_hit_usage) == (
        "https://api.openai.com/v1", 12, "prompt_tokens_details.cached_tokens")
    assert openai.models["gpt-4.1"].model_dump() == {
        "context_window": 1_047_576, "input": 1.5, "cache_read": 0.5, "output": 8.0}
    assert openai.models["gpt-4.1-mini"].input == 0.40
    assert openai.models["my-finetune"].output == 9


def test_a_preset_under_another_name_and_the_errors():
    defined = providers('[providers.work]\npreset = "openrouter"\napi_key_env = "WORK_OR_KEY"\n')
    assert defined["work"].url == "https://openrouter.ai/api/v1"
    assert (defined["work"].api_key_env, defined["work"].cost_usage) == ("WORK_OR_KEY", "cost")
    with pytest.raises(ConfigError, match=r"providers.x.preset: unknown preset 'nope'"):
        providers('[providers.x]\npreset = "nope"\n')
    with pytest.raises(ConfigError, match=r"providers.x: base_url is required for a provider "
                                          r"that is no preset"):
        providers('[providers.x]\napi_key_env = "X_KEY"\n')
    with pytest.raises(ConfigError, match=r"providers.x.cache_hit_usage: must be a dotted"):
        providers('[providers.x]\nbase_url = "http://h"\ncache_hit_usage = "a..b"\n')


def test_default_model_on_a_built_in_provider_needs_no_providers_block(monkeypatch):
    loaded = parse_config('default_model = "openai/gpt-4.1-mini"\n'
                          '[providers.mine]\nbase_url = "https://llm.example.com/v1"\n',
                          "t.toml", HERE, env={})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "o" * 40)
    h = Harness(loaded, load_entry_points=False)
    assert h.problems() == [] and h.llm.problem(None) is None
    assert h.llm.spec("openai", "gpt-4.1-mini").input == 0.40
    monkeypatch.delenv("OPENAI_API_KEY")
    h = Harness(loaded, load_entry_points=False)
    assert "provider 'openai' has no API key: set OPENAI_API_KEY" in h.llm.problem(None)


def _openrouter_bill(prompt: int, hit: int, completion: int) -> float:
    # What the upstream charged: deliberately not any table's price.
    return round(((prompt - hit) * 0.91 + hit * 0.09 + completion * 3.3) / 1e6, 10)


# (preset, model, usage shape, per-request expected cost or None = from the preset's table)
CASES = [
    ("deepseek", "deepseek-v4-pro", "deepseek"),
    ("openai", "gpt-4.1", "openai"),
    ("openrouter", "deepseek/deepseek-chat-v3.1", "openrouter"),
    ("ollama", "qwen3:8b", "ollama"),
    ("vllm", "Qwen/Qwen3-8B", "vllm"),
]


@pytest.mark.parametrize(("preset", "model", "shape"), CASES, ids=[c[0] for c in CASES])
async def test_each_preset_prices_its_usage_shape_exactly(tmp_path, preset, model, shape):
    billed = _openrouter_bill if preset == "openrouter" else None
    with ScriptedModelServer(usage_shape=shape, billed=billed) as server:
        key = "" if preset in ("ollama", "vllm") else 'api_key = "test-key"\n'
        text = (f'home = "home"\ndefault_model = "{preset}/{model}"\n'
                f'[providers.{preset}]\nbase_url = "{server.base_url}"\n{key}')
        loaded = parse_config(text, "t.toml", tmp_path, env={})
        h = Harness(loaded, load_entry_points=False, env={},
                    plugins=[("worlds", WorldsPlugin())])
        try:
            assert h.problems() == [] and h.llm.problem(None) is None  # local: no key needed
            server.push(Reply(content="first answer " * 20), Reply(content="second " * 30))
            agent = await h.agents.create("test:preset")
            assert (await agent.followup("review this " * 50)).ok
            assert (await agent.followup("and again")).ok
            (summary,) = await h.sessions.summaries()
        finally:
            await h.close()
    served = [s for s in server.served if s.fault is None]
    assert len(served) == 2 and {s.request["model"] for s in served} == {model}
    reported_hits = 0 if shape == "ollama" else sum(s.cache_hit_tokens for s in served)
    assert served[1].cache_hit_tokens > 0   # the second request reused the first's prefix
    usage = summary.usage
    assert usage.cache_read == reported_hits
    assert usage.uncached_input == sum(s.prompt_tokens for s in served) - reported_hits
    assert usage.output == sum(s.completion_tokens for s in served)
    if billed is not None:
        expected = sum(billed(s.prompt_tokens, s.cache_hit_tokens, s.completion_tokens)
                       for s in served)
    else:
        spec = PRESETS[preset].get("models", {}).get(model) or PRESETS[preset]["unlisted_model"]
        expected = sum(((s.prompt_tokens - hit) * spec["input"] + hit * spec["cache_read"]
                        + s.completion_tokens * spec["output"]) / 1e6
                       for s in served
                       for hit in [0 if shape == "ollama" else s.cache_hit_tokens])
    assert usage.cost_usd == pytest.approx(expected, rel=1e-9, abs=1e-12)
    if preset in ("ollama", "vllm"):
        assert usage.cost_usd == 0
    else:
        assert usage.cost_usd > 0
