"""Helpers to drive the guarded tools the way the agent loop does."""

from __future__ import annotations

from typing import Any

import httpx2

from dsh_github_reviewer.config import McpSettings
from dsh_github_reviewer.core.triggers import BotIdentity, Trigger
from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient
from dsh_github_reviewer.github.guard import Guard, GuardTurn
from dsh_github_reviewer.github.guard_rules import Scope
from dsh_github_reviewer.github.mcp_host import McpRuntime
from dsh_github_reviewer.github.review_submit import FindingLimits
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_harness import BudgetExhausted, ToolContext, ToolRejected

TOKEN = "ghp_" + "g" * 36
SESSION = "github:default:octo:app:pr:1"


def make_repo(sb: SandboxGitHub) -> None:
    st = sb.state
    st.create_repo("octo/app", {"app.py": "".join(f"line {i}\n" for i in range(1, 21)),
                                "secret_config.py": "KEY = 'base secret'\n"})
    st.commit("octo/app", "feature", {"app.py": "".join(
        f"line {i}{' changed' if i in (5, 15) else ''}\n" for i in range(1, 21)),
        "new.py": "print('hi')\n"})
    st.open_pull("octo/app", "feature", title="Change", body="b", author="alice")


def scope_for(sb: SandboxGitHub, flow: str = "review",
              trigger: Trigger | None = Trigger.auto("demo", "1")) -> Scope:
    pr = sb.state.pull("octo/app", 1)
    return Scope(owner="octo", repo="app", number=1, base_sha=pr.base_sha, base_ref="main",
                 head_sha=pr.head_sha, head_ref="feature", head_owner="octo", head_repo="app",
                 flow=flow, trigger=trigger)


class Budget:
    def __init__(self, limit: int = 30):
        self.limit, self.used = limit, 0

    def consume(self) -> None:
        if self.used >= self.limit:
            raise BudgetExhausted(f"tool budget exhausted: {self.limit} calls per turn")
        self.used += 1


class Driver:
    """Calls guard handlers like the harness pipeline does (errors -> (True, text))."""

    def __init__(self, guard: Guard, session: str = SESSION, budget: Budget | None = None):
        self.guard, self.session = guard, session
        self.budget = budget or Budget()
        self.tools = {t.name: t for t in guard.tools()}

    async def __call__(self, name: str, args: Any) -> tuple[bool, str]:
        ctx = ToolContext(session_id=self.session, turn=1, turn_meta={}, call_id="c",
                          _consume=self.budget.consume)
        try:
            return False, await self.tools[name].handler(args, ctx)
        except ToolRejected as exc:
            return True, str(exc)


async def begin_turn(guard: Guard, sb: SandboxGitHub, http: httpx2.AsyncClient,
                     runtime: McpRuntime, limits: FindingLimits | None = None,
                     **scope_kw: Any) -> GuardTurn:
    client = GitHubClient(sb.api_url, PatAuth(TOKEN), http)
    turn = GuardTurn(scope=scope_for(sb, **scope_kw), client=client, runtime=runtime,
                     token=TOKEN, limits=limits or FindingLimits(), me=BotIdentity("dsh-bot"))
    guard.begin(SESSION, turn)
    return turn


def runtime_for(sb: SandboxGitHub, timeout_s: float = 30) -> McpRuntime:
    return McpRuntime(McpSettings(), sb.web_url, timeout_s)
