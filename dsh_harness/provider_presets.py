"""Built-in model providers: the common OpenAI-compatible endpoints, ready without a table.

Each preset is the raw ``[providers.<name>]`` block it stands for. A deployment gets every
preset whether or not it defines providers of its own; a block named like a preset (or with
``preset = "<name>"``) starts from the preset and overrides only the keys it sets (``models``
entries are merged, model by model). Prices are USD per 1M tokens as each provider publishes
them (``docs/config.en.md`` dates them); a deployment overrides a model's price under
``providers.<name>.models.<model>`` when they change.

Where each provider reports prompt-cache hits differs, and that decides the cost:

* DeepSeek: ``usage.prompt_cache_hit_tokens`` (and ``prompt_cache_miss_tokens``).
* OpenAI, vLLM (``--enable-prompt-tokens-details``): ``usage.prompt_tokens_details.cached_tokens``.
* OpenRouter: the OpenAI field, plus ``usage.cost``, the billed amount in USD (credits), which is
  taken as the cost when present: its prices depend on the routed upstream.
* Ollama: no cache field (every prompt token is uncached); local servers cost nothing.
"""

from __future__ import annotations

from typing import Any

OPENAI_CACHED = "prompt_tokens_details.cached_tokens"
FREE = {"input": 0.0, "cache_read": 0.0, "output": 0.0}


def _m(window: int, input: float, cache_read: float, output: float) -> dict[str, Any]:
    return {"context_window": window, "input": input, "cache_read": cache_read, "output": output}


PRESETS: dict[str, dict[str, Any]] = {
    "deepseek": {
        "base_url": "https://api.deepseek.com",
        "api_key_env": "DEEPSEEK_API_KEY",
        "cache_hit_usage": "prompt_cache_hit_tokens",
        "models": {
            "deepseek-v4-flash": _m(1_000_000, 0.14, 0.0028, 0.28),
            "deepseek-v4-pro": _m(1_000_000, 0.28, 0.028, 0.42),
            "deepseek-chat": _m(128_000, 0.28, 0.028, 0.42),
            "deepseek-reasoner": _m(128_000, 0.28, 0.028, 0.42),
        },
    },
    "openai": {
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
        "cache_hit_usage": OPENAI_CACHED,
        "models": {
            "gpt-5.5": _m(1_000_000, 5.00, 0.50, 30.00),
            "gpt-5.4": _m(1_000_000, 2.50, 0.25, 15.00),
            "gpt-5.4-mini": _m(1_000_000, 0.75, 0.075, 4.50),
            "gpt-5.4-nano": _m(1_000_000, 0.20, 0.02, 1.25),
            "gpt-5": _m(400_000, 1.25, 0.125, 10.00),
            "gpt-5-mini": _m(400_000, 0.25, 0.025, 2.00),
            "gpt-4.1": _m(1_047_576, 2.00, 0.50, 8.00),
            "gpt-4.1-mini": _m(1_047_576, 0.40, 0.10, 1.60),
        },
    },
    "openrouter": {
        "base_url": "https://openrouter.ai/api/v1",
        "api_key_env": "OPENROUTER_API_KEY",
        "cache_hit_usage": OPENAI_CACHED,
        "cost_usage": "cost",
    },
    "ollama": {
        "base_url": "http://127.0.0.1:11434/v1",
        "api_key_required": False,
        "unlisted_model": {"context_window": 32_768, **FREE},
    },
    "vllm": {
        "base_url": "http://127.0.0.1:8000/v1",
        # Only when the server was started with --api-key; otherwise none is needed.
        "api_key_env": "VLLM_API_KEY",
        "api_key_required": False,
        "cache_hit_usage": OPENAI_CACHED,
        "unlisted_model": {"context_window": 32_768, **FREE},
    },
}


def with_preset(name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` (a provider block as written) on top of its preset's block."""
    preset = raw.get("preset", name if name in PRESETS else None)
    if preset is None or preset not in PRESETS:
        return raw  # no preset, or an unknown one (the model reports it)
    base = PRESETS[preset]
    merged = {**base, **raw, "preset": preset}
    if isinstance(raw.get("models"), dict):
        models = dict(base.get("models", {}))
        for model, spec in raw["models"].items():
            # A partly given price overrides only what it names (the rest stays published).
            known = models.get(model)
            models[model] = ({**known, **spec} if isinstance(known, dict)
                             and isinstance(spec, dict) else spec)
        merged["models"] = models
    return merged
