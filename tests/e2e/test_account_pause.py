"""Rejected credentials and the MCP server's rate limit pause the account:
one clear log line, the pause in `status` and the web UI, nothing polled or run until the
pause (a long backoff) ends, and never a failed attempt or a public give-up on any PR."""

from __future__ import annotations

import logging

import httpx2
import pytest

from dsh_github_reviewer.app import ReviewerApp
from dsh_github_reviewer.app.status import status_data
from dsh_github_reviewer.core.triggers import SUMMARY_MARKER
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import BOT_TOKEN, REPO, build_shop, push_fix
from dsh_harness.testing import Fault, Reply, ScriptedModelServer
from dsh_harness.web.app import build_app

from .conftest import Deployment
from .fault_kit import Clock

pytestmark = pytest.mark.slow


def paused_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and "paused" in r.getMessage()]


def github_requests(sb) -> int:
    return len(sb.log)


async def test_a_rejected_token_pauses_the_account_until_it_works(tmp_path, sandbox80, model,
                                                                  caplog):
    caplog.set_level(logging.INFO)
    build_shop(sandbox80)
    clock = Clock(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
    try:
        await dep.tick()
        assert len(dep.reviews()) == 1
        login = sandbox80.state.tokens.pop(BOT_TOKEN)         # the token is revoked
        head = push_fix(sandbox80)
        result = await dep.tick()
        assert not result.ok and "HTTP 401" in result.errors["credentials"]
        account = await dep.account_record()
        assert account.pause == "github" and account.paused_until > clock()
        assert "GitHub rejected the token" in account.pause_reason
        [line] = paused_lines(caplog)
        assert "account demo: paused until " in line and "Bad credentials" not in line
        (status,) = await status_data(dep.harness)
        assert status["paused_until"] and "GitHub rejected the token" in status["pause_reason"]
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(
                app=build_app(dep.harness)), base_url="http://127.0.0.1") as web:
            page = (await web.get("/github-reviewer")).text
        assert "paused until" in page and "GitHub rejected the token" in page

        before = github_requests(sandbox80)
        for _ in range(3):                              # ticks during the pause: no calls, no logs
            result = await dep.tick()
            assert result.skipped and result.skipped.startswith("paused: ")
        assert github_requests(sandbox80) == before and len(paused_lines(caplog)) == 1

        clock.skip(16 * 60)                             # the pause ends, still rejected:
        await dep.tick()                                # paused again, longer
        account = await dep.account_record()
        assert account.pauses == 2 and account.paused_until > clock()
        sandbox80.state.tokens[BOT_TOKEN] = login       # fixed
        clock.skip(31 * 60)
        await dep.tick()
        account = await dep.account_record()
        assert account.paused_until is None and account.pause is None
        rec = await dep.entry()
        assert rec.status == "reviewed" and rec.head_sha == head and rec.fail_count == 0
        assert [r.commit_id for r in dep.reviews()][-1] == head and not dep.bot_comments()
    finally:
        await dep.stop()


async def test_a_rejected_model_key_pauses_the_account_and_fails_no_pr(tmp_path, sandbox80,
                                                                       caplog):
    caplog.set_level(logging.INFO)
    with ScriptedModelServer(policy=reviewer_policy) as model:
        build_shop(sandbox80, prs=2)
        clock = Clock(sandbox80)
        dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
        try:
            model.inject(*[Fault.auth() for _ in range(50)])
            for _ in range(3):
                await dep.tick()
                clock.skip(16 * 60)
            account = await dep.account_record()
            assert account.pause == "model" and "rejected the API key" in account.pause_reason
            for n in (1, 2):
                rec = await dep.entry(n)
                assert rec.status == "reviewing" and rec.fail_count == 0 and rec.notices == []
                assert dep.bot_comments(n) == [] and dep.reviews(n) == []
            # The two reviews already started, then one model request per pause that ended -
            # not one per PR per attempt.
            assert len([s for s in model.served if s.fault == "auth"]) <= 2 + 2
            assert len([m for m in paused_lines(caplog) if "account demo: paused" in m]) == 1
            with model._lock:
                model.faults.clear()                    # the key is fixed
            clock.skip(6 * 3600)
            await dep.tick()
            assert len(dep.reviews(1)) == 1 and len(dep.reviews(2)) == 1
            assert (await dep.account_record()).pause is None
        finally:
            await dep.stop()


async def test_a_paused_model_key_doubles_once_per_probe_and_the_summary_says_it_waits(
        tmp_path, sandbox80):
    """Two PRs, a rejected model key: each ended pause is probed by ONE review (one request
    to the provider) and doubles ONCE (15 min, 30 min, 1 h — not 30 min, 2 h, 6 h); each PR's
    summary says its review waits and why, never "reviewing" and never the provider's text."""
    with ScriptedModelServer(policy=reviewer_policy) as model:
        build_shop(sandbox80, prs=2)
        clock = Clock(sandbox80)
        dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
        try:
            model.inject(*[Fault.auth() for _ in range(50)])
            lengths, probes = [], []
            for _ in range(3):
                served = len(model.served)
                await dep.tick()
                probes.append(len(model.served) - served)
                account = await dep.account_record()
                lengths.append(round((account.paused_until - clock()).total_seconds() / 60))
                clock.skip((account.paused_until - clock()).total_seconds() + 1)
            assert lengths == [15, 30, 60]
            assert probes[1:] == [1, 1], "one probe per ended pause, not one per PR"
            for n in (1, 2):
                (summary,) = [c.body for c in sandbox80.state.issue_comments_of(REPO, n)
                              if SUMMARY_MARKER in c.body]
                head = sandbox80.state.pull(REPO, n).head_sha
                assert f"⏸️ **The review of `{head[:12]}` waits:** the model provider " \
                    "rejected the bot's API key." in summary
                assert "Reviewing" not in summary and "Incorrect API key" not in summary
                assert "****" not in summary
            with model._lock:
                model.faults.clear()                    # the key is fixed
            clock.skip(6 * 3600)
            await dep.tick()
            assert len(dep.reviews(1)) == 1 and len(dep.reviews(2)) == 1
            for n in (1, 2):
                (summary,) = [c.body for c in sandbox80.state.issue_comments_of(REPO, n)
                              if SUMMARY_MARKER in c.body]
                assert "waits" not in summary and "Head last reviewed" in summary
        finally:
            await dep.stop()


async def test_the_mcp_servers_rate_limit_pauses_the_account(tmp_path, sandbox80):
    state = {"armed": True}

    def policy(req):
        # The model reads the PR's files through github-mcp-server; GitHub answers its call
        # with a secondary rate limit (429). Without the files it submits nothing.
        if req.last_user_text().startswith("Flow: review"):
            tools = [m for m in req.since_last_user() if m["role"] == "tool"]
            if state["armed"] and not tools:
                sandbox80.inject_rate_limit("secondary", wait_s=600, times=1,
                                            path_contains="/pulls/1/files")
                return reviewer_policy_read(req)
            if state["armed"]:
                return Reply(content="I could not read the files.")
        return reviewer_policy(req)

    def reviewer_policy_read(req):
        return Reply(tool_calls=[("pull_request_read", {"owner": "acme", "repo": "shop",
                                                        "pullNumber": 1, "method": "get_files",
                                                        "perPage": 100})])

    with ScriptedModelServer(policy=policy) as model:
        build_shop(sandbox80)
        clock = Clock(sandbox80)
        dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
        client = ReviewerApp.of(dep.harness).connected["demo"].client
        client.clock = lambda: clock().timestamp()   # the rate limit's wait on the test clock
        try:
            await dep.tick()
            tool_results = [m["content"] for s in model.served
                            for m in s.request.get("messages", []) if m["role"] == "tool"]
            assert any("429" in str(t) or "rate limit" in str(t).lower() for t in tool_results)
            account = await dep.account_record()
            assert account.pause == "rate_limit", tool_results
            rec = await dep.entry()
            assert rec.status == "reviewing" and rec.fail_count == 0
            state["armed"] = False
            clock.skip(16 * 60)
            await dep.tick()
            assert len(dep.reviews()) == 1
        finally:
            await dep.stop()


async def test_after_the_mcp_servers_rate_limit_the_account_calls_github_only_after_the_wait(
        tmp_path, sandbox80):
    """The model goes on after github-mcp-server's 429 and submits anyway: the bot makes no
    GitHub call within the wait (not even the submit), pauses for that wait — about a minute,
    GitHub's minimum when the wait is not stated, not 15 min — and reviews after it."""
    state = {"armed": True}
    pr = {"owner": "acme", "repo": "shop", "pullNumber": 1}

    def policy(req):
        if req.last_user_text().startswith("Flow: review") and state["armed"]:
            calls = [c["function"]["name"] for m in req.since_last_user()
                     for c in m.get("tool_calls") or []]
            if not calls:
                sandbox80.inject_rate_limit("secondary", wait_s=30, times=1,
                                            path_contains="/pulls/1/files")
                return Reply(tool_calls=[("pull_request_read", {**pr, "method": "get_files"})])
            if len(calls) == 1:
                return Reply(tool_calls=[("pull_request_review_write",
                                          {**pr, "method": "create"})])
            if len(calls) == 2:
                return Reply(tool_calls=[("pull_request_review_write", {
                    **pr, "method": "submit_pending", "event": "COMMENT",
                    "body": "Reviewed what I could."})])
            return Reply(content="Done.")
        return reviewer_policy(req)

    with ScriptedModelServer(policy=policy) as model:
        build_shop(sandbox80)
        clock = Clock(sandbox80)
        dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
        client = ReviewerApp.of(dep.harness).connected["demo"].client
        client.clock = lambda: clock().timestamp()   # the rate limit's wait on the test clock
        try:
            await dep.tick()
            limited = [i for i, e in enumerate(sandbox80.log) if e.status == 429]
            assert len(limited) == 1
            after = sandbox80.log[limited[0] + 1:]
            assert after == [], f"GitHub called within the wait: {after}"
            account = await dep.account_record()
            assert account.pause == "rate_limit" and dep.reviews() == []
            wait = (account.paused_until - clock()).total_seconds()
            assert 30 <= wait <= 120, wait
            await dep.tick()
            assert sandbox80.log[limited[0] + 1:] == [], "still nothing while it lasts"
            state["armed"] = False
            clock.skip(wait + 1)
            await dep.tick()
            assert len(dep.reviews()) == 1
            assert (await dep.account_record()).pause is None
        finally:
            await dep.stop()


async def test_a_restart_tries_fixed_credentials_at_once(tmp_path, sandbox80, caplog,
                                                         capsys):
    """The docs' remedy - fix the token or key, restart - must not then wait out a backoff of
    up to 6 h: a new process tries a stored credential pause once at its first tick. Still
    rejected, it pauses again, longer; a rate limit stays (that one is GitHub's)."""
    caplog.set_level(logging.INFO)
    with ScriptedModelServer(policy=reviewer_policy) as model:
        build_shop(sandbox80)
        clock = Clock(sandbox80)
        dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
        try:
            await dep.tick()
            login = sandbox80.state.tokens.pop(BOT_TOKEN)         # revoked
            head = push_fix(sandbox80)
            await dep.tick()
            assert (await dep.account_record()).pause == "github"
            [line] = paused_lines(caplog)                         # when, then why
            assert line.startswith("account demo: paused until 20") and "restart" in line
            import argparse

            from dsh_github_reviewer.cli import cmd_status
            capsys.readouterr()
            await cmd_status(dep.harness, argparse.Namespace(json=False))
            out = capsys.readouterr().out
            assert out.count("GitHub rejected the token") == 1, out   # not again as last error
        finally:
            await dep.stop()

        # Restarted with the token still rejected: paused again, with the longer backoff.
        dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
        try:
            await dep.tick()
            account = await dep.account_record()
            assert account.pause == "github" and account.pauses == 2
            assert account.paused_until > clock()
        finally:
            await dep.stop()

        sandbox80.state.tokens[BOT_TOKEN] = login                 # fixed, then restarted
        dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
        try:
            await dep.tick()                                      # no clock skip
            account = await dep.account_record()
            assert account.pause is None and account.paused_until is None
            assert [r.commit_id for r in dep.reviews()][-1] == head
        finally:
            await dep.stop()

        # A rejected model key, fixed before a restart, is tried at once as well.
        model.inject(*[Fault.auth() for _ in range(50)])
        push_fix_again = sandbox80.state.commit("acme/shop", "feature-1",
                                                {"shop/extra.py": "X = 1\n"}, message="more")
        dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
        try:
            await dep.tick()
            assert (await dep.account_record()).pause == "model"
        finally:
            await dep.stop()
        with model._lock:
            model.faults.clear()
        dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
        try:
            await dep.tick()
            assert (await dep.account_record()).pause is None
            assert [r.commit_id for r in dep.reviews()][-1] == push_fix_again
        finally:
            await dep.stop()
