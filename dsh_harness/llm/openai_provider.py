"""OpenAI-compatible chat completions (DeepSeek by default) through the ``openai`` SDK.

Requests go through the SDK's raw request path with a body we build from cached per-message
JSON (the SDK's ``create`` re-walks the whole history per request). Streaming with a final
usage chunk; tool-call deltas reassembled by index; DeepSeek's
``reasoning_content`` kept. Retries (exponential backoff with jitter, ``Retry-After`` honoured)
cover 429, 5xx, timeouts, connection errors and streams cut before their end. A failed attempt
returns nothing, so no partial answer can reach the session log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from ..config import ProviderConfig
from ..sessions.events import ToolCall
from ..sessions.transcript import encode
from .types import LLMError, LLMProvider, LLMRequest, LLMResponse, RawUsage, RetryCallback

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0
ERROR_BODY_LIMIT = 500


class StreamCut(Exception):
    """The stream ended before the model finished (no finish_reason)."""


def transport_text(exc: BaseException, base_url: str | None) -> str:
    """A transport failure as one line: its type, the provider's host (never a path, query
    or key) and its text, or what an empty one means (a reset reads ``ReadError()``)."""
    from urllib.parse import urlsplit

    host = urlsplit(base_url or "").netloc.rpartition("@")[2] or "the provider"
    detail = " ".join(str(exc).split()) or "no detail (the connection was closed or reset)"
    return f"{type(exc).__name__} from {host}: {detail}"


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), if any."""
    if not headers:
        return None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _extra(obj: Any, name: str) -> Any:
    extra = getattr(obj, "model_extra", None) or {}
    return extra.get(name, getattr(obj, name, None) if name in type(obj).model_fields else None)


def usage_field(usage: Any, path: str) -> Any:
    """The value at a dotted ``path`` of a usage object: the SDK's typed fields, the fields it
    does not know (``model_extra``: attribute access to an absent one raises), or dicts."""
    value = usage
    for part in path.split("."):
        if value is None:
            return None
        if isinstance(value, Mapping):
            value = value.get(part)
        elif part in getattr(type(value), "model_fields", {}):
            value = getattr(value, part)
        else:
            value = (getattr(value, "model_extra", None) or {}).get(part)
    return value


AUTO_CACHE_HIT_FIELDS = ("prompt_cache_hit_tokens", "prompt_tokens_details.cached_tokens")


def raw_usage(usage: Any, cache_hit_usage: str | None = None,
              cost_usage: str | None = None) -> RawUsage:
    """Token counts (and a reported cost) from the provider's usage, read where the provider's
    config says its cache hits and cost are (unset: DeepSeek's field, else OpenAI's)."""
    if usage is None:
        return RawUsage()
    hit = None
    for path in (cache_hit_usage,) if cache_hit_usage else AUTO_CACHE_HIT_FIELDS:
        hit = usage_field(usage, path)
        if hit is not None:
            break
    cost = usage_field(usage, cost_usage) if cost_usage else None
    return RawUsage(prompt_tokens=usage.prompt_tokens or 0,
                    completion_tokens=usage.completion_tokens or 0,
                    cache_hit_tokens=int(hit or 0),
                    cost_usd=float(cost) if isinstance(cost, int | float) else None)


def chat_chunks(request: LLMRequest) -> list[bytes]:
    """The streaming chat-completions body in pieces, byte for byte (joined) what
    ``chat.completions.create`` sent for the same request (same keys, same order, compact
    JSON): the small ends built here around the request's cached message runs, which are sent
    as they are (a history-sized body is never copied into a fresh buffer per request)."""
    system = request.encoded_system or encode(request.system_message())
    head = b'{"model":' + encode(request.model) + b',"stream":true,"messages":[' + system
    tail = b'],"stream_options":{"include_usage":true}'
    if request.tools:
        tail += b',"tools":' + request.tools_encoded()
        if request.tool_choice is not None:
            tail += b',"tool_choice":' + encode(request.tool_choice)
    return [head, *request.message_runs(), tail + b"}"]


class _Body:
    """A request body sent chunk by chunk (httpx iterates it; the Content-Length header is
    set by the caller, so no chunked transfer encoding). Iterable again for a resend."""

    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks
        self.length = sum(map(len, chunks))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


class OpenAICompatibleProvider(LLMProvider):
    def __init__(self, name: str, config: ProviderConfig, env: Mapping[str, str] | None = None):
        self.name, self.config = name, config
        self._env = os.environ if env is None else env
        self._client: openai.AsyncOpenAI | None = None

    def _key(self) -> str:
        if self.config.api_key is not None:
            return self.config.api_key.get_secret_value()
        var = self.config.api_key_env
        if var and self._env.get(var):
            return self._env[var]
        if not self.config.api_key_required:
            return "none"  # a local server takes any key; the SDK insists on one
        hint = (f"set {var} in the environment" if var
                else f"set providers.{self.name}.api_key_env to the variable holding it")
        raise LLMError(f"provider {self.name!r} has no API key: {hint} "
                       f"(or providers.{self.name}.api_key in dsh.toml)")

    def configuration_problem(self) -> str | None:
        try:
            self._key()
        except LLMError as exc:
            return str(exc)
        return None

    @property
    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = openai.AsyncOpenAI(api_key=self._key(), base_url=self.config.url,
                                              timeout=self.config.timeout_s, max_retries=0)
        return self._client

    async def list_models(self) -> list[str]:
        page = await self.client.models.list()
        return [m.id async for m in page]

    async def complete(self, request: LLMRequest, on_retry: RetryCallback | None = None
                       ) -> LLMResponse:
        attempt = 0
        while True:
            try:
                return await self._attempt(request)
            except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                    openai.APIConnectionError, StreamCut) as exc:
                if attempt >= self.config.max_retries:
                    raise LLMError(f"provider {self.name!r}: {self._describe(exc)} "
                                   f"(gave up after {attempt + 1} attempts)") from None
                headers = getattr(getattr(exc, "response", None), "headers", None)
                wait = retry_after_s(headers)
                if wait is None:
                    wait = min(MAX_BACKOFF_S, self.config.retry_base_s * 2 ** attempt)
                    wait *= random.uniform(0.5, 1.0)
                elif wait > self.config.retry_after_max_s:
                    # A server asking for an hour must not park a turn that has a deadline,
                    # and retrying sooner than asked only meets the same limit: the attempt
                    # fails now and the caller's own backoff takes over.
                    raise LLMError(
                        f"provider {self.name!r}: {self._describe(exc)}; it asks to wait "
                        f"{wait:.0f} s, more than providers.{self.name}.retry_after_max_s "
                        f"({self.config.retry_after_max_s:.0f} s)",
                        kind="rate_limited", retry_after_s=wait) from None
                attempt += 1
                log.warning("provider %s: %s; retry %d in %.1fs", self.name,
                            self._describe(exc), attempt, wait)
                if on_retry is not None:
                    await on_retry(attempt, self._describe(exc), wait)
                await asyncio.sleep(wait)
            except openai.APIStatusError as exc:
                kind = "auth" if exc.status_code in (401, 403) else None
                raise LLMError(f"provider {self.name!r}: {self._describe(exc)}",
                               kind=kind, status=exc.status_code) from None

    def _describe(self, exc: Exception) -> str:
        if isinstance(exc, openai.APIStatusError):
            body = (exc.response.text if exc.response is not None else "")[:ERROR_BODY_LIMIT]
            return f"HTTP {exc.status_code}: {body}"
        if isinstance(exc, StreamCut):
            return f"stream cut: {exc}"
        return transport_text(exc, self.config.base_url)

    async def _attempt(self, request: LLMRequest) -> LLMResponse:
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage = None
        model = request.model
        try:
            # The SDK's raw request path: transport, headers and typed chunks from the SDK,
            # the body from us (``create`` would walk the whole history on every request).
            body = _Body(chat_chunks(request))
            stream = await self.client.post(
                "/chat/completions", cast_to=ChatCompletion, content=body,
                options={"headers": {"Content-Length": str(body.length)}},
                stream=True, stream_cls=openai.AsyncStream[ChatCompletionChunk])
            async for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta.content:
                        content.append(delta.content)
                    piece = _extra(delta, "reasoning_content")
                    if piece:
                        reasoning.append(piece)
                    for tc in delta.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "args": []})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function and tc.function.name:
                            slot["name"] += tc.function.name
                        if tc.function and tc.function.arguments:
                            slot["args"].append(tc.function.arguments)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except openai.APIError:
            raise
        except Exception as exc:  # transport errors while reading the stream
            if type(exc).__module__.split(".")[0] in {"httpx", "httpx2", "httpcore", "h11"}:
                raise StreamCut(transport_text(exc, self.config.base_url)) from None
            raise
        if finish is None:
            raise StreamCut("the stream ended without a finish_reason")
        tool_calls = [ToolCall(id=slot["id"] or f"call_{i}", name=slot["name"],
                               arguments="".join(slot["args"]))
                      for i, slot in sorted(calls.items())]
        return LLMResponse(content="".join(content) if content else None,
                           reasoning="".join(reasoning) if reasoning else None,
                           tool_calls=tool_calls,
                           usage=raw_usage(usage, self.config.cache_hit_usage,
                                           self.config.cost_usage), finish_reason=finish,
                           model=model)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
