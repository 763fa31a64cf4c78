"""``harness.agents``: create, resume or return the live agent of a session id.

The world always comes from the ``dsh_agent_world`` hook, on every create and resume, whichever
code path asks; a session whose owner gives no world cannot run an agent. The code path that
opens an agent for a turn may hand the hook that turn's ``inputs`` (opaque here: the reviewer's
trusted instructions and the model of the attempt); one that opens it without (the web UI)
passes none and the owner builds the world from what it stored.

The service knows the harness only as an ``AgentHost`` (the services it uses) and hands each
agent its ``AgentDeps``: an agent never reaches back to its service or the harness.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

from ..config import DeploymentConfig
from ..errors import DshError
from ..llm.service import LLMService
from ..redact import Redactor
from ..sessions.events import TitleSet
from ..sessions.log import Session
from ..sessions.service import SessionService
from ..storage.fence import Fence
from .agent import Agent, AgentDeps
from .world import AgentWorld, Tool

log = logging.getLogger(__name__)


class AgentError(DshError):
    pass


def _fenced(fence: Fence | None) -> dict[str, Fence]:
    return {} if fence is None else {"fence": fence}


class _OpeningLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class AgentHost(Protocol):
    """What the agent service uses of the harness (which is passed on to the world hooks)."""

    config: DeploymentConfig

    @property
    def sessions(self) -> SessionService: ...

    @property
    def llm(self) -> LLMService: ...

    @property
    def plugins(self) -> Any: ...

    @property
    def redactor(self) -> Redactor: ...


class AgentService:
    def __init__(self, harness: AgentHost):
        self.harness = harness
        self.global_tools: list[Tool] = []
        self._live: dict[str, Agent] = {}
        self._opening: dict[str, _OpeningLock] = {}

    def register_global_tool(self, tool: Tool) -> None:
        if any(t.name == tool.name for t in self.global_tools):
            raise AgentError(f"global tool {tool.name!r} is registered twice")
        self.global_tools.append(tool)

    def get(self, session_id: str) -> Agent | None:
        return self._live.get(session_id)

    def live(self) -> list[Agent]:
        return list(self._live.values())

    async def create(self, session_id: str, meta: dict[str, Any] | None = None, *,
                     inputs: Any = None, fence: Fence | None = None) -> Agent:
        async with self._lock(session_id):
            if session_id in self._live or await self.harness.sessions.exists(session_id):
                raise AgentError(f"session {session_id!r} already exists; resume it instead")
            session = await self.harness.sessions.create(session_id, meta or {},
                                                         **_fenced(fence))
            return await self._start(session, inputs)

    async def resume(self, session_id: str, *, inputs: Any = None,
                     fence: Fence | None = None) -> Agent:
        async with self._lock(session_id):
            if await self._usable(session_id, fence):
                return self._live[session_id]
            session = await self.harness.sessions.resume(session_id, **_fenced(fence))
            return await self._start(session, inputs)

    async def get_or_open(self, session_id: str, meta: dict[str, Any] | None = None, *,
                          inputs: Any = None, fence: Fence | None = None) -> Agent:
        """The live agent, else the resumed session, else a new one.

        ``inputs`` go to ``dsh_agent_world`` when the agent is created or resumed here; a live
        agent keeps the world it was opened with (evict it first to rebuild the world).
        ``fence`` (the caller's lease fence, with replicas) guards every append from here on,
        a live agent's too.
        """
        async with self._lock(session_id):
            if await self._usable(session_id, fence):
                return self._live[session_id]
            if await self.harness.sessions.exists(session_id):
                session = await self.harness.sessions.resume(session_id, **_fenced(fence))
            else:
                session = await self.harness.sessions.create(session_id, meta or {},
                                                             **_fenced(fence))
            return await self._start(session, inputs)

    async def _usable(self, session_id: str, fence: Fence | None = None) -> bool:
        """Whether the live agent can take turns; an idle one whose log write failed is
        dropped so the session is loaded again (which cuts a torn line off the log)."""
        agent = self._live.get(session_id)
        if agent is None:
            return False
        if agent.session.broken is None or agent.busy:
            if fence is not None:
                agent.session.fence = fence
            return True
        log.warning("session %s: reloading after a failed log write (%s)", session_id,
                    agent.session.broken)
        await self.evict(session_id)
        return False

    @asynccontextmanager
    async def _lock(self, session_id: str) -> AsyncIterator[None]:
        """Serialize opening one session; the lock lives only while someone holds or waits
        for it, so a bot that opens thousands of sessions keeps no lock per session."""
        entry = self._opening.get(session_id)
        if entry is None:
            entry = self._opening[session_id] = _OpeningLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._opening[session_id]

    async def world_for(self, session_id: str, inputs: Any = None) -> AgentWorld:
        world = await self.harness.plugins.afirst("dsh_agent_world", harness=self.harness,
                                                  session_id=session_id, inputs=inputs)
        if world is None:
            raise AgentError(f"no plugin provides a world for session {session_id!r}")
        if not isinstance(world, AgentWorld):
            raise AgentError(f"dsh_agent_world returned {type(world).__name__}, "
                             "expected AgentWorld")
        return world

    def deps(self, provider_name: str) -> AgentDeps:
        config = self.harness.config
        return AgentDeps(llm=self.harness.llm, redact=self.harness.redactor.text,
                         compaction=config.compaction,
                         reasoning_replay=config.providers[provider_name].reasoning_replay,
                         global_tools=self.global_tools)

    async def _start(self, session: Session, inputs: Any = None) -> Agent:
        world = await self.world_for(session.id, inputs)
        await self.pin_title(session)
        provider_name, model = self.harness.llm.split(world.model)
        provider = self.harness.llm.provider(provider_name)
        agent = Agent(self.deps(provider_name), session, world, provider, provider_name, model)
        self._live[session.id] = agent
        return agent

    async def pin_title(self, session: Session) -> None:
        pinned = await self.harness.plugins.afirst("dsh_session_title", harness=self.harness,
                                                   session=session.header)
        current, is_pinned = session.title()
        if pinned and (pinned != current or not is_pinned):
            await session.record(TitleSet, title=str(pinned), pinned=True)

    async def evict(self, session_id: str) -> bool:
        """Drop an idle agent from memory; it can be resumed from persistence later."""
        agent = self._live.get(session_id)
        if agent is None or agent.busy:
            return False
        del self._live[session_id]
        try:
            await self.harness.sessions.release(session_id, agent.session)
        except OSError as exc:  # e.g. fsync on a full disk: the agent is gone all the same
            log.warning("session %s: releasing the log failed: %s", session_id, exc)
        return True

    async def close(self) -> None:
        for agent in list(self._live.values()):
            await agent.stop()
            await self.harness.sessions.release(agent.session_id)
        self._live.clear()
