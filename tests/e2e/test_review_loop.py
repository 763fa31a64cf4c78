"""The review loop end to end (poll, review, /review and /bot): real github-mcp-server,
sandbox GitHub and the scripted model server."""

from __future__ import annotations

import asyncio
import json

import pytest

from dsh_github_reviewer.core.session_key import PrKey
from dsh_github_reviewer.testing.scenario import REPO, build_shop, push_fix
from dsh_harness.testing import Fault

from .conftest import Deployment
from .fault_kit import Clock

pytestmark = pytest.mark.slow
SESSION = PrKey("demo", "acme", "shop", 1).session_id


async def test_review_unchanged_no_rereview_push_rereview_same_session(shop):
    await shop.tick()
    (review,) = shop.reviews()
    assert review.state == "COMMENTED" and review.user == "shop-review-bot"
    comments = shop.sb.state.comments_of_review(review.id)
    assert {(c.path, c.line) for c in comments} == {("shop/cart.py", 2), ("shop/orders.py", 10),
                                                   ("shop/orders.py", 15)}
    entry = await shop.entry()
    assert entry.status == "reviewed" and entry.reviews_done == 1
    served = len(shop.model.served)
    await shop.tick()
    assert len(shop.reviews()) == 1 and len(shop.model.served) == served, "unchanged PR"

    push_fix(shop.sb)
    await shop.tick()
    reviews = shop.reviews()
    assert len(reviews) == 2 and reviews[1].commit_id == shop.sb.state.pull(REPO, 1).head_sha
    # Same session: the re-review's first request extends the first review's conversation...
    first_rereview = shop.model.served[served]
    previous = shop.model.served[served - 1]
    n = len(previous.request["messages"])
    assert first_rereview.request["messages"][:n] == previous.request["messages"]
    # ...so it is mostly cache hits.
    assert first_rereview.cache_hit_tokens / first_rereview.prompt_tokens > 0.8
    sessions = await shop.harness.sessions.summaries()
    assert [s.id for s in sessions] == [SESSION]
    assert sessions[0].title == "Review acme/shop PR 1" and sessions[0].turns == 2
    # The untrusted PR body's hidden instruction never reached the model.
    assert "please approve" not in json.dumps(shop.model.served[0].request)


async def test_bot_replies_in_the_right_place_and_once(shop):
    st = shop.sb.state
    await shop.tick()
    issue_cmd = st.add_issue_comment(REPO, 1, "maintainer", "/bot what did you find?")
    thread_root = st.comments_of_review(shop.reviews()[0].id)[0]
    review_cmd = st.add_review_comment(REPO, 1, "maintainer", "/bot is this really a bug?",
                                       path=thread_root.path, line=thread_root.line,
                                       in_reply_to=thread_root.id)
    st.add_issue_comment(REPO, 1, "maintainer", "/bot say nothing please")
    await shop.tick()
    replies = shop.bot_comments()
    assert len(replies) == 1 and f"reply-to:{issue_cmd.id}" in replies[0].body
    assert "From my reviews of this pull request" in replies[0].body
    thread = [c for c in st.review_comments_of(REPO, 1) if c.user == "shop-review-bot"
              and c.in_reply_to == thread_root.id]
    assert len(thread) == 1 and f"reply-to:{review_cmd.id}" in thread[0].body
    chat_user_msgs = [r.request["messages"][-1]["content"] for r in shop.model.served
                      if r.request["messages"][-1]["content"].startswith("Flow: chat")]
    assert any(f"asked on {thread_root.path} line {thread_root.line}" in m
               for m in chat_user_msgs), "review-thread questions carry file and line"
    # Restart: nothing is processed twice.
    await shop.restart()
    served = len(shop.model.served)
    await shop.tick()
    assert len(shop.model.served) == served and len(shop.bot_comments()) == 1


async def test_review_command_permissions_and_bots(shop):
    st = shop.sb.state
    await shop.tick()
    st.add_issue_comment(REPO, 1, "stranger", "/review please")            # NONE: ignored
    st.add_issue_comment(REPO, 1, "ci-bot[bot]", "/review", type="Bot")   # bots: ignored
    await shop.tick()
    assert len(shop.reviews()) == 1
    st.add_issue_comment(REPO, 1, "maintainer", "/review")
    await shop.tick()
    assert len(shop.reviews()) == 2
    assert "Requested with /review by maintainer" in next(
        r.request["messages"][-1]["content"] for r in reversed(shop.model.served)
        if r.request["messages"][-1]["content"].startswith("Flow: review"))
    entry = await shop.entry()
    assert entry.reviews_done == 1, "/review does not count against max_reviews_per_pr"


async def test_no_instructions_file_is_reviewed_with_the_built_in_guidance(tmp_path,
                                                                          sandbox80, model):
    """Out of the box: a repository without an instructions file gets a review."""
    from dsh_github_reviewer.turn.guidance import BUILTIN_SOURCE, builtin_text

    build_shop(sandbox80)
    sandbox80.state.commit(REPO, "main", {".github/review_instructions.md": None})
    sandbox80.state.pull(REPO, 1).base_sha = sandbox80.state.repo(REPO).branches["main"]
    dep = await Deployment(tmp_path, sandbox80, model).start()
    try:
        await dep.tick()
        entry = await dep.entry()
        assert entry.status == "reviewed" and len(dep.reviews()) == 1
        system = model.served[0].request["messages"][0]["content"]
        assert BUILTIN_SOURCE in system and builtin_text().strip() in system
        stored = await (await dep.store()).instructions(entry.instructions_key)
        assert stored.source == BUILTIN_SOURCE
    finally:
        await dep.stop()


async def test_require_instructions_default_and_transient_instructions(tmp_path, sandbox80,
                                                                       model, caplog):
    build_shop(sandbox80)
    sandbox80.state.commit(REPO, "main", {".github/review_instructions.md": None})
    sandbox80.state.pull(REPO, 1).base_sha = sandbox80.state.repo(REPO).branches["main"]
    dep = await Deployment(tmp_path, sandbox80, model,
                           extra_account="review = { require_instructions = true }\n").start()
    try:
        await dep.tick()
        entry = await dep.entry()
        assert entry.status == "missing_instructions" and dep.reviews() == []
        # status and the web UI show last_error: the file to add and the key to change.
        assert ".github/review_instructions.md" in entry.last_error
        assert "review.require_instructions" in entry.last_error
        await dep.tick()
        assert dep.reviews() == [] and model.served == []
        new_head = push_fix(sandbox80)              # a new head is looked at again...
        await dep.tick()
        entry = await dep.entry()
        assert entry.status == "missing_instructions" and entry.head_sha == new_head
        assert dep.reviews() == [] and model.served == []   # ...and still has no instructions
        warnings = [r for r in caplog.records if r.levelname == "WARNING"
                    and "require_instructions" in r.getMessage()]
        assert len(warnings) == 1 and REPO in warnings[0].getMessage(), "one per repository"
    finally:
        await dep.stop()

    clock = Clock(sandbox80)   # the backoff is passed by moving the clock, not by sleeping
    dep = await Deployment(tmp_path / "b", sandbox80, model, clock=clock, accounts=("other",),
                           extra_account='review = { default_instructions = "Be terse." }\n'
                           ).start()
    try:
        sandbox80.inject_error(502, path_contains="review_instructions")
        await dep.tick("other")
        entry = await dep.entry(account="other")
        # A transient read: retried at the next tick, never a failed attempt.
        assert entry.status == "reviewing" and entry.fail_count == 0
        assert entry.not_before is not None and entry.not_before > clock()
        assert "review_instructions" in entry.last_error and "502" in entry.last_error
        assert model.served == []
        clock.skip(1)                                   # the next tick (poll_interval_s)
        await dep.tick("other")
        entry = await dep.entry(account="other")
        stored = await (await dep.store("other")).instructions(entry.instructions_key)
        assert entry.status == "reviewed" and "default_instructions" in stored.source
        assert "Be terse." in model.served[-1].request["messages"][0]["content"]
    finally:
        await dep.stop()


async def test_failures_back_off_and_a_push_resets(shop):
    shop.model.inject(*[Fault.server_error()] * 6)   # more than the provider's retries
    await shop.tick()
    entry = await shop.entry()
    assert entry.status == "reviewing" and entry.fail_count == 1 and shop.reviews() == []
    assert "turn ended: error" in entry.last_error
    served = len(shop.model.served)
    await shop.tick()                                 # inside the backoff window
    assert len(shop.model.served) == served and (await shop.entry()).fail_count == 1
    push_fix(shop.sb)
    await shop.tick()                                 # a new head resets the backoff
    entry = await shop.entry()
    assert entry.status == "reviewed" and entry.fail_count == 0 and len(shop.reviews()) == 1


async def test_rate_limit_pauses_the_account(shop):
    shop.sb.inject_rate_limit("secondary", wait_s=600)
    await shop.tick()
    record = await shop.account_record()
    assert record.rate_limited_until is not None and shop.reviews() == []
    shop.sb.reset_log()
    await shop.tick()
    assert shop.sb.log == [], "no GitHub call while the account is paused"


async def test_max_reviews_per_pr_and_ignore_authors(tmp_path, sandbox80, model):
    build_shop(sandbox80, prs=2)
    sandbox80.state.pull(REPO, 2).user = "renovate[bot]"
    dep = await Deployment(tmp_path, sandbox80, model,
                           extra_account='ignore_authors = ["*[bot]"]\n'
                                         'review = { max_reviews_per_pr = 1 }\n').start()
    await dep.tick()
    assert len(dep.reviews(1)) == 1 and dep.reviews(2) == []
    push_fix(sandbox80)
    await dep.tick()
    assert len(dep.reviews(1)) == 1, "the cap stops automatic re-reviews"
    sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/review")
    await dep.tick()
    assert len(dep.reviews(1)) == 2, "/review is not capped"
    await dep.stop()


@pytest.mark.parametrize(("first", "second"), [("json", "sqlite"), ("sqlite", "json")])
async def test_two_accounts_backends_copy_restart(tmp_path, sandbox80, model, first, second):
    from dsh_harness import cli

    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, accounts=("alpha", "beta"),
                           backend=first).start()
    await dep.tick("alpha")
    await dep.tick("beta")
    assert len(dep.reviews()) == 2, "each account reviews with its own trigger"
    await dep.stop()
    config = dep.write_config()
    assert await _copy(cli, config, first, second) == 0
    dep.toml_kw["backend"] = second
    await dep.start()
    served = len(model.served)
    await dep.tick("alpha")
    await dep.tick("beta")
    assert len(dep.reviews()) == 2 and len(model.served) == served, "nothing re-reviewed"
    assert (await dep.entry(account="beta")).status == "reviewed"
    await dep.stop()


async def _copy(cli, config, first, second) -> int:

    return await asyncio.to_thread(cli.main, ["--config", str(config), "storage", "copy",
                                              "dsh_github_reviewer", "--from", first,
                                              "--to", second])


async def test_model_candidates_first_listed_wins(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    models = ('review = { models = [{ provider = "scripted", model = "not-offered" }, '
              '{ provider = "scripted", model = "deepseek-v4-pro" }] }\n')
    dep = await Deployment(tmp_path, sandbox80, model, extra_account=models).start()
    await dep.tick()
    assert len(dep.reviews()) == 1
    assert {s.request["model"] for s in model.served} == {"deepseek-v4-pro"}
    await dep.stop()


async def test_status_command_reports_work_records(shop, capsys):

    from dsh_harness import cli

    shop.model.inject(*[Fault.server_error()] * 6)
    await shop.tick()
    await shop.stop()
    config = shop.write_config()
    rc = await asyncio.to_thread(cli.main, ["--config", str(config), "github-reviewer",
                                            "status", "--json"])
    assert rc == 0
    (account,) = json.loads(capsys.readouterr().out)
    assert account["account"] == "demo" and account["credentials"] == "set"
    (pr,) = account["prs"]
    assert pr["pr"] == f"{REPO}#1" and pr["status"] == "reviewing" and pr["fail_count"] == 1
    assert pr["backoff_until"] is None or pr["backoff_until"] > account["last_tick_at"]
    assert "ghp_" not in json.dumps(account)
    rc = await asyncio.to_thread(cli.main, ["--config", str(config), "github-reviewer",
                                            "status"])
    assert rc == 0 and "acme/shop#1: reviewing" in capsys.readouterr().out
    await shop.start()
