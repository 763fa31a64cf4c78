"""Attempts of one team session's turn: model candidates in order, fresh agents for retries.

The memory rules of the original design: only a successful attempt's messages enter the
replayed transcript (the harness closes a failed attempt and keeps it out of the replayed
prefix), and every retry starts a fresh agent from the same transcript, so the retry's first
request is itself a prefix-cache hit. Candidates are tried in order at run time: the same model
again after a transient failure (the provider already retried 429/5xx/timeouts inside the
attempt; a deadline, a cut or an empty answer may pass), the next model at once after a
persistent one (an HTTP 4xx such as an unknown model or a rejected request, or a world that
cannot be built).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from dsh_harness import Harness

from ...core.failures import local_failure, log_failure
from ...core.sanitizer import redact_secrets
from ...core.triggers import Trigger, meta_trigger
from ...turn.answered import committed_answer

log = logging.getLogger(__name__)

# The status the provider reported (``HTTP 404: <body>``), not a status quoted in a body; 408
# (request timeout), 409 (conflict) and 429 (rate limit) pass, as the OpenAI SDK retries them.
_PERSISTENT = re.compile(r"(?:^|: )HTTP 4(?!08|09|29)\d\d(?::|$)")


@dataclass
class AttemptResult:
    ok: bool
    text: str | None = None
    error: str | None = None
    persistent: bool = False
    # TurnOutcome.failure: "auth" when the model provider rejected the key.
    failure: str | None = None
    # Nothing new for this session to review: no model request was made.
    idle: bool = False


@dataclass
class Outcome:
    ok: bool
    text: str | None
    error: str | None
    attempts: list[str] = field(default_factory=list)  # "model: result" per attempt
    model: str | None = None
    # Every attempt failed for the same account-wide reason ("auth": the key was rejected).
    failure: str | None = None
    idle: bool = False  # AttemptResult.idle of the accepted attempt


def is_persistent(error: str | None) -> bool:
    """A failure the same model will repeat: an HTTP 4xx other than 408, 409 and 429."""
    return bool(error and _PERSISTENT.search(error))


async def run_attempts(label: str, candidates: list[str | None], per_model: int,
                       attempt: Callable[[str | None], Awaitable[AttemptResult]],
                       accept: Callable[[AttemptResult], bool] | None = None) -> Outcome:
    """Run ``attempt(model)`` until one is accepted; ``None`` as a model = the default model."""
    accept = accept or (lambda r: r.ok and bool((r.text or "").strip()))
    tried: list[str] = []
    last_error: str | None = None
    failures: set[str | None] = set()
    for model in candidates:
        for n in range(per_model):
            try:
                result = await attempt(model)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if local_failure(exc):
                    # This machine's storage (a full disk): no other model or attempt helps.
                    log_failure(log, exc, "%s: attempt failed", label)
                    failures.add("storage")
                    last_error = str(exc)
                    tried.append(f"{model or 'default model'}: {exc}")
                    return Outcome(False, None, last_error, tried, None, failure="storage")
                log.exception("%s: attempt failed", label)
                result = AttemptResult(False, error=f"{type(exc).__name__}: "
                                                    f"{redact_secrets(str(exc))}",
                                       persistent=True)
            name = model or "default model"
            if result.idle:
                tried.append("nothing new to review: no request")
                return Outcome(True, result.text, None, tried, None, idle=True)
            if accept(result):
                tried.append(f"{name}: ok")
                return Outcome(True, result.text, None, tried, model)
            error = result.error or ("empty answer" if result.ok else "failed")
            last_error = error
            failures.add(result.failure)
            tried.append(f"{name}: {error}")
            persistent = result.persistent or is_persistent(error)
            log.warning("%s: attempt %d on %s failed (%s): %s", label, n + 1, name,
                        "persistent" if persistent else "transient", error)
            if persistent:
                break
    failure = failures.pop() if len(failures) == 1 else None
    return Outcome(False, None, last_error, tried, None, failure=failure)


async def reported_before(harness: Harness, session_id: str, triggers: tuple[Trigger, ...],
                          head: str) -> str | None:
    """The final answer of the newest completed persona turn for one of ``triggers`` on
    ``head``, or None. Only committed turns count: a failed attempt is never a report."""
    return await committed_answer(
        harness, session_id, lambda meta: (meta.get("flow") == "persona"
                                           and meta_trigger(meta) in triggers
                                           and meta.get("head") == head))
