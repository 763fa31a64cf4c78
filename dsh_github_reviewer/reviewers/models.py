"""Which model an account's turns use: the first ``review.models`` candidate its provider lists
(asked once, then cached), else the deployment's default; the team falls back along the rest."""

from __future__ import annotations

import asyncio
import logging

from dsh_harness import Harness

from ..config import AccountConfig, SetupError

log = logging.getLogger(__name__)


class ModelChoice:
    def __init__(self, harness: Harness, config: AccountConfig):
        self.harness, self.config = harness, config
        self._lock = asyncio.Lock()
        self._resolved = False
        self._model: str | None = None

    @property
    def known(self) -> str | None:
        """The model once resolved in this process, else ``None`` (the default)."""
        return self._model

    async def resolve(self) -> str | None:
        async with self._lock:
            if self._resolved:
                return self._model
            candidates = self.config.review.models
            if candidates:
                offered: dict[str, list[str]] = {}
                for c in candidates:
                    if c.provider not in offered:
                        try:
                            offered[c.provider] = await self.harness.llm.provider(
                                c.provider).list_models()
                        except Exception as exc:
                            log.warning("cannot list models of provider %s: %s", c.provider, exc)
                            offered[c.provider] = []
                    if c.model in offered[c.provider]:
                        self._model = c.ref
                        break
                else:
                    refs = ", ".join(c.ref for c in candidates)
                    raise SetupError(f"none of review.models ({refs}) is offered by its "
                                     "provider")
            self._resolved = True
            return self._model

    def candidates(self) -> list[str | None]:
        """``review.models`` in order, the resolved one first; else the default model."""
        refs: list[str | None] = [c.ref for c in self.config.review.models]
        if self._model in refs:
            refs.remove(self._model)
            refs.insert(0, self._model)
        return refs or [None]
