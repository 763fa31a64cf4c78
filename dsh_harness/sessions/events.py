"""Session event log records: the single source of truth for a conversation.

Model history, usage totals, titles and the web UI are all derived from these events. Each
event has a per-session sequence number and a UTC timestamp; the log is append-only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

TurnEndReason = Literal["completed", "aborted", "error", "interrupted", "deadline"]
SESSION_FORMAT = 1


def utcnow() -> datetime:
    return datetime.now(UTC)


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCall(Frozen):
    """A tool call exactly as the model sent it (``arguments`` is the raw JSON text)."""

    id: str
    name: str
    arguments: str


class Usage(Frozen):
    """Disjoint token counts of one model request, and what they cost."""

    uncached_input: int = 0
    cache_read: int = 0
    output: int = 0
    cost_usd: float = 0.0

    @property
    def prompt(self) -> int:
        return self.uncached_input + self.cache_read

    def __add__(self, other: Usage) -> Usage:
        return Usage(uncached_input=self.uncached_input + other.uncached_input,
                     cache_read=self.cache_read + other.cache_read,
                     output=self.output + other.output,
                     cost_usd=round(self.cost_usd + other.cost_usd, 10))


class SessionHeader(Frozen):
    type: Literal["session"] = "session"
    format: int = SESSION_FORMAT
    id: str
    created_at: datetime
    meta: dict[str, Any] = Field(default_factory=dict)


class EventBase(Frozen):
    seq: int
    at: datetime


class TurnStart(EventBase):
    type: Literal["turn_start"] = "turn_start"
    turn: int
    meta: dict[str, Any] = Field(default_factory=dict)


class TurnEnd(EventBase):
    """The end of one attempt at a turn.

    ``committed`` is False for an attempt that did not complete (error, deadline, abort, crash):
    its events stay in the log for people but are never replayed to the model, so the next
    attempt starts from the same committed prefix. Logs written before attempts existed have no
    such field; their turns, failed ones included, replay as they always did.
    """

    type: Literal["turn_end"] = "turn_end"
    turn: int
    reason: TurnEndReason
    error: str | None = None
    usage: Usage = Usage()
    committed: bool = True


class StepStart(EventBase):
    type: Literal["step_start"] = "step_start"
    turn: int
    step: int


class StepEnd(EventBase):
    type: Literal["step_end"] = "step_end"
    turn: int
    step: int


class UserMessage(EventBase):
    type: Literal["user_message"] = "user_message"
    turn: int
    content: str


class AssistantMessage(EventBase):
    type: Literal["assistant_message"] = "assistant_message"
    turn: int
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Usage()
    model: str = ""
    # Extra fields the provider returned on the message that must be replayed verbatim.
    provider_fields: dict[str, Any] = Field(default_factory=dict)


class ToolCallStarted(EventBase):
    type: Literal["tool_call"] = "tool_call"
    turn: int
    call_id: str
    name: str
    arguments: str


class ToolResult(EventBase):
    type: Literal["tool_result"] = "tool_result"
    turn: int
    call_id: str
    name: str
    content: str
    is_error: bool = False
    # The handler's own note (e.g. "rejected", "synthesized"): for the UI, never sent to models.
    note: str | None = None


class TitleSet(EventBase):
    type: Literal["title"] = "title"
    title: str
    pinned: bool


class Compaction(EventBase):
    """The head of the conversation, turns ``<= through_turn``, is replaced by ``summary``."""

    type: Literal["compaction"] = "compaction"
    through_turn: int
    summary: str
    tokens_before: int = 0
    usage: Usage = Usage()


class RetryNotice(EventBase):
    type: Literal["retry"] = "retry"
    turn: int
    attempt: int
    error: str
    wait_s: float


Event = Annotated[
    TurnStart | TurnEnd | StepStart | StepEnd | UserMessage | AssistantMessage
    | ToolCallStarted | ToolResult | TitleSet | Compaction | RetryNotice,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)
