"""The webhook endpoint: verify, parse, pick the account, record the work, answer.

Order matters. The size is checked while reading (413 past 25 MB), the signature over the raw
bytes before anything parses them (401), and only then the JSON (400). The answer goes out once
the work is durable — GitHub gives up after 10 s and never retries by itself, so the receiver
records and returns; models run later, from the records. Log lines name the delivery id, event
and outcome, never the body (it may carry private code or text).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ...core.clock import utcnow
from ...core.failures import log_failure
from . import events
from .deliveries import Delivery, DeliveryLog
from .signature import matching_secrets

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB


@dataclass(frozen=True)
class Target:
    """What the receiver knows of an account: its secret and what it watches."""

    key: str
    secret: str
    repositories: frozenset[str]  # lower-cased owner/repo
    installation_id: int | None = None
    # An App account without a repositories list watches whatever its installation can access.
    whole_installation: bool = False


class WorkSink(Protocol):
    async def record(self, account: str, event: events.Envelope, delivery_id: str) -> str:
        """Durably record the PR work ``event`` means for ``account``; return a short outcome.

        Must be idempotent: a delivery that failed half-way may arrive again."""


class TooLarge(Exception):
    pass


@dataclass
class Counters:
    received: int = 0
    recorded: int = 0
    duplicates: int = 0
    ignored: int = 0
    rejected: int = 0
    failed: int = 0
    last_delivery_at: datetime | None = None


@dataclass
class Receiver:
    targets: Sequence[Target]
    sink: WorkSink
    deliveries: DeliveryLog
    path: str = "/github/webhook"
    clock: Callable[[], datetime] = utcnow
    counters: Counters = field(default_factory=Counters)
    _inflight: dict[str, asyncio.Future[tuple[int, str]]] = field(default_factory=dict)

    def app(self) -> Starlette:
        return Starlette(routes=[Route(self.path, self.endpoint, methods=["POST"])])

    # -- HTTP -----------------------------------------------------------------------------------

    async def endpoint(self, request: Request) -> JSONResponse:
        self.counters.received += 1
        self.counters.last_delivery_at = self.clock()
        delivery = request.headers.get("x-github-delivery", "").strip()
        name = request.headers.get("x-github-event", "").strip()
        status, outcome = await self.handle(request, delivery, name)
        level = logging.INFO if status < 400 else logging.WARNING
        # Headers of an unauthenticated request: shown only in a safe, short form.
        log.log(level, "webhook delivery %s (%s): %d %s", _safe(delivery), _safe(name), status,
                outcome)
        return JSONResponse({"status": outcome}, status_code=status)

    async def handle(self, request: Request, delivery: str, name: str) -> tuple[int, str]:
        try:
            body = await _read_capped(request, MAX_BODY_BYTES)
        except TooLarge:
            self.counters.rejected += 1
            return 413, f"payload larger than {MAX_BODY_BYTES} bytes"
        signed_by = matching_secrets(request.headers.get("x-hub-signature-256"), body,
                                     {t.secret for t in self.targets})
        if not signed_by:
            self.counters.rejected += 1
            return 401, "missing or invalid X-Hub-Signature-256"
        if not name or not delivery:
            self.counters.rejected += 1
            return 400, "missing X-GitHub-Event or X-GitHub-Delivery header"
        if await self.deliveries.known(delivery):
            self.counters.duplicates += 1
            return 200, "duplicate delivery; already handled"
        try:
            body = _json_body(request.headers.get("content-type", ""), body)
            parsed, acts = events.parse(name, body)
        except events.MalformedDelivery as exc:
            self.counters.rejected += 1
            return 400, str(exc)
        running = self._inflight.get(delivery)
        if running is not None:  # the same id again while the first is being recorded
            self.counters.duplicates += 1
            status, outcome = await asyncio.shield(running)
            if status >= 400:  # the first failed: this copy did no work either
                return status, outcome
            return 200, "duplicate delivery; already handled"
        future: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        self._inflight[delivery] = future
        result = (500, "recording was interrupted; redeliver it or wait for reconciliation")
        try:
            result = await self._dispatch(delivery, name, parsed, acts, signed_by)
        except Exception as exc:
            self.counters.failed += 1
            log_failure(log, exc, "webhook delivery %s (%s): recording failed",
                        _safe(delivery), _safe(name))
            result = (500, f"could not record the work ({type(exc).__name__}); "
                           "redeliver it or wait for reconciliation")
        finally:
            # A duplicate waiting on this one is released even if this task was cancelled.
            self._inflight.pop(delivery, None)
            future.set_result(result)
        return result

    async def _dispatch(self, delivery: str, name: str, parsed: events.Envelope | events.Ping,
                        acts: bool, signed_by: set[str]) -> tuple[int, str]:
        if isinstance(parsed, events.Ping):
            await self._remember(delivery, name, "ping")
            return 200, "pong"
        if not acts:
            self.counters.ignored += 1
            await self._remember(delivery, name, "ignored")
            return 200, f"{name}.{parsed.action or '-'} ignored: not an event the reviewer uses"
        repo = parsed.repository.full_name if parsed.repository else ""
        watching = self.accounts_for(parsed)
        if not watching:
            self.counters.ignored += 1
            await self._remember(delivery, name, "ignored")
            return 200, f"ignored: no account watches {repo or 'this repository'}"
        allowed = [t for t in watching if t.secret in signed_by]
        if not allowed:
            self.counters.rejected += 1
            return 401, f"signature is not from the secret of the account watching {repo}"
        outcomes = [await self.sink.record(t.key, parsed, delivery) for t in allowed]
        await self._remember(delivery, name, "recorded")
        self.counters.recorded += 1
        return 200, "; ".join(outcomes)

    def accounts_for(self, parsed: events.Envelope) -> list[Target]:
        """Accounts watching the delivery's repository; its installation narrows them."""
        if parsed.repository is None:
            return []
        full = parsed.repository.full_name.lower()
        installation = parsed.installation.id if parsed.installation is not None else None
        watching = [t for t in self.targets if full in t.repositories
                    or (t.whole_installation and installation == t.installation_id)]
        if parsed.installation is not None:
            same = [t for t in watching if t.installation_id == parsed.installation.id]
            if same:
                return same
        return watching

    async def _remember(self, delivery: str, name: str, outcome: str) -> None:
        await self.deliveries.remember(delivery, Delivery(received_at=self.clock(), event=name,
                                                          outcome=outcome))


def _safe(header: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "?", header[:64]) or "-"


async def _read_capped(request: Request, cap: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _json_body(content_type: str, body: bytes) -> bytes:
    """Hooks set to ``application/x-www-form-urlencoded`` send the JSON as ``payload=``."""
    if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        return body
    try:
        values = parse_qs(body.decode("ascii"), strict_parsing=True).get("payload")
    except (UnicodeDecodeError, ValueError):
        values = None
    if not values:
        raise events.MalformedDelivery("form-encoded delivery without a payload field")
    return values[0].encode()

