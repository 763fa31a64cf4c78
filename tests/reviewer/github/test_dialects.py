"""Dialect mapping, unit level: the current consolidated server tools and 0.12.x tools."""

from __future__ import annotations

import httpx2
import pytest

from dsh_github_reviewer.core.triggers import BotIdentity
from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient
from dsh_github_reviewer.github.dialects import Dialect, DialectError, detect
from dsh_github_reviewer.github.guard import Guard, GuardTurn
from dsh_github_reviewer.github.mcp_host import ToolInfo
from tests.reviewer.github.test_guard_rules import BASE, HEAD, SCOPE
from tests.reviewer.guard_kit import SESSION, Driver

CURRENT = ["pull_request_read", "get_file_contents", "pull_request_review_write",
           "add_comment_to_pending_review"]
LEGACY = ["get_pull_request", "get_pull_request_diff", "get_pull_request_files",
          "get_pull_request_status", "get_file_contents", "create_pending_pull_request_review"]


def tools(names):
    return {n: ToolInfo(n, {}) for n in names}


class FakeConnection:
    def __init__(self):
        self.calls = []

    async def call(self, name, args):
        self.calls.append((name, args))
        return False, f"ok from {name}"

    async def close(self):
        pass


class FakeRuntime:
    def __init__(self, names):
        self.names, self.conn = names, FakeConnection()

    async def tools(self, token):
        return tools(self.names)

    async def connect(self, token):
        return self.conn


def test_detect():
    assert detect(tools(CURRENT)).name == "current"
    assert detect(tools(LEGACY)).name == "legacy"
    with pytest.raises(DialectError, match="neither pull_request_read nor get_pull_request"):
        detect(tools(["get_file_contents"]))
    with pytest.raises(DialectError, match="no get_file_contents"):
        detect(tools(["pull_request_read"]))


@pytest.mark.parametrize(("names", "method", "expected"), [
    (CURRENT, "get_check_runs", ("pull_request_read", {"method": "get_check_runs"})),
    (CURRENT, "get_diff", ("pull_request_read", {"method": "get_diff"})),
    (LEGACY, "get_diff", ("get_pull_request_diff", {})),
    (LEGACY, "get_status", ("get_pull_request_status", {})),
])
def test_pr_read_mapping(names, method, expected):
    tool, args = detect(tools(names)).pr_read(method, {"owner": "o"})
    assert tool == expected[0] and expected[1].items() <= args.items()


def test_legacy_file_reads_avoid_the_sha_lookup_bug():
    legacy = Dialect("legacy", frozenset(LEGACY))
    head = legacy.file_read({"owner": "fork-owner", "repo": "app-fork", "path": "a.py",
                             "sha": HEAD}, SCOPE)[1]
    assert head == {"owner": "Octo", "repo": "App", "path": "a.py", "ref": "refs/pull/7/head"}
    base = legacy.file_read({"owner": "Octo", "repo": "App", "path": "a.py", "ref": BASE},
                            SCOPE)[1]
    assert base == {"owner": "Octo", "repo": "App", "path": "a.py", "sha": BASE}
    current = Dialect("current", frozenset(CURRENT))
    args = {"owner": "Octo", "repo": "App", "path": "a.py", "sha": HEAD}
    assert current.file_read(args, SCOPE)[1] == args


async def test_guard_on_a_current_dialect_server():
    guard = Guard()
    runtime = FakeRuntime(CURRENT)
    # A client that is never asked anything here (the MCP runtime is faked): the guard reads
    # only its rate-limit wait.
    async with httpx2.AsyncClient() as http:
        client = GitHubClient("http://127.0.0.1:9/api/v3", PatAuth("t"), http)
        guard.begin(SESSION, GuardTurn(scope=SCOPE, client=client, runtime=runtime, token="t",
                                       me=BotIdentity("bot")))
        await _drive_current(guard, runtime)


async def _drive_current(guard, runtime):
    drive = Driver(guard)
    pr = {"owner": "octo", "repo": "app", "pullNumber": 7}
    assert await drive("pull_request_read", {**pr, "method": "get_check_runs"}) == (
        False, "ok from pull_request_read")
    assert runtime.conn.calls == [("pull_request_read", {"owner": "Octo", "repo": "App",
                                                         "pullNumber": 7,
                                                         "method": "get_check_runs"})]
