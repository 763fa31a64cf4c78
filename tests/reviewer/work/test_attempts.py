"""Failed attempts on the work records: counting, backoff, a new head starting afresh, giving up.

The procedures run for real against a real store (JSON backend) and a real GitHub client
whose server refuses connections (a closed loopback port), so every attempt fails the way an
unreachable GitHub fails. Interval 3 s and counts up to 3 tell ``2 ** n * i`` from ``2 * n * i``.
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta

import httpx2
import pytest

from dsh_github_reviewer.config import AccountConfig, McpSettings
from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.core.triggers import BotIdentity
from dsh_github_reviewer.github.account import ConfiguredAccount, ConnectedAccount
from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient
from dsh_github_reviewer.github.mcp_host import McpRuntime
from dsh_github_reviewer.work.chat import CommandProcedure
from dsh_github_reviewer.work.context import WorkContext
from dsh_github_reviewer.work.pause import AccountPause
from dsh_github_reviewer.work.records import Command, Notice, PrRecord
from dsh_github_reviewer.work.review import ReviewProcedure
from dsh_github_reviewer.work.store import WorkStore, domain_spec
from dsh_harness import Domain
from dsh_harness.storage.json_backend import JsonBackend

PAT = "ghp_" + "w" * 36
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
KEY = PrRef("acct", "octo/app", 1)
INTERVAL = 3


def refused(ctx) -> str:
    """A refused connection names its type and the host."""
    host = ctx.client.api_url.split("//", 1)[1]
    return f"ConnectError from {host}: All connection attempts failed"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def at(self, seconds: float) -> None:
        self.now = T0 + timedelta(seconds=seconds)


@pytest.fixture
async def world(tmp_path):
    domain = await Domain.open(domain_spec(), JsonBackend(tmp_path))
    store = WorkStore(domain, "acct")
    cfg = AccountConfig(name="acct", personal_access_token=PAT, poll_interval_s=INTERVAL,
                        review={"max_attempts": 3})
    async with httpx2.AsyncClient(timeout=5) as http:
        auth = PatAuth(PAT)
        client = GitHubClient(f"http://127.0.0.1:{closed_port()}", auth, http)
        acct = ConnectedAccount(ConfiguredAccount("github-reviewer", cfg), http, auth, client,
                                McpRuntime(McpSettings(), cfg.web_url, 5.0),
                                BotIdentity("dsh-bot"))
        clock = Clock()
        # No runner: every attempt fails at GitHub before a model turn would start.
        ctx = WorkContext(acct=acct, store=store, runner=None,  # type: ignore[arg-type]
                          pause=AccountPause(acct.key, store), clock=clock)
        yield ctx, clock
    await domain.close()


async def review_once(ctx: WorkContext) -> PrRecord:
    rec = await ctx.store.pr(KEY)
    await ReviewProcedure(ctx).run(KEY, rec)
    return await ctx.store.pr(KEY)


async def test_review_failures_count_back_off_restart_on_a_new_head_and_give_up(world):
    ctx, clock = world
    await ctx.store.update_pr(KEY, lambda _: PrRecord(head_sha="h1", status="reviewing",
                                                       updated_at=T0))
    rec = await review_once(ctx)
    assert (rec.status, rec.fail_count, rec.last_failed_sha, rec.last_failed_at) == (
        "reviewing", 1, "h1", T0)
    assert rec.last_error == "GET repos/octo/app/pulls/1: " + refused(ctx)
    assert rec.backoff_until(INTERVAL) == T0 + timedelta(seconds=6)

    clock.at(10)
    rec = await review_once(ctx)
    assert (rec.fail_count, rec.last_failed_at) == (2, T0 + timedelta(seconds=10))
    assert rec.backoff_until(INTERVAL) == T0 + timedelta(seconds=10 + 12)

    def push(e: PrRecord | None) -> PrRecord:
        assert e is not None
        e.head_sha = "h2"
        return e
    await ctx.store.update_pr(KEY, push)
    clock.at(30)
    rec = await review_once(ctx)             # a new head: its own count
    assert (rec.fail_count, rec.last_failed_sha) == (1, "h2")
    clock.at(40)
    rec = await review_once(ctx)
    assert (rec.status, rec.fail_count, rec.notices) == ("reviewing", 2, [])
    assert rec.backoff_until(INTERVAL) == T0 + timedelta(seconds=40 + 12)

    clock.at(60)
    rec = await review_once(ctx)             # max_attempts = 3: visible give-up
    assert (rec.status, rec.fail_count) == ("gave_up", 3)
    assert rec.notices == [Notice(trigger="acct:auto:h2", what="the review of head h2",
                                  error=rec.last_error, created_at=T0 + timedelta(seconds=60))]
    assert rec.backoff_until(INTERVAL) is None and rec.due_at(INTERVAL, clock()) == clock()


async def test_a_failure_of_work_that_changed_meanwhile_counts_nothing(world):
    ctx, _ = world
    await ctx.store.update_pr(KEY, lambda _: PrRecord(head_sha="h1", status="reviewing",
                                                       updated_at=T0, trigger="acct:cmd:5"))
    stale = await ctx.store.pr(KEY)

    def new_command(e: PrRecord | None) -> PrRecord:
        assert e is not None
        e.trigger = "acct:cmd:6"
        return e
    await ctx.store.update_pr(KEY, new_command)
    await ReviewProcedure(ctx).run(KEY, stale)
    rec = await ctx.store.pr(KEY)
    assert (rec.fail_count, rec.last_failed_at, rec.last_error) == (0, None, None)


def command(cid: int) -> Command:
    return Command(comment_id=cid, kind="bot", source="issue", author="a", message="hi",
                   created_at=T0)


async def test_bot_command_failures_back_off_and_give_up(world):
    ctx, clock = world
    await ctx.store.update_pr(KEY, lambda _: PrRecord(head_sha="h1", status="reviewed",
                                                       updated_at=T0,
                                                       queued=[command(5), command(7)]))
    waits = []
    for attempt, at in ((1, 0), (2, 100), (3, 200)):
        clock.at(at)
        rec = await ctx.store.pr(KEY)
        await CommandProcedure(ctx).run(KEY, rec, rec.queued[0])
        rec = await ctx.store.pr(KEY)
        if attempt < 3:
            first = rec.queued[0]
            assert (first.comment_id, first.attempts) == (5, attempt)
            assert first.last_error == "GET repos/octo/app/issues/1/comments: " + refused(ctx)
            waits.append(first.next_attempt_at - clock())
            assert rec.queued[1].attempts == 0 and rec.queued[1].next_attempt_at is None
    assert waits == [timedelta(seconds=6), timedelta(seconds=12)]
    # The third failure gives up on /bot 5 visibly; /bot 7 stays owed.
    assert [c.comment_id for c in rec.queued] == [7]
    (given_up,) = rec.notices
    assert (str(given_up.trigger), given_up.what, given_up.posted) == (
        "acct:bot:5", "the /bot command 5", False)
    assert given_up.created_at == T0 + timedelta(seconds=200)
    assert rec.due_at(INTERVAL, clock()) == clock()
