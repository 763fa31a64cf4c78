"""A scripted OpenAI-compatible model server on a real loopback HTTP port.

For plugin authors' tests: replies come from a script (a list of ``Reply``) or a policy function
that looks at the request, so a scripted agent can read tool results and decide. Faults can be
injected (429 with Retry-After, 500, a stream cut mid-answer). Cache hits come from a
``PrefixCache``; ``usage_shape`` picks how the usage reports them, the way each provider does
(``USAGE_SHAPES``; the default reports every field at once). Every request body is recorded.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from ..agents.compaction import COMPACTION_INSTRUCTION, SUMMARY_SYSTEM
from .prefix_cache import PrefixCache, estimate_tokens, render_prompt
from .threaded_server import ThreadedServer

# Where each provider's usage puts cache hits (and, for OpenRouter, the billed cost).
USAGE_SHAPES = ("all", "deepseek", "openai", "openrouter", "ollama", "vllm")


def usage_body(shape: str, total: int, hit: int, completion: int,
               cost_usd: float | None = None) -> dict[str, Any]:
    """The ``usage`` object a provider of ``shape`` returns for these token counts."""
    usage: dict[str, Any] = {"prompt_tokens": total, "completion_tokens": completion,
                             "total_tokens": total + completion}
    if shape in ("all", "deepseek"):
        usage |= {"prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": total - hit}
    if shape in ("all", "openai", "openrouter", "vllm"):
        usage["prompt_tokens_details"] = {"cached_tokens": hit}
    if shape == "openrouter":
        usage["prompt_tokens_details"]["cache_write_tokens"] = 0
        usage["cost"] = cost_usd if cost_usd is not None else 0.0
        usage["cost_details"] = {"upstream_inference_cost": None}
    if shape not in USAGE_SHAPES:
        raise ValueError(f"unknown usage shape {shape!r} (known: {', '.join(USAGE_SHAPES)})")
    return usage


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    reasoning: str | None = None
    # Pause between streamed chunks (to test what happens mid-stream).
    chunk_delay_s: float = 0.0


@dataclass
class Fault:
    kind: str  # "rate_limit" | "server_error" | "stream_cut" | "auth"
    retry_after: float | None = None

    @classmethod
    def rate_limit(cls, retry_after: float = 0.05) -> Fault:
        return cls("rate_limit", retry_after)

    @classmethod
    def server_error(cls) -> Fault:
        return cls("server_error")

    @classmethod
    def stream_cut(cls) -> Fault:
        return cls("stream_cut")

    @classmethod
    def auth(cls) -> Fault:
        """The key is rejected: HTTP 401 with a body quoting part of it, as providers do."""
        return cls("auth")


@dataclass
class ModelRequest:
    """What a policy sees: the request body with a few helpers."""

    body: dict[str, Any]
    number: int

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools") or []]

    @property
    def system(self) -> str:
        first = self.messages[0] if self.messages else {}
        return first.get("content", "") if first.get("role") == "system" else ""

    @property
    def last(self) -> dict[str, Any]:
        return self.messages[-1] if self.messages else {}

    def since_last_user(self) -> list[dict[str, Any]]:
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i]["role"] == "user":
                return self.messages[i:]
        return []

    def last_user_text(self) -> str:
        turn = self.since_last_user()
        return turn[0]["content"] if turn else ""

    def tool_results(self) -> list[str]:
        return [m["content"] for m in self.since_last_user() if m["role"] == "tool"]


def is_compaction_request(req: ModelRequest | Mapping[str, Any]) -> bool:
    """Whether a request (a ``ModelRequest`` or a recorded body) asks for a compaction summary
    rather than the next step of a turn: the agent's continuation of the session (its last
    message is ``COMPACTION_INSTRUCTION``; it carries the session's system prompt, tools and
    messages, so a policy that looks only at those would answer it with a tool call) or its
    standalone fallback (``SUMMARY_SYSTEM``). A policy answers it with the summary text."""
    body = req.body if isinstance(req, ModelRequest) else req
    messages = body.get("messages") or []
    if not messages:
        return False
    first, last = messages[0], messages[-1]
    if first.get("role") == "system" and first.get("content") == SUMMARY_SYSTEM:
        return True
    return last.get("role") == "user" and last.get("content") == COMPACTION_INSTRUCTION


Policy = Callable[[ModelRequest], Reply]


@dataclass
class Served:
    request: dict[str, Any]
    prompt_tokens: int
    cache_hit_tokens: int
    completion_tokens: int
    fault: str | None = None


class ScriptedModelServer:
    def __init__(self, policy: Policy | None = None, script: list[Reply] | None = None,
                 models: tuple[str, ...] = ("deepseek-v4-flash", "deepseek-v4-pro"),
                 host: str = "127.0.0.1", port: int = 0, chunk_chars: int = 24,
                 usage_shape: str = "all",
                 billed: Callable[[int, int, int], float] | None = None):
        """``billed(prompt, cache_hit, completion)``: the USD cost an OpenRouter-shaped usage
        reports (what the provider billed)."""
        usage_body(usage_shape, 0, 0, 0)  # an unknown shape fails here, not mid-test
        self.usage_shape, self.billed = usage_shape, billed
        self.policy, self.script = policy, list(script or [])
        self.models, self.host, self.port = models, host, port
        self.chunk_chars = chunk_chars
        self.cache = PrefixCache()
        self.faults: list[Fault] = []
        self.served: list[Served] = []
        self._lock = threading.Lock()
        self._http = ThreadedServer(host, port, "scripted-model-server")

    # -- scenario API ---------------------------------------------------------------------

    def inject(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [s.request for s in self.served if s.fault is None]

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> ScriptedModelServer:
        self.port = self._http.serve(self.app())
        return self

    def stop(self) -> None:
        self._http.stop()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP -------------------------------------------------------------------------------

    def app(self) -> Starlette:
        routes = []
        for prefix in ("/v1", ""):
            routes += [Route(f"{prefix}/chat/completions", self._chat, methods=["POST"]),
                       Route(f"{prefix}/models", self._models, methods=["GET"])]
        return Starlette(routes=routes)

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": m, "object": "model", "owned_by": "scripted"} for m in self.models]})

    def _next_reply(self, req: ModelRequest) -> Reply:
        if self.policy is not None:
            return self.policy(req)
        with self._lock:
            if not self.script:
                raise LookupError("the scripted model has no reply left")
            return self.script.pop(0)

    async def _chat(self, request: Request) -> Any:
        body = await request.json()
        with self._lock:
            fault = self.faults.pop(0) if self.faults else None
            number = len(self.served) + 1
        if fault and fault.kind in ("rate_limit", "server_error", "auth"):
            self.served.append(Served(body, 0, 0, 0, fault.kind))
            if fault.kind == "auth":
                key = request.headers.get("authorization", "").removeprefix("Bearer ")
                return JSONResponse({"error": {
                    "message": f"Incorrect API key provided: {key[:3]}****{key[-4:]}",
                    "type": "authentication_error"}}, status_code=401)
            if fault.kind == "rate_limit":
                return JSONResponse({"error": {"message": "rate limited (scripted)"}},
                                    status_code=429,
                                    headers={"retry-after": str(fault.retry_after)})
            return JSONResponse({"error": {"message": "server error (scripted)"}},
                                status_code=500)
        req = ModelRequest(body, number)
        try:
            reply = await asyncio.to_thread(self._next_reply, req)
        except LookupError as exc:
            return JSONResponse({"error": {"message": str(exc)}}, status_code=500)
        prompt = render_prompt(body.get("messages", []), body.get("tools"))
        with self._lock:
            total, hit = self.cache.account(prompt)
        calls = [(name, args if isinstance(args, str) else json.dumps(args))
                 for name, args in reply.tool_calls]
        out_text = (reply.content or "") + (reply.reasoning or "") + "".join(
            n + a for n, a in calls)
        completion = max(1, estimate_tokens(out_text))
        self.served.append(Served(body, total, hit, completion,
                                  "stream_cut" if fault else None))
        usage = usage_body(self.usage_shape, total, hit, completion,
                           self.billed(total, hit, completion) if self.billed else None)
        model = body.get("model", "scripted")
        ids = [f"call_{number}_{i}" for i in range(len(calls))]
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.content}
            if reply.reasoning is not None:
                message["reasoning_content"] = reply.reasoning
            if calls:
                message["tool_calls"] = [
                    {"id": cid, "type": "function", "function": {"name": n, "arguments": a}}
                    for cid, (n, a) in zip(ids, calls, strict=True)]
            return JSONResponse({"id": f"chatcmpl-{number}", "object": "chat.completion",
                                 "created": int(time.time()), "model": model,
                                 "choices": [{"index": 0, "message": message,
                                              "finish_reason": finish}], "usage": usage})
        chunks = self._chunks(number, model, reply, calls, ids, finish, usage)
        return StreamingResponse(self._sse(chunks, fault is not None, reply.chunk_delay_s),
                                 media_type="text/event-stream")

    def _pieces(self, text: str) -> list[str]:
        n = self.chunk_chars
        return [text[i:i + n] for i in range(0, len(text), n)] or [""]

    def _chunks(self, number: int, model: str, reply: Reply, calls: list[tuple[str, str]],
                ids: list[str], finish: str, usage: dict[str, Any]) -> list[dict[str, Any]]:
        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk",
                    "created": 0, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        out = [chunk({"role": "assistant", "content": ""})]
        if reply.reasoning:
            out += [chunk({"reasoning_content": p}) for p in self._pieces(reply.reasoning)]
        if reply.content:
            out += [chunk({"content": p}) for p in self._pieces(reply.content)]
        for i, ((name, args), cid) in enumerate(zip(calls, ids, strict=True)):
            out.append(chunk({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                              "function": {"name": name, "arguments": ""}}]}))
            out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                    for p in self._pieces(args) if p]
        out.append(chunk({}, finish))
        out.append({"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 0,
                    "model": model, "choices": [], "usage": usage})
        return out

    async def _sse(self, chunks: list[dict[str, Any]], cut: bool, delay: float):
        for i, c in enumerate(chunks):
            if cut and i >= max(1, len(chunks) // 2):
                raise ConnectionAbortedError("scripted stream cut")
            yield f"data: {json.dumps(c)}\n\n"
            await asyncio.sleep(delay)
        yield "data: [DONE]\n\n"
