"""A live agent: one session, one world, one turn at a time.

A turn is: user message -> (model request -> assistant message -> tool calls -> results)* ->
end. Every step is logged as it happens. A turn that stops early (cancel, deadline, error,
crash) is a failed attempt: ``Session.close_open_turn`` ends it uncommitted, so it stays in the
log for people but is never replayed; the next turn starts from the committed prefix. A failed
log write ends the turn with an error at once (it never waits for the deadline).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..config import CompactionConfig
from ..llm.service import LLMService
from ..llm.types import LLMError, LLMProvider, LLMRequest
from ..sessions.events import (
    AssistantMessage,
    Compaction,
    RetryNotice,
    StepEnd,
    StepStart,
    TitleSet,
    ToolCallStarted,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
)
from ..sessions.log import Session, SessionWriteError
from ..sessions.transcript import encode
from ..storage.fence import FencedOut
from . import compaction
from .pipeline import execute
from .user_turns import UserTurn, UserTurnIndex
from .world import AgentWorld, BudgetExhausted, Tool, ToolContext

log = logging.getLogger(__name__)

FALLBACK_TITLE_CHARS = 80


@dataclass
class TurnOutcome:
    """How a turn ended. Not ``ok`` means a failed attempt: it stays in the log but is never
    replayed, so retrying is calling ``followup`` again with the same text — a fresh attempt
    from the same committed prefix (its first request is a full prefix-cache hit)."""

    turn: int
    reason: str
    text: str | None = None
    # Why the turn failed; on a completed turn, a log flush that failed after the turn was
    # committed (the turn still counts: see ``Agent._run_turn``).
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    # The model provider's ``LLMError.kind`` when that ended the turn (``"auth"``: the key was
    # rejected; ``"rate_limited"``), or ``"storage"`` when the session log could not be
    # written (a full disk): what a caller does beyond counting a failed attempt.
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason == "completed"


@dataclass(frozen=True)
class AgentDeps:
    """What an agent needs of the harness, handed in by ``harness.agents`` (an agent knows
    neither its service nor the harness): pricing and model specs, the redactor of what a
    session records, the compaction policy and the tools every agent may see."""

    llm: LLMService
    redact: Callable[[str], str]
    compaction: CompactionConfig
    reasoning_replay: Literal["all", "current_turn", "none"]
    global_tools: list[Tool]


@dataclass
class _Queued:
    text: str
    meta: dict[str, Any]
    deadline: float | None
    future: asyncio.Future[TurnOutcome]
    require_text: bool = False


class Agent:
    def __init__(self, deps: AgentDeps, session: Session, world: AgentWorld,
                 provider: LLMProvider, provider_name: str, model: str):
        self.deps, self.session, self.world = deps, session, world
        self.provider, self.provider_name, self.model = provider, provider_name, model
        self.tools: list[Tool] = world.visible_tools(deps.global_tools)
        # Constant for the agent's life: built and encoded once, not per request.
        self._replay = deps.reasoning_replay
        self._schemas = [t.schema() for t in self.tools]
        self._tools_json = encode(self._schemas)
        # Redacted like everything a session records (the prompt is built, not logged).
        self._system = deps.redact(world.system_prompt)
        self._system_json = encode({"role": "system", "content": self._system})
        self._queue: list[_Queued] = []
        self._runner: asyncio.Task[None] | None = None
        self._current: asyncio.Task[TurnOutcome] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.last_outcome: TurnOutcome | None = None
        self._stopping = False

    @property
    def session_id(self) -> str:
        return self.session.id

    def _user_turn_index(self) -> UserTurnIndex:
        return self.session.view("agents.user_turns", UserTurnIndex.of)

    def user_messages(self) -> list[str]:
        """The user messages the model still sees verbatim, oldest first: those of turns a
        compaction summarized and of failed attempts (never replayed) are left out, so a plugin
        can leave out of the next message what the model has already been told."""
        return [t.content for t in self._user_turn_index().turns()]

    def user_turns(self, upcoming_tokens: int = 0) -> list[UserTurn]:
        """Like ``user_messages``, with each turn's number and meta (what the plugin recorded
        about the turn when it queued it: structured facts, never shown to the model; read
        only, and shared by every caller).

        ``upcoming_tokens`` estimates the next user message: when the prompt with it would
        exceed the compaction budget, the turns the compaction at the start of that turn will
        summarize are left out too, so a plugin never says "unchanged, see above" about text
        the summary is about to replace.

        Answered from an index kept up to date as events arrive (``user_turns.py``): O(turns
        listed), not a walk of the whole log, except just before a compaction."""
        index = self._user_turn_index()
        through = 0
        if upcoming_tokens:
            limit = compaction.budget(self.deps.compaction,
                                      self.deps.llm.spec(self.provider_name, self.model))
            size = self.prompt_tokens() + upcoming_tokens
            if size > limit:
                # The same cut the compaction will make (``compaction.cut_through_turn``).
                folded = compaction.cut_through_turn(
                    self.session.events, self.session.last_turn + 1,
                    self.deps.compaction.keep_recent_turns, size,
                    int(limit * self.deps.compaction.target))
                through = folded or 0
        return index.turns(through)

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    # -- public API -----------------------------------------------------------------------

    def followup(self, text: str, *, meta: dict[str, Any] | None = None,
                 deadline: float | None = None,
                 require_text: bool = False) -> asyncio.Future[TurnOutcome]:
        """Queue a user turn; returns a future of its outcome. Turns run one at a time.

        ``deadline`` is an absolute ``loop.time()``; default: now + ``world.turn_timeout_s``.
        ``require_text``: a turn whose final answer is empty is a failed attempt (reason
        ``error``, never replayed) — for callers to whom an empty answer is no answer.
        """
        loop = asyncio.get_running_loop()
        if deadline is None and self.world.turn_timeout_s:
            deadline = loop.time() + self.world.turn_timeout_s
        fut: asyncio.Future[TurnOutcome] = loop.create_future()
        self._queue.append(_Queued(text, dict(meta or {}), deadline, fut, require_text))
        self._idle.clear()
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run_queue(), name=f"agent:{self.session_id}")
        return fut

    async def when_idle(self) -> TurnOutcome | None:
        await self._idle.wait()
        return self.last_outcome

    def cancel(self) -> None:
        """Abort the running turn (logged as ``aborted``) and drop queued ones."""
        for q in self._queue:
            if not q.future.done():
                q.future.cancel()
        self._queue.clear()
        if self._current is not None and not self._current.done():
            self._current.cancel()

    # -- the loop ---------------------------------------------------------------------------

    async def _run_queue(self) -> None:
        try:
            while self._queue:
                q = self._queue.pop(0)
                if q.future.done():
                    continue
                self._current = asyncio.create_task(self._run_turn(q))
                try:
                    outcome = await asyncio.shield(self._current)
                except asyncio.CancelledError:
                    # Our runner was cancelled (shutdown): let the turn close as interrupted.
                    self._current.cancel()
                    outcome = await self._current
                    q.future.set_result(outcome)
                    raise
                except Exception as exc:  # a bug: never leave a caller waiting for its deadline
                    log.exception("turn of %s crashed", self.session_id)
                    if not q.future.done():
                        q.future.set_exception(exc)
                    continue
                self.last_outcome = outcome
                if not q.future.done():
                    q.future.set_result(outcome)
        finally:
            self._current = None
            if not self._queue:
                self._idle.set()

    async def _run_turn(self, q: _Queued) -> TurnOutcome:
        session = self.session
        turn = session.last_turn + 1
        reason, error, text = "completed", None, None
        failure: str | None = None
        try:
            await session.record(TurnStart, turn=turn, meta=q.meta)
            await session.record(UserMessage, turn=turn, content=q.text)
            await self._fallback_title(q.text)
            async with asyncio.timeout_at(q.deadline):
                text = await self._steps(turn, q.meta)
            if q.require_text and not (text or "").strip():
                reason, error = "error", "empty answer"
        except TimeoutError:
            reason, error = "deadline", "the turn deadline passed"
        except asyncio.CancelledError:
            if self._stopping:
                reason, error = "interrupted", "the harness stopped during the turn"
            else:
                reason, error = "aborted", "cancelled"
        except (LLMError, SessionWriteError, FencedOut) as exc:
            # (A fenced write was logged once by its fence; the turn's end is refused too.)
            reason, error = "error", str(exc)
            failure = "storage" if isinstance(exc, (SessionWriteError, FencedOut)) else getattr(
                exc, "kind", None)
        except Exception as exc:
            log.exception("turn %d of %s failed", turn, session.id)
            reason, error = "error", f"{type(exc).__name__}: {exc}"
        closing = asyncio.ensure_future(self._end_turn(turn, reason, error, text))
        while True:
            try:
                outcome = await asyncio.shield(closing)
                outcome.failure = outcome.failure or failure
                return outcome
            except asyncio.CancelledError:
                # A cancel (``cancel()``, shutdown) that lands while the turn's end is being
                # written is too late to change it: the end is written all the same and the
                # caller gets the outcome the log records, never a future left pending.
                if closing.cancelled():
                    raise
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()

    async def _end_turn(self, turn: int, reason: str, error: str | None,
                        text: str | None) -> TurnOutcome:
        session = self.session
        try:
            if reason == "completed":
                end = await session.record(TurnEnd, turn=turn, reason="completed",
                                           usage=session.turn_usage(turn))
                try:
                    await session.flush()
                except SessionWriteError as exc:
                    # The turn is in the log as committed (every reader, and the next load,
                    # sees it), so it is reported completed: a caller told "error" would retry
                    # the same text and the history would hold it twice. Only a crash before
                    # the OS writes the file back can still lose it; the next load then closes
                    # the turn as an uncommitted attempt, which is never replayed.
                    return TurnOutcome(turn=turn, reason="completed", text=text,
                                       error=str(exc), usage=end.usage)
            else:
                # A failed attempt: logged, never replayed; a retry starts from the same prefix.
                end = await session.close_open_turn(reason, error)
        except SessionWriteError as exc:
            # The log cannot record the end: the turn fails now rather than at its deadline;
            # the next load closes it as interrupted.
            return TurnOutcome(turn=turn, reason="error", text=text,
                               error=error or str(exc), usage=session.turn_usage(turn),
                               failure="storage")
        if end is None:  # the turn never started in the log (its first write failed)
            return TurnOutcome(turn=turn, reason=reason, text=text, error=error)
        return TurnOutcome(turn=turn, reason=end.reason, text=text, error=end.error,
                           usage=end.usage)

    async def _steps(self, turn: int, meta: dict[str, Any]) -> str | None:
        session, world = self.session, self.world
        tool_map = {t.name: t for t in self.tools}
        used = 0

        def consume() -> None:
            nonlocal used
            if world.max_tool_calls is not None and used >= world.max_tool_calls:
                raise BudgetExhausted(
                    f"tool budget exhausted: {world.max_tool_calls} calls per turn; "
                    "finish the task with what you have")
            used += 1

        for step in range(1, world.max_steps + 1):
            await session.record(StepStart, turn=turn, step=step)
            await self._maybe_compact(turn)
            response = await self.provider.complete(self.request(turn), self._on_retry(turn))
            usage = self.deps.llm.price(self.provider_name, self.model, response.usage)
            msg = await session.record(
                AssistantMessage, turn=turn, content=response.content,
                reasoning=response.reasoning, tool_calls=response.tool_calls, usage=usage,
                model=response.model or self.model)
            if not msg.tool_calls:
                await session.record(StepEnd, turn=turn, step=step)
                return msg.content
            ended: str | None = None
            for call in msg.tool_calls:
                await session.record(ToolCallStarted, turn=turn, call_id=call.id,
                                     name=call.name, arguments=call.arguments)
                ctx = ToolContext(session_id=session.id, turn=turn, turn_meta=meta,
                                  call_id=call.id, _consume=consume)
                out = await execute(tool_map, call, ctx, world.tool_timeout_s,
                                    world.tool_result_limit)
                await session.record(ToolResult, turn=turn, call_id=call.id, name=call.name,
                                     content=out.content, is_error=out.is_error, note=out.note)
                if out.ends_turn and not out.is_error:
                    ended = out.content
            await session.record(StepEnd, turn=turn, step=step)
            if ended is not None:
                # The task is done (``ToolText.ends_turn``): no request only for a closing
                # text. The transcript ends with the tool result; the next turn's user message
                # follows it, so the replayed prefix stays byte-identical.
                return msg.content or ended
        raise LLMError(f"the model did not finish within {world.max_steps} steps")

    def request(self, turn: int) -> LLMRequest:
        """The next model request: the session's transcript (kept up to date as events are
        recorded, so this is O(1) in the history) with the agent's cached encodings.
        ``turn`` is the running turn, the one the transcript treats as current."""
        transcript = self.session.transcript(self._replay)
        return LLMRequest(model=self.model, system=self._system,
                          messages=transcript.messages(), tools=self._schemas,
                          encoded_system=self._system_json,
                          encoded_messages=transcript.encoded(),
                          encoded_runs=transcript.encoded_runs(),
                          encoded_tools=self._tools_json)

    def prompt_tokens(self) -> int:
        """``compaction.estimate_tokens`` of the next request's messages and tools, from the
        running byte count (the same number, without serializing the prompt)."""
        transcript = self.session.transcript(self._replay)
        n = len(transcript) + 1  # the system message
        size = (len(b'{"messages":[') + len(self._system_json) + transcript.encoded_size()
                + (n - 1) + len(b'],"tools":') + len(self._tools_json) + 1)
        return math.ceil(size / 4)

    def _on_retry(self, turn: int):
        async def note(attempt: int, error: str, wait: float) -> None:
            await self.session.record(RetryNotice, turn=turn, attempt=attempt, error=error,
                                      wait_s=round(wait, 3))
        return note

    async def _maybe_compact(self, turn: int) -> None:
        llm, policy = self.deps.llm, self.deps.compaction
        spec = llm.spec(self.provider_name, self.model)
        limit = compaction.budget(policy, spec)
        size = self.prompt_tokens()
        if size <= limit:
            return
        through = compaction.cut_through_turn(
            self.session.events, turn, policy.keep_recent_turns, size,
            int(limit * policy.target))
        if through is None:
            log.warning("session %s: prompt of ~%d tokens exceeds the budget of %d but no "
                        "whole turn can be compacted", self.session.id, size, limit)
            return
        summary, usage = await self._summarize(turn, through)
        await self.session.record(Compaction, through_turn=through, summary=summary,
                                  tokens_before=size, usage=usage)

    async def _summarize(self, turn: int, through: int) -> tuple[str, Usage]:
        """The summary of the head through turn ``through`` and what asking for it cost.

        Asked as a continuation of the session's prompt: the system prompt, tools and messages
        of its requests up to the cut (a prefix of the last request: the provider reads it
        from its prefix cache), then ``COMPACTION_INSTRUCTION``, tools forbidden. A provider
        that rejects that request (a 4xx), or an answer without text or with tool calls, falls
        back to the standalone request on a text transcript of the head; its failure ends the
        turn as it always did (the next turn tries again)."""
        llm = self.deps.llm
        messages, encoded = self.session.transcript(self._replay).through(through)
        ask = {"role": "user", "content": compaction.COMPACTION_INSTRUCTION}
        request = LLMRequest(model=self.model, system=self._system,
                             messages=[*messages, ask], tools=self._schemas,
                             encoded_system=self._system_json,
                             encoded_messages=[*encoded, encode(ask)],
                             encoded_tools=self._tools_json, tool_choice="none")
        usage = Usage()
        try:
            response = await self.provider.complete(request, self._on_retry(turn))
        except LLMError as exc:
            if exc.kind is not None or exc.status is None or not 400 <= exc.status < 500:
                raise
            why = f"rejected ({exc})"
        else:
            usage = llm.price(self.provider_name, self.model, response.usage)
            if (response.content or "").strip() and not response.tool_calls:
                return response.content or "", usage
            why = ("answered with tool calls" if response.tool_calls
                   else "answered without text")
        log.warning("session %s: the compaction request %s; summarizing a transcript of the "
                    "head instead", self.session.id, why)
        text = compaction.transcript(compaction.head_messages(self.session.events, through))
        fallback = LLMRequest(
            model=self.model, system=compaction.SUMMARY_SYSTEM,
            messages=[{"role": "user", "content": text + "\n\n" + compaction.SUMMARY_INSTRUCTION}])
        response = await self.provider.complete(fallback, self._on_retry(turn))
        usage += llm.price(self.provider_name, self.model, response.usage)
        return response.content or "(empty summary)", usage

    async def _fallback_title(self, text: str) -> None:
        title, _pinned = self.session.title()
        if title is None:
            first = " ".join(text.strip().split())[:FALLBACK_TITLE_CHARS] or "(untitled)"
            await self.session.record(TitleSet, title=first, pinned=False)

    async def stop(self) -> None:
        """Cancel the runner (shutdown); a running turn is closed as interrupted."""
        self._stopping = True
        if self._runner is not None and not self._runner.done():
            if self._current is not None and not self._current.done():
                self._current.cancel()
            self._runner.cancel()
            try:
                await self._runner
            except (asyncio.CancelledError, Exception):
                pass
