"""The harness LLM service: provider instances from config, model references, pricing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..config import DeploymentConfig, ModelSpec
from ..sessions.events import Usage
from .pricing import priced
from .types import LLMError, LLMProvider, RawUsage

log = logging.getLogger(__name__)

ProviderFactory = Callable[[str, Any], LLMProvider]


class LLMService:
    def __init__(self, config: DeploymentConfig, kinds: dict[str, ProviderFactory]):
        self.config = config
        self.kinds = kinds
        self._providers: dict[str, LLMProvider] = {}
        self._warned: set[str] = set()
        for name, pc in config.providers.items():
            if pc.kind not in kinds:
                raise LLMError(f"providers.{name}.kind: unknown provider kind {pc.kind!r} "
                               f"(available: {', '.join(sorted(kinds))})")

    def provider(self, name: str) -> LLMProvider:
        if name not in self.config.providers:
            raise LLMError(f"no provider named {name!r} in [providers] "
                           f"(configured: {', '.join(sorted(self.config.providers))})")
        if name not in self._providers:
            pc = self.config.providers[name]
            self._providers[name] = self.kinds[pc.kind](name, pc)
        return self._providers[name]

    def split(self, ref: str | None) -> tuple[str, str]:
        """``provider/model`` (default: the deployment's default model)."""
        ref = ref or self.config.default_model
        provider, _, model = ref.partition("/")
        if not provider or not model:
            raise LLMError(f"model reference {ref!r} must be <provider>/<model>")
        return provider, model

    def problem(self, ref: str | None) -> str | None:
        """Why requests to ``ref`` (default: the default model) would fail, or None."""
        try:
            provider, _ = self.split(ref)
            return self.provider(provider).configuration_problem()
        except LLMError as exc:
            return str(exc)

    def spec(self, provider: str, model: str) -> ModelSpec:
        config = self.config.providers[provider]
        if model in config.models:
            return config.models[model]
        if config.unlisted_model is not None:
            return config.unlisted_model
        if f"{provider}/{model}" not in self._warned:
            self._warned.add(f"{provider}/{model}")
            log.warning("no price for %s/%s in providers.%s.models; using default prices",
                        provider, model, provider)
        return ModelSpec()

    def price(self, provider: str, model: str, raw: RawUsage) -> Usage:
        return priced(raw, self.spec(provider, model))

    async def close(self) -> None:
        for p in self._providers.values():
            await p.close()
        self._providers.clear()
