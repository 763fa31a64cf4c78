"""Fault injection: the real loop — sandbox GitHub, scripted model server, the real
github-mcp-server — with one fault at a time, each ending with nothing lost and nothing done
twice."""

from __future__ import annotations

import json

import pytest

from dsh_github_reviewer.core.session_key import PrKey
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import REPO, build_shop, push_fix
from dsh_github_reviewer.testing.team_model import TeamModel
from dsh_harness.testing import Fault, Reply, ScriptedModelServer

from .conftest import Deployment
from .fault_kit import Clock, no_pending_reviews, replies_to, reviews_with

pytestmark = pytest.mark.slow
TEAM = '''
[plugins.github-reviewer.accounts.review.team]
personas = ["quality", "security", "performance"]
'''


async def reviewed_shop(tmp_path, sb, model, **kw) -> tuple[Deployment, Clock]:
    build_shop(sb)
    clock = Clock(sb)
    dep = await Deployment(tmp_path, sb, model, clock=clock, **kw).start()
    await dep.tick()
    assert len(dep.reviews()) == 1
    return dep, clock


# Each names the first request of a tick's work that the 502 hits: the PR listing, either
# comment feed, the single-PR read, the reviews listing (already-posted check), the
# instructions file, and the PR's issue comments (the reply-marker check before a /bot).
@pytest.mark.parametrize("fragment", ["/repos/acme/shop/pulls", "/issues/comments",
                                      "/pulls/comments", "/pulls/1", "/reviews",
                                      "/contents/", "/issues/1/comments"])
async def test_a_502_on_any_single_request_loses_nothing(tmp_path, sandbox80, model, fragment):
    dep, clock = await reviewed_shop(tmp_path, sandbox80, model)
    head = push_fix(sandbox80)
    cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot anything left?")
    sandbox80.inject_error(502, path_contains=fragment)
    await dep.tick()
    for _ in range(3):   # after the backoff, whatever failed runs again
        clock.skip()
        await dep.tick()
    assert len(replies_to(sandbox80, cmd.id)) == 1, "the /bot is answered exactly once"
    assert [r.commit_id for r in dep.reviews()][1:] == [head], "the new head, reviewed once"
    rec = await dep.entry()
    assert rec.status == "reviewed" and rec.reviewed_head_sha == head and rec.queued == []
    assert no_pending_reviews(sandbox80)
    await dep.stop()


async def test_feed_marks_never_pass_an_unrecorded_command(tmp_path, sandbox80, model):
    dep, _ = await reviewed_shop(tmp_path, sandbox80, model)
    before = (await dep.account_record()).feeds["acme/shop"]
    cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot still there?")
    sandbox80.state.advance(5)
    # The review-comment feed (read after the issue feed saw the /bot) fails: the repository's
    # poll records nothing, its marks included, so the next poll reads the /bot again.
    sandbox80.inject_error(502, path_contains="/pulls/comments")
    result = await dep.tick()
    assert not result.ok and "pulls/comments" in result.errors[REPO]
    assert (await dep.account_record()).feeds["acme/shop"] == before
    assert replies_to(sandbox80, cmd.id) == []
    await dep.tick()
    assert len(replies_to(sandbox80, cmd.id)) == 1
    await dep.restart()
    await dep.tick()
    assert len(replies_to(sandbox80, cmd.id)) == 1, "recorded as done: never answered twice"
    await dep.stop()


async def test_a_failed_bot_is_retried_and_the_queue_behind_it_answered(tmp_path, sandbox80,
                                                                       model):
    # The test clock runs with real time: a backoff of a minute or more keeps the failed /bot
    # from falling due while the four chats behind it run on a loaded machine.
    dep, clock = await reviewed_shop(tmp_path, sandbox80, model, poll_interval_s=60)
    st = sandbox80.state
    model.inject(*[Fault.server_error()] * 6)   # more than the provider's retries: one chat fails
    cmds = [st.add_issue_comment(REPO, 1, "maintainer", f"/bot question {i}?") for i in range(5)]
    await dep.tick()
    rec = await dep.entry()
    (failed,) = rec.queued
    assert failed.comment_id == cmds[0].id and failed.attempts == 1 and failed.last_error
    assert all(len(replies_to(sandbox80, c.id)) == 1 for c in cmds[1:]), "the rest answered"
    await dep.tick()                              # inside its backoff: not retried yet
    assert replies_to(sandbox80, cmds[0].id) == []
    clock.skip()
    await dep.tick()
    assert all(len(replies_to(sandbox80, c.id)) == 1 for c in cmds)
    assert (await dep.entry()).queued == []
    await dep.stop()


async def test_crash_after_the_post_then_a_push_records_each_head_by_its_own_review(
        tmp_path, sandbox80, model):
    dep, clock = await reviewed_shop(tmp_path, sandbox80, model)
    first_head = sandbox80.state.pull(REPO, 1).head_sha
    cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/review")
    real = dep.runner.review

    async def post_then_crash(*args, **kwargs):
        await real(*args, **kwargs)               # the review is on GitHub...
        raise RuntimeError("process died")        # ...and its record never written
    dep.runner.review = post_then_crash
    await dep.tick()
    dep.runner.review = real
    assert len(reviews_with(sandbox80, f"demo:cmd:{cmd.id}")) == 1
    rec = await dep.entry()
    assert rec.status == "reviewing" and str(rec.trigger) == f"demo:cmd:{cmd.id}"
    assert rec.reviewed_head_sha == first_head and "process died" in rec.last_error
    await dep.restart()
    new_head = push_fix(sandbox80)
    clock.skip()
    await dep.tick()
    commits = [r.commit_id for r in dep.reviews()]
    assert commits == [first_head, first_head, new_head], "the new head got its own review"
    assert len(reviews_with(sandbox80, f"demo:cmd:{cmd.id}")) == 1, "the /review answered once"
    rec = await dep.entry()
    assert rec.status == "reviewed" and rec.reviewed_head_sha == new_head
    await dep.stop()


async def test_an_already_posted_review_on_this_head_is_taken_without_a_turn(
        tmp_path, sandbox80, model):
    dep, clock = await reviewed_shop(tmp_path, sandbox80, model)
    cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/review")
    real = dep.runner.review

    async def post_then_crash(*args, **kwargs):
        await real(*args, **kwargs)
        raise RuntimeError("process died")
    dep.runner.review = post_then_crash
    await dep.tick()
    dep.runner.review = real
    served = len(model.served)
    clock.skip()
    await dep.tick()
    assert len(model.served) == served and len(dep.reviews()) == 2
    assert (await dep.entry()).status == "reviewed"
    assert len(reviews_with(sandbox80, f"demo:cmd:{cmd.id}")) == 1
    await dep.stop()


async def test_a_missing_repository_does_not_stop_another(tmp_path, sandbox80, model, capsys):
    import asyncio

    from dsh_harness import cli

    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model,
                           repositories=("acme/gone", REPO)).start()
    result = await dep.tick()
    assert len(dep.reviews()) == 1, "acme/shop reviewed although acme/gone fails first"
    assert not result.ok and "not found" in result.errors["acme/gone"]
    account = await dep.account_record()
    assert "not found" in account.repos["acme/gone"].last_error
    assert account.repos["acme/shop"].last_error is None
    await dep.stop()
    rc = await asyncio.to_thread(cli.main, ["--config", str(dep.write_config()),
                                            "github-reviewer", "status", "--json"])
    (data,) = json.loads(capsys.readouterr().out)
    assert rc == 0 and "not found" in data["repository_state"]["acme/gone"]["last_error"]


async def test_runner_exception_and_bad_json_are_recorded_failures(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    clock = Clock(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()

    async def broken(*args, **kwargs):
        raise RuntimeError("the runner broke")
    real, dep.runner.review = dep.runner.review, broken
    await dep.tick()
    rec = await dep.entry()
    assert rec.status == "reviewing" and rec.fail_count == 1
    assert rec.last_error == "RuntimeError: the runner broke"
    assert rec.backoff_until(1.0) > clock(), "with backoff, not retried every tick"
    dep.runner.review = real
    sandbox80.inject_bad_json(path_contains="/pulls/1")
    clock.skip()
    await dep.tick()
    rec = await dep.entry()
    assert rec.fail_count == 2 and "GET repos/acme/shop/pulls/1" in rec.last_error
    assert "not valid JSON" in rec.last_error
    clock.skip()
    await dep.tick()
    assert (await dep.entry()).status == "reviewed" and len(dep.reviews()) == 1
    await dep.stop()


async def test_gives_up_visibly_once_then_review_retries(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    clock = Clock(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, clock=clock,
                           extra_account="review = { max_attempts = 2 }\n").start()
    model.inject(*[Fault.server_error()] * 12)    # two failed turns
    await dep.tick()
    clock.skip()
    await dep.tick()
    rec = await dep.entry()
    assert rec.status == "gave_up" and rec.fail_count == 2
    head = sandbox80.state.pull(REPO, 1).head_sha
    notices = [c for c in sandbox80.state.issue_comments_of(REPO, 1)
               if f"gave-up:demo:auto:{head}" in c.body]
    assert len(notices) == 1 and "`/review`" in notices[0].body
    served = len(model.served)
    for _ in range(2):
        clock.skip()
        await dep.tick()
    assert len(model.served) == served, "given up: no more turns"
    assert len([c for c in sandbox80.state.issue_comments_of(REPO, 1)
                if "gave-up:" in c.body]) == 1, "the notice is posted once"
    sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/review")
    await dep.tick()
    assert (await dep.entry()).status == "reviewed" and len(dep.reviews()) == 1
    await dep.stop()


def echoing_policy(req):
    reply = reviewer_policy(req)
    if req.last_user_text().startswith("Flow: chat"):
        return Reply(content="/bot answer yourself, please")
    return reply


async def test_a_reply_starting_with_bot_is_not_answered(tmp_path, sandbox80):
    with ScriptedModelServer(policy=echoing_policy) as model:
        dep, clock = await reviewed_shop(tmp_path, sandbox80, model)
        cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot hello")
        await dep.tick()
        assert len(replies_to(sandbox80, cmd.id)) == 1
        chats = sum(1 for s in model.served if s.request["messages"][-1]["content"]
                    .startswith("Flow: chat"))
        for _ in range(2):
            clock.skip()
            await dep.tick()
        assert sum(1 for s in model.served if s.request["messages"][-1]["content"]
                   .startswith("Flow: chat")) == chats == 1, "its own reply commands nothing"
        assert "Never begin the reply with /review or /bot" in next(
            s.request["messages"][-1]["content"] for s in model.served
            if s.request["messages"][-1]["content"].startswith("Flow: chat"))
        await dep.stop()


@pytest.mark.parametrize("team", [False, True])
async def test_a_bot_answered_in_the_log_but_not_posted_is_posted_without_a_second_turn(
        tmp_path, sandbox80, model, team):
    """The chat turn committed, then the process died before posting the reply: the retry
    posts the logged answer instead of asking the model the same question again (the
    session's history would hold it twice). With a team the coordinator answers."""
    if team:
        with ScriptedModelServer(policy=TeamModel()) as team_model:
            await _answered_then_crashed(tmp_path, sandbox80, team_model, "coordinator",
                                         extra_account=TEAM)
    else:
        await _answered_then_crashed(tmp_path, sandbox80, model, None)


async def _answered_then_crashed(tmp_path, sandbox80, model, persona, **kw) -> None:
    dep, clock = await reviewed_shop(tmp_path, sandbox80, model, **kw)
    cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot anything left?")
    real = dep.runner.chat

    async def answer_then_crash(*args, **kwargs):
        await real(*args, **kwargs)               # the turn is in the log...
        raise RuntimeError("process died")        # ...and its reply never posted
    dep.runner.chat = answer_then_crash
    await dep.tick()
    dep.runner.chat = real
    assert replies_to(sandbox80, cmd.id) == []
    served = len(model.served)
    await dep.restart()
    clock.skip()
    await dep.tick()
    assert len(replies_to(sandbox80, cmd.id)) == 1
    assert len(model.served) == served, "no second chat turn"
    log = await dep.harness.sessions.read(PrKey("demo", "acme", "shop", 1, persona).session_id)
    chats = [e for e in log.events if e.type == "turn_start" and e.meta.get("flow") == "chat"]
    assert len(chats) == 1
    await dep.stop()
