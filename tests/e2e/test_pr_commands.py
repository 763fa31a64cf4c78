"""PR commands through the real loop (poller, runner, guard, real github-mcp-server,
sandbox GitHub, scripted model): ``/bot pause`` stops automatic reviews of one PR until
``/bot resume`` (commands still answered, the pause survives a restart), ``/review full``
gives the whole prepared diff instead of the interdiff, ``/bot help`` lists the commands; each
is acknowledged with 👀."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.app.status import status_data
from dsh_github_reviewer.core.triggers import reply_marker
from dsh_github_reviewer.testing.scenario import REPO, build_shop, push_fix

from .conftest import Deployment

pytestmark = pytest.mark.slow
BOT = "shop-review-bot"


def eyes(sb, cid: int) -> bool:
    return BOT in sb.state.reactions.get(cid, {}).get("eyes", set())


def reply_to(dep, cid: int) -> str:
    found = [c.body for c in dep.bot_comments() if reply_marker(cid) in c.body]
    assert len(found) == 1, f"one reply to {cid}: {found}"
    return found[0]


def review_users(model) -> list[str]:
    """The user message of each review turn the model was asked, in order."""
    out: list[str] = []
    for s in model.served:
        users = [m["content"] for m in s.request["messages"] if m["role"] == "user"]
        if users and users[-1].startswith("Flow: review") and (not out or out[-1] != users[-1]):
            out.append(users[-1])
    return out


async def test_pause_resume_and_full_review(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    st = sandbox80.state
    dep = await Deployment(tmp_path, sandbox80, model).start()
    try:
        await dep.tick()
        assert len(dep.reviews()) == 1
        pause = st.add_issue_comment(REPO, 1, "maintainer", "/bot pause")
        await dep.tick()
        assert eyes(sandbox80, pause.id)
        assert "paused" in reply_to(dep, pause.id)
        push_fix(sandbox80)
        await dep.tick()
        assert len(dep.reviews()) == 1, "paused: the push is not reviewed"
        rec = await dep.entry()
        assert rec.paused_by == "maintainer" and rec.waits_for_resume
        (pr,) = [p for a in await status_data(dep.harness) for p in a["prs"]]
        assert pr["paused_by"] == "maintainer"
        assert "automatic reviews paused by maintainer" in pr["status_text"]

        helped = st.add_issue_comment(REPO, 1, "maintainer", "/bot help")
        await dep.restart()
        await dep.tick()
        assert eyes(sandbox80, helped.id), "commands are still answered while paused"
        text = reply_to(dep, helped.id)
        for word in ("/bot pause", "/bot resume", "/review full", "/bot learn",
                     "/bot lessons", "/bot forget"):
            assert word in text
        assert len(dep.reviews()) == 1, "the pause survived the restart"
        asked = len(review_users(model))

        resume = st.add_issue_comment(REPO, 1, "maintainer", "/bot resume")
        await dep.tick()
        assert eyes(sandbox80, resume.id)
        assert len(dep.reviews()) == 2, "resumed: the owed head is reviewed"
        users = review_users(model)
        assert len(users) == asked + 1
        assert "+++ b/shop/cart.py" not in users[-1], "an interdiff"
        assert (await dep.entry()).paused_by is None

        full = st.add_issue_comment(REPO, 1, "maintainer", "/review full")
        await dep.tick()
        assert eyes(sandbox80, full.id)
        assert len(dep.reviews()) == 3
        last = review_users(model)[-1]
        assert "/review full" in last
        assert "+++ b/shop/cart.py" in last, "the whole prepared diff, unchanged files too"
        assert not (await dep.entry()).full_review, "a full review is one review"
    finally:
        await dep.stop()


async def test_pause_does_not_stop_review_command(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    st = sandbox80.state
    dep = await Deployment(tmp_path, sandbox80, model).start()
    try:
        await dep.tick()
        st.add_issue_comment(REPO, 1, "maintainer", "/bot pause")
        await dep.tick()
        push_fix(sandbox80)
        await dep.tick()
        assert len(dep.reviews()) == 1
        st.add_issue_comment(REPO, 1, "maintainer", "/review")
        await dep.tick()
        assert len(dep.reviews()) == 2, "/review reviews a paused PR"
        assert (await dep.entry()).paused_by == "maintainer", "and it stays paused"
        stranger = st.add_issue_comment(REPO, 1, "stranger", "/bot resume")
        await dep.tick()
        assert (await dep.entry()).paused_by == "maintainer", "a stranger cannot resume"
        assert BOT in st.reactions.get(stranger.id, {}).get("confused", set())
    finally:
        await dep.stop()
