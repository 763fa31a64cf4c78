"""Drafts: a review still owed — after a failed attempt, or a /review recorded
just before — never runs or posts once the PR turned draft; nothing of the PR's work runs while
it is a draft; ready for review again, the owed work runs once."""

from __future__ import annotations

import asyncio

import pytest

from dsh_github_reviewer.testing.scenario import REPO, build_shop
from dsh_harness import cli

from .conftest import Deployment
from .fault_kit import Clock, no_pending_reviews, replies_to

pytestmark = pytest.mark.slow


async def test_an_owed_review_waits_while_the_pr_is_a_draft(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    clock = Clock(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
    try:
        async def broken(*args, **kwargs):
            raise RuntimeError("the runner broke")
        real, dep.runner.review = dep.runner.review, broken
        await dep.tick()
        rec = await dep.entry()
        assert rec.status == "reviewing" and rec.fail_count == 1
        dep.runner.review = real

        sandbox80.state.set_draft(REPO, 1, True)
        cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot anything?")
        clock.skip()                                    # past the backoff
        await dep.tick()
        rec = await dep.entry()
        assert rec.draft and rec.fail_count == 1, "a draft counts no attempt"
        assert rec.due_at(1.0, clock()) is None
        assert dep.reviews() == [] and model.served == []

        sandbox80.state.set_draft(REPO, 1, False)
        await dep.tick()
        rec = await dep.entry()
        assert not rec.draft and rec.status == "reviewed" and len(dep.reviews()) == 1
        assert len(replies_to(sandbox80, cmd.id)) <= 1
        assert no_pending_reviews(sandbox80)
    finally:
        await dep.stop()


async def test_work_recorded_just_before_the_pr_turned_draft_does_not_run(tmp_path, sandbox80,
                                                                           model):
    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model).start()
    try:
        await dep.tick()
        assert len(dep.reviews()) == 1
        scheduler = dep.work.scheduler
        await scheduler.stop(grace_s=0)                 # so the poll below only records
        review = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/review")
        ask = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot and now?")
        await dep.pollers["demo"].tick()                # recorded, not yet run
        rec = await dep.entry()
        assert str(rec.trigger) == f"demo:cmd:{review.id}" and len(rec.queued) == 1
        sandbox80.state.set_draft(REPO, 1, True)
        served = len(model.served)
        scheduler.start()
        await scheduler.drain("demo")                   # runs the owed work: found a draft
        rec = await dep.entry()
        assert rec.draft and rec.status == "reviewing" and len(rec.queued) == 1
        assert rec.fail_count == 0 and rec.queued[0].attempts == 0
        assert len(dep.reviews()) == 1 and len(model.served) == served
        assert replies_to(sandbox80, ask.id) == []

        sandbox80.state.set_draft(REPO, 1, False)
        await dep.tick()
        assert len(dep.reviews()) == 2 and len(replies_to(sandbox80, ask.id)) == 1
        assert (await dep.entry()).status == "reviewed"
    finally:
        await dep.stop()


@pytest.mark.parametrize("config", ["[auto_review]\ndrafts = true\n",
                                    "[auto_review]\ndrafts = false\n", None])
async def test_the_base_config_decides_whether_a_draft_is_reviewed(tmp_path, sandbox80, model,
                                                                   config, capsys):
    """auto_review.drafts = true in the base's .github/dsh-review.toml: a draft is reviewed
    automatically; otherwise not, and the base is asked once per head, not on every tick."""
    build_shop(sandbox80)
    st = sandbox80.state
    if config is not None:
        st.commit(REPO, "main", {".github/dsh-review.toml": config})
        st.pull(REPO, 1).base_sha = st.repo(REPO).branches["main"]
    st.set_draft(REPO, 1, True)
    dep = await Deployment(tmp_path, sandbox80, model).start()
    try:
        await dep.tick()
        rec = await dep.entry()
        assert rec.draft
        if config == "[auto_review]\ndrafts = true\n":
            assert rec.status == "reviewed" and len(dep.reviews()) == 1
            assert no_pending_reviews(sandbox80)
            return
        assert dep.reviews() == [] and model.served == []
        assert rec.status == "reviewing" and rec.draft_waits == rec.head_sha
        reads = len(sandbox80.requests("GET", "dsh-review.toml"))
        assert reads >= 1
        await dep.tick()
        await dep.tick()
        assert len(sandbox80.requests("GET", "dsh-review.toml")) == reads, "asked once per head"
        if config is None:
            await dep.stop()                          # status reads the store on its own
            assert await asyncio.to_thread(cli.main, ["--config", str(dep.write_config()),
                                                      "github-reviewer", "status"]) == 0
            assert "draft (waits until ready for review)" in capsys.readouterr().out
            return
        head = st.commit(REPO, "feature-1", {"shop/notes.txt": "more\n"})
        await dep.tick()
        assert (await dep.entry()).draft_waits == head and dep.reviews() == []
        st.set_draft(REPO, 1, False)
        await dep.tick()
        rec = await dep.entry()
        assert not rec.draft and rec.status == "reviewed" and len(dep.reviews()) == 1
    finally:
        await dep.stop()
