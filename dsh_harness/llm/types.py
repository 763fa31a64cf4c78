"""Provider-neutral request/response shapes and the provider interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import DshError
from ..sessions.events import ToolCall
from ..sessions.transcript import comma_run, encode

# on_retry(attempt, error text, wait seconds): lets the agent log a retry notice.
RetryCallback = Callable[[int, str, float], Awaitable[None]]


class LLMError(DshError):
    """A model request failed for good (after retries, or a non-retryable error).

    ``kind`` tells a caller what to do beyond failing the attempt: ``"auth"`` (the provider
    rejected the key, HTTP 401/403: no retry will help until the key changes) or
    ``"rate_limited"`` (it asked to wait ``retry_after_s``, longer than the provider's
    ``retry_after_max_s``); None for anything else. ``status``: the HTTP status of a
    response that refused the request for good (None when no response said so), so a caller
    can tell a request the provider rejected (a 4xx) from one it could not answer.
    """

    def __init__(self, message: str, *, kind: str | None = None,
                 retry_after_s: float | None = None, status: int | None = None):
        super().__init__(message)
        self.kind, self.retry_after_s, self.status = kind, retry_after_s, status


@dataclass(frozen=True)
class RawUsage:
    """Token counts as the provider reported them, before pricing."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hit_tokens: int = 0
    # What the provider says the request cost in USD, when it reports it (OpenRouter).
    cost_usd: float | None = None


@dataclass
class LLMRequest:
    """One model request. ``encoded_*`` are optional caches a long-lived caller (the agent)
    keeps so a request costs a join of bytes, not a serialization of the whole history: the
    compact JSON (``encode``) of the system message, of each item of ``messages`` (same order)
    and of ``tools``. Providers must treat them as equal to encoding the plain fields.
    ``encoded_runs`` holds the same encodings as ``encoded_messages`` pre-joined: each
    preceded by a comma, in runs of consecutive messages (``b"".join(encoded_runs) ==
    b"".join(b"," + e for e in encoded_messages)``), so a body is sent from buffers the caller
    keeps across requests instead of a fresh history-sized copy per request.
    ``tool_choice`` (OpenAI's, e.g. ``"none"``: answer in text, call no tool) is sent only with
    tools and only when set, so requests without it keep their bytes."""

    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    encoded_system: bytes | None = None
    encoded_messages: list[bytes] | None = None
    encoded_tools: bytes | None = None
    encoded_runs: list[bytes] | None = None
    tool_choice: str | None = None

    def wire_messages(self) -> list[dict[str, Any]]:
        return [self.system_message(), *self.messages]

    def system_message(self) -> dict[str, Any]:
        return {"role": "system", "content": self.system}

    def wire_encoded(self) -> list[bytes]:
        """The encoding of each of ``wire_messages()``, from the caches where given."""
        system = self.encoded_system or encode(self.system_message())
        messages = self.encoded_messages
        if messages is None:
            messages = [encode(m) for m in self.messages]
        return [system, *messages]

    def message_runs(self) -> list[bytes]:
        """The encodings of ``messages`` (not the system message), each preceded by a comma,
        as a few runs: ``encoded_runs`` where given, else one run joined here."""
        if self.encoded_runs is not None:
            return self.encoded_runs
        messages = self.wire_encoded()[1:]
        return [comma_run(messages)] if messages else []

    def tools_encoded(self) -> bytes:
        if self.encoded_tools is not None:
            return self.encoded_tools
        return encode(self.tools)


@dataclass
class LLMResponse:
    content: str | None
    reasoning: str | None
    tool_calls: list[ToolCall]
    usage: RawUsage
    finish_reason: str | None = None
    model: str = ""


class LLMProvider(ABC):
    name: str

    @abstractmethod
    async def complete(self, request: LLMRequest, on_retry: RetryCallback | None = None
                       ) -> LLMResponse: ...

    @abstractmethod
    async def list_models(self) -> list[str]: ...

    def configuration_problem(self) -> str | None:
        """What keeps this provider from working (e.g. a missing key), checked at start-up."""
        return None

    async def close(self) -> None:  # noqa: B027 - optional
        pass
