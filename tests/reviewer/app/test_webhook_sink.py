"""What a delivery records: the same PR work record a poll would write, durable before the
receiver answers — with no poll, scheduler or model running here, so whatever is in the
records after the 200 was written by the delivery itself."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from dsh_github_reviewer.app import ReviewerApp
from dsh_github_reviewer.app.webhooks import start_receivers, stop_receivers
from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import FEATURE, REPO, build_shop, model_server
from dsh_github_reviewer.work.records import PrRecord

SECRET = "sink-s3cret"
HOOK = f'enabled = true\nport = 0\nsecret = "{SECRET}"\nreconcile_interval_s = 3600'


@pytest.fixture
async def live(tmp_path):
    """A deployment whose receiver records into storage; its pollers and scheduler stay off."""
    with SandboxGitHub() as sb, model_server() as model:
        build_shop(sb, prs=1)
        dep = await Deployment(tmp_path, sb, model, webhook=HOOK).start()
        app = ReviewerApp.of(dep.harness)
        try:
            servers = await start_receivers(app, app.work.record_work())
            try:
                sb.add_hook(servers[0].url, SECRET, repo=REPO, ping=False)
                yield dep, sb
            finally:
                await stop_receivers(servers)
        finally:
            await dep.stop()
        assert model.served == []


async def settle(sb: SandboxGitHub) -> None:
    await asyncio.to_thread(sb.webhooks.wait_idle)


async def reviewed(dep: Deployment, number: int = 1, base_sha: str | None = None) -> None:
    """Seed the PR as reviewed at its current head and base (as after a first review)."""
    pull = dep.sb.state.pull(REPO, number)
    store = await dep.store()
    key = PrRef("demo", REPO, number)
    await store.update_pr(key, lambda _: PrRecord(
        head_sha=pull.head_sha, status="reviewed", updated_at=datetime.now(UTC),
        reviewed_head_sha=pull.head_sha, base_ref=pull.base_ref,
        base_sha=base_sha or pull.base_sha))


async def test_a_command_is_recorded_before_the_answer(live):
    dep, sb = live
    await reviewed(dep)
    c = sb.state.add_issue_comment(REPO, 1, "maintainer", "/bot is eval safe?")
    await settle(sb)
    (d,) = sb.webhooks.deliveries("issue_comment")
    assert d.status == 200
    rec = await dep.entry()
    assert [q.comment_id for q in rec.queued] == [c.id] and rec.processed(c.id)
    assert rec.queued[0].message == "is eval safe?" and rec.queued[0].author == "maintainer"


async def test_filters_are_the_polls(live):
    dep, sb = live
    await reviewed(dep)
    st = sb.state
    st.add_issue_comment(REPO, 1, "stranger", "/bot do my homework")        # not allowed
    st.add_issue_comment(REPO, 1, "maintainer", "thanks!")                  # no command
    st.add_issue_comment(REPO, 1, "shop-review-bot",                        # the bot's own
                         "/bot hello\n<!-- dsh-github-reviewer:reply-to:1 -->")
    st.add_issue_comment(REPO, 1, "ci[bot]", "/review", type="Bot")        # a bot
    await settle(sb)
    assert all(d.status == 200 for d in sb.webhooks.deliveries())
    assert (await dep.entry()).queued == []
    assert (await dep.entry()).status == "reviewed"


async def test_a_push_records_the_new_head_and_a_late_old_one_changes_nothing(live):
    dep, sb = live
    await reviewed(dep)
    st = sb.state
    sb.webhooks.drop_next(2, event="pull_request")  # hold both pushes back
    first = st.commit(REPO, "feature-1", {"shop/a.py": "a = 1\n"})
    second = st.commit(REPO, "feature-1", {"shop/a.py": "a = 2\n"})
    await settle(sb)
    old, new = sb.webhooks.deliveries("pull_request", "synchronize")
    assert json_after(old) == first and json_after(new) == second
    for d in (new, old):  # out of order, as GitHub may deliver them
        again = sb.webhooks.redeliver(d.id)
        await asyncio.to_thread(again.done.wait, 10)
        assert again.status == 200
    rec = await dep.entry()
    assert rec.head_sha == second and rec.status == "reviewing"


def json_after(d) -> str:
    return json.loads(d.body)["after"]


async def test_drafts_close_and_reopen(live):
    dep, sb = live
    st = sb.state
    st.commit(REPO, "feature-2", dict(FEATURE))
    st.open_pull(REPO, "feature-2", title="wip", author="alice", draft=True)
    await settle(sb)
    # Recorded as a draft: the review procedure reads whether the base reviews drafts.
    entry = await dep.entry(2)
    assert entry.draft and entry.status == "reviewing"
    st.set_draft(REPO, 2, False)
    await settle(sb)
    entry = await dep.entry(2)
    assert not entry.draft and entry.status == "reviewing"
    st.close_pull(REPO, 2)
    await settle(sb)
    assert (await dep.entry(2)).closed_seen_at is not None
    assert not (await dep.entry(2)).merged, "closed, not merged"
    st.reopen_pull(REPO, 2)
    await settle(sb)
    assert (await dep.entry(2)).closed_seen_at is None
    # A merge says so in the closed event: the web UI shows the PR as merged, not closed.
    st.close_pull(REPO, 2, merged=True)
    await settle(sb)
    entry = await dep.entry(2)
    assert entry.closed_seen_at is not None and entry.merged
    st.reopen_pull(REPO, 2)
    await settle(sb)
    assert not (await dep.entry(2)).merged
    assert all(d.status == 200 for d in sb.webhooks.deliveries())


async def test_a_retarget_owes_a_review_of_the_same_head_once(live):
    dep, sb = live
    st = sb.state
    st.commit(REPO, "release", {"RELEASE.md": "1.0\n"})
    await reviewed(dep)
    head = st.pull(REPO, 1).head_sha
    st.change_base(REPO, 1, "release")
    await settle(sb)
    (d,) = sb.webhooks.deliveries("pull_request", "edited")
    assert d.status == 200
    rec = await dep.entry()
    base = st.pull(REPO, 1).base_sha
    assert rec.status == "reviewing" and rec.head_sha == head
    assert str(rec.trigger) == f"demo:retarget:{head}:{base}"
    # A redelivery, or a title edit, changes nothing more.
    again = sb.webhooks.redeliver(d.id)
    await asyncio.to_thread(again.done.wait, 10)
    assert again.status == 200
    assert (await dep.entry()).trigger == rec.trigger


async def test_a_lost_retarget_is_caught_by_the_poll_with_the_same_trigger(live):
    dep, sb = live
    st = sb.state
    st.commit(REPO, "release", {"RELEASE.md": "1.0\n"})
    await reviewed(dep)
    head = st.pull(REPO, 1).head_sha
    sb.webhooks.drop_next(1, event="pull_request")  # the `edited` delivery is lost
    st.change_base(REPO, 1, "release")
    await settle(sb)
    assert (await dep.entry()).status == "reviewed"
    await dep.pollers["demo"].tick()  # reconciliation
    rec = await dep.entry()
    base = st.pull(REPO, 1).base_sha
    assert rec.status == "reviewing" and rec.head_sha == head and rec.base_ref == "release"
    assert str(rec.trigger) == f"demo:retarget:{head}:{base}"
    # The lost delivery arriving late owes nothing more: the same trigger, not a second one.
    (d,) = sb.webhooks.deliveries("pull_request", "edited")
    again = sb.webhooks.redeliver(d.id)
    await asyncio.to_thread(again.done.wait, 10)
    assert again.status == 200 and (await dep.entry()).model_dump() == rec.model_dump()


async def test_the_base_branch_moving_on_is_no_retarget(live):
    dep, sb = live
    # Reviewed against an older commit of the same base branch; the branch moves on again.
    await reviewed(dep, base_sha="0" * 40)
    sb.state.commit(REPO, sb.state.pull(REPO, 1).base_ref, {"NEWS.md": "more\n"})
    await settle(sb)
    await dep.pollers["demo"].tick()
    rec = await dep.entry()
    assert rec.status == "reviewed" and rec.trigger is None


async def test_a_maintainers_thread_reply_is_recorded_to_read_for_a_lesson(live):
    """A reply on a review thread is no command, but a delivery records it (as a
    poll would) when its author may teach; a stranger's is not recorded at all."""
    dep, sb = live
    await reviewed(dep)
    st = sb.state
    root = st.add_review_comment(REPO, 1, "shop-review-bot", "**[major]** a finding",
                                 path="shop/orders.py", line=5)
    reply = st.add_review_comment(REPO, 1, "maintainer", "This is intended.",
                                  path="shop/orders.py", line=5, in_reply_to=root.id)
    st.add_review_comment(REPO, 1, "stranger", "Intended, trust me.", path="shop/orders.py",
                          line=5, in_reply_to=root.id)
    await settle(sb)
    assert all(d.status == 200 for d in sb.webhooks.deliveries())
    rec = await dep.entry()
    assert [(q.comment_id, q.action, q.thread_root) for q in rec.queued] == [
        (reply.id, "teach", root.id)]
    assert rec.reactions == [], "no 👀: it was not a command"
