"""The webhook trigger end to end: the sandbox GitHub delivers to the real receiver of a running
reviewer (real github-mcp-server, scripted model). Polling is set to an hour, so only a delivery
can make the bot act within the test's time; reconciliation is the poll that catches the rest."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time

import httpx2
import pytest

from dsh_github_reviewer.app import ReviewerApp
from dsh_github_reviewer.app.status import status_data
from dsh_github_reviewer.sources import poll as poller
from dsh_github_reviewer.sources.webhook import deliveries
from dsh_github_reviewer.testing.scenario import REPO, build_shop, push_fix
from dsh_harness.testing import ScriptedModelServer
from dsh_harness.web.app import build_app
from tests.waiting import wait_until

from .conftest import Deployment
from .test_crash_resume import dsh, kill_when, slow_policy

pytestmark = pytest.mark.slow
SECRET = "webhook-s3cret"


def hook_block(reconcile_s: float = 3600, port: int = 0) -> str:
    return (f'enabled = true\nhost = "127.0.0.1"\nport = {port}\nsecret = "{SECRET}"\n'
            f"reconcile_interval_s = {reconcile_s}")


async def running(tmp_path, sb, model, reconcile_s: float = 3600) -> tuple[Deployment, str]:
    """A reviewer started like `dsh run` (pollers and receiver), and its hook URL."""
    dep = Deployment(tmp_path, sb, model, poll_interval_s=3600, webhook=hook_block(reconcile_s))
    await dep.start()
    await dep.harness.startup()
    app = ReviewerApp.of(dep.harness)
    (server,) = app.webhooks
    # The first reconciliation tick runs at start; wait for it so later work is the hook's.
    await wait_until(lambda: sb.requests("GET", "/repos/acme/shop/pulls"))
    return dep, server.url


async def shutdown(dep: Deployment) -> None:
    await dep.harness.shutdown()
    await dep.stop()


def bot_replies(sb) -> list:
    return [c for c in sb.state.issue_comments_of(REPO, 1)
            if c.user == "shop-review-bot" and "reply-to:" in c.body]


async def test_open_push_bot_and_retarget_are_answered_from_deliveries(tmp_path, sandbox80, model):
    build_shop(sandbox80, prs=0)
    dep, url = await running(tmp_path, sandbox80, model)
    try:
        sandbox80.add_hook(url, SECRET, repo=REPO)
        st = sandbox80.state
        st.commit(REPO, "feature-1", {"shop/cart.py": "def f(x):\n    return x[0]\n"})
        st.open_pull(REPO, "feature-1", title="Cart", body="b", author="alice")
        await wait_until(lambda: len(dep.reviews()) == 1)
        push_fix(sandbox80)
        await wait_until(lambda: len(dep.reviews()) == 2)
        heads = [r.commit_id for r in dep.reviews()]
        assert heads[1] == st.pull(REPO, 1).head_sha and heads[0] != heads[1]
        st.add_issue_comment(REPO, 1, "maintainer", "/bot what changed?")
        await wait_until(lambda: len(bot_replies(sandbox80)) == 1)
        # Retargeted to another base branch: the same head is reviewed against it, once.
        st.commit(REPO, "release", {"RELEASE.md": "1.0\n"})
        st.change_base(REPO, 1, "release")
        await wait_until(lambda: len(dep.reviews()) == 3)
        assert dep.reviews()[2].commit_id == heads[1]
        # The bot's own reply was delivered too, and did nothing.
        await asyncio.to_thread(sandbox80.webhooks.wait_idle)
        await asyncio.sleep(0.5)
        assert len(bot_replies(sandbox80)) == 1 and len(dep.reviews()) == 3
        assert (await dep.entry()).reviews_done == 3, "a retarget's review counts"
        assert all(d.status == 200 for d in sandbox80.webhooks.deliveries())
        (account,) = await status_data(dep.harness)
        hook = account["webhook"]
        assert hook["listen"] == "127.0.0.1:0/github/webhook"
        assert hook["reconcile_interval_s"] == 3600 and hook["last_delivery_at"]
        assert hook["since_start"]["recorded"] >= 3 and hook["since_start"]["rejected"] == 0
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(
                app=build_app(dep.harness)), base_url="http://127.0.0.1") as web:
            page = (await web.get("/github-reviewer")).text
        assert "Webhook on 127.0.0.1:0/github/webhook" in page and "recorded" in page
    finally:
        await shutdown(dep)


async def test_redelivery_and_bad_signature_do_nothing(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    dep, url = await running(tmp_path, sandbox80, model)
    try:
        await wait_until(lambda: len(dep.reviews()) == 1)  # the first tick's review
        sandbox80.add_hook(url, SECRET, repo=REPO)
        forged = sandbox80.add_hook(url, "not-the-secret", repo=REPO, ping=False)
        st = sandbox80.state
        st.add_issue_comment(REPO, 1, "maintainer", "/bot is eval safe?")
        await wait_until(lambda: len(bot_replies(sandbox80)) == 1)
        await asyncio.to_thread(sandbox80.webhooks.wait_idle)
        # Only deliveries already answered: the bot's own later posts emit more of them.
        rejected = [d for d in sandbox80.webhooks.deliveries()
                    if d.hook_id == forged.id and d.done.is_set()]
        assert rejected and all(d.status == 401 for d in rejected)
        domain = await dep.harness.storage.domain(deliveries.DOMAIN)
        remembered = await domain.table(deliveries.TABLE).all()
        assert not {d.id for d in rejected} & set(remembered)
        (bot,) = [d for d in sandbox80.webhooks.deliveries("issue_comment")
                  if d.hook_id != forged.id and "/bot is eval" in d.body.decode()]
        again = sandbox80.webhooks.redeliver(bot.id)
        await asyncio.to_thread(again.done.wait, 10)
        assert again.status == 200
        served = len(model.served)
        await asyncio.sleep(1.0)
        assert len(model.served) == served and len(bot_replies(sandbox80)) == 1
    finally:
        await shutdown(dep)


async def test_a_dropped_delivery_is_caught_by_reconciliation(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    dep, url = await running(tmp_path, sandbox80, model, reconcile_s=3)
    try:
        await wait_until(lambda: len(dep.reviews()) == 1)
        sandbox80.add_hook(url, SECRET, repo=REPO, ping=False)
        sandbox80.webhooks.drop_next(1, event="issue_comment")
        sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot and the cart?")
        await wait_until(lambda: len(bot_replies(sandbox80)) == 1, limit_s=30)
        (lost,) = [d for d in sandbox80.webhooks.deliveries("issue_comment")
                   if json.loads(d.body)["comment"]["user"]["login"] == "maintainer"]
        assert lost.status is None and lost.error and "dropped" in lost.error
        # Another whole reconciliation (the next listing after this point, then one more, so
        # the first has finished its work): still one reply.
        listed = len(sandbox80.requests("GET", "/repos/acme/shop/pulls"))
        await wait_until(lambda: len(sandbox80.requests("GET", "/repos/acme/shop/pulls"))
                         >= listed + 2, what="two more reconciliation passes")
        assert len(bot_replies(sandbox80)) == 1
    finally:
        await shutdown(dep)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_delivery_during_a_sigkill_is_recovered_after_restart(tmp_path, sandbox80):
    """`dsh run` is SIGKILLed in the middle of a /bot a delivery started; another /bot is
    delivered while it is down (refused). After the restart, the first tick (reconciliation)
    answers both, once each."""
    build_shop(sandbox80)
    port = free_port()
    with ScriptedModelServer(policy=slow_policy) as model:
        config = Deployment(tmp_path, sandbox80, model, poll_interval_s=3600,
                            webhook=hook_block(port=port)).write_config()
        proc = dsh(config)
        try:
            deadline = time.monotonic() + 90
            while len(sandbox80.state.reviews_of(REPO, 1)) < 1:
                assert proc.poll() is None and time.monotonic() < deadline, "no first review"
                time.sleep(0.05)
            sandbox80.add_hook(f"http://127.0.0.1:{port}/github/webhook", SECRET, repo=REPO)
            sandbox80.webhooks.wait_idle()
            assert [d.status for d in sandbox80.webhooks.deliveries("ping")] == [200]
            st = sandbox80.state
            st.add_issue_comment(REPO, 1, "maintainer", "/bot first question?")
            kill_when(proc, lambda: any("first question" in str(s.request)
                                        for s in model.served), "the /bot turn")
            st.add_issue_comment(REPO, 1, "maintainer", "/bot second question?")
            sandbox80.webhooks.wait_idle()
            refused = sandbox80.webhooks.deliveries("issue_comment")[-1]
            assert refused.status is None and refused.error
            assert bot_replies(sandbox80) == []
            proc = dsh(config)
            deadline = time.monotonic() + 90
            while len(bot_replies(sandbox80)) < 2:
                assert proc.poll() is None and time.monotonic() < deadline, "not recovered"
                time.sleep(0.05)
            time.sleep(1.0)
            replies = bot_replies(sandbox80)
            assert len(replies) == 2 and len(sandbox80.state.reviews_of(REPO, 1)) == 1
            assert all(c.body.count("reply-to:") == 1 for c in replies)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)


async def test_a_delivery_that_cannot_be_recorded_asks_for_an_early_poll(tmp_path, sandbox80,
                                                                         model, monkeypatch):
    """GitHub fails the read of the PR: the receiver answers 500 (nothing remembered, GitHub
    does not retry) and the next poll comes early instead of after reconcile_interval_s."""
    monkeypatch.setattr(poller, "RECONCILE_SOON_S", 0.5)
    build_shop(sandbox80)
    dep, url = await running(tmp_path, sandbox80, model)  # reconciliation every hour
    try:
        await wait_until(lambda: len(dep.reviews()) == 1)
        # The review's after-post work reads the PR too, and ends with the summary's edit:
        # wait for it, or it may take the one injected error meant for the delivery's read.
        await wait_until(lambda: sandbox80.requests("PATCH", f"/repos/{REPO}/issues/comments/"),
                         what="the summary's edit after the review")
        sandbox80.add_hook(url, SECRET, repo=REPO, ping=False)
        sandbox80.inject_error(502, times=1, path_contains=f"/repos/{REPO}/pulls/1")
        sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot and the cart?")
        await wait_until(lambda: len(bot_replies(sandbox80)) == 1, limit_s=30)
        (failed,) = [d for d in sandbox80.webhooks.deliveries("issue_comment")
                     if json.loads(d.body)["comment"]["user"]["login"] == "maintainer"]
        assert failed.status == 500
        domain = await dep.harness.storage.domain(deliveries.DOMAIN)
        assert failed.id not in await domain.table(deliveries.TABLE).all()
    finally:
        await shutdown(dep)


async def test_a_command_is_acknowledged_while_its_prs_review_runs(tmp_path, sandbox80):
    """👀 comes from the delivery, not after the PR's ordered work: a /bot that arrives while
    a slow review of the same PR runs gets its reaction before that review is posted."""
    from dsh_github_reviewer.testing.reviewer_model import reviewer_policy

    def very_slow(req):
        reply = reviewer_policy(req)
        reply.chunk_delay_s = 0.3
        return reply

    build_shop(sandbox80, prs=0)
    with ScriptedModelServer(policy=very_slow) as model:
        dep, url = await running(tmp_path, sandbox80, model)
        try:
            sandbox80.add_hook(url, SECRET, repo=REPO)
            st = sandbox80.state
            st.commit(REPO, "feature-1", {"shop/cart.py": "def f(x):\n    return x[0]\n"})
            st.open_pull(REPO, "feature-1", title="Cart", body="b", author="alice")
            await wait_until(lambda: len(model.served) >= 1)   # the review turn runs
            asked = st.add_issue_comment(REPO, 1, "maintainer", "/bot status?")
            await wait_until(lambda: "shop-review-bot" in st.reactions.get(asked.id, {}).get(
                "eyes", set()), limit_s=30)
            assert dep.reviews() == [], "acknowledged before the running review finished"
            await wait_until(lambda: len(bot_replies(sandbox80)) == 1, limit_s=120)
        finally:
            await shutdown(dep)


async def test_a_command_on_a_closed_pr_gets_confused_from_the_delivery(tmp_path, sandbox80,
                                                                       model):
    build_shop(sandbox80, prs=0)
    dep, url = await running(tmp_path, sandbox80, model)
    try:
        sandbox80.add_hook(url, SECRET, repo=REPO)
        st = sandbox80.state
        st.commit(REPO, "feature-1", {"shop/cart.py": "def f(x):\n    return x[0]\n"})
        st.open_pull(REPO, "feature-1", title="Cart", body="b", author="alice")
        await wait_until(lambda: len(dep.reviews()) == 1)
        st.close_pull(REPO, 1)
        asked = st.add_issue_comment(REPO, 1, "maintainer", "/bot still there?")
        await wait_until(lambda: "shop-review-bot" in st.reactions.get(asked.id, {}).get(
            "confused", set()), limit_s=30)
        assert bot_replies(sandbox80) == []
    finally:
        await shutdown(dep)
