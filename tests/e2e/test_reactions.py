"""Commands are acknowledged at once: 👀 when recorded, 😕 when refused, once each; through
the real loop with the sandbox GitHub (which answers reactions like GitHub)."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.testing.scenario import REPO, build_shop

from .conftest import Deployment

pytestmark = pytest.mark.slow
BOT = "shop-review-bot"


def bot_reactions(sb, cid: int) -> set[str]:
    return {content for content, who in sb.state.reactions.get(cid, {}).items() if BOT in who}


def reaction_posts(sb) -> list:
    return [e for e in sb.log if e.method == "POST" and e.path.endswith("/reactions")]


async def test_eyes_on_recorded_commands_confused_on_refused_ones_once(tmp_path, sandbox80,
                                                                      model):
    build_shop(sandbox80, prs=3)
    st = sandbox80.state
    dep = await Deployment(tmp_path, sandbox80, model).start()
    try:
        await dep.tick()
        st.set_draft(REPO, 2, True)
        st.close_pull(REPO, 3)
        asked = st.add_issue_comment(REPO, 1, "maintainer", "/bot what did you find?")
        again = st.add_issue_comment(REPO, 1, "maintainer", "/review")
        root = st.comments_of_review(dep.reviews()[0].id)[0]
        in_thread = st.add_review_comment(REPO, 1, "maintainer", "/bot really?",
                                          path=root.path, line=root.line, in_reply_to=root.id)
        stranger = st.add_issue_comment(REPO, 1, "stranger", "/review please")
        chatter = st.add_issue_comment(REPO, 1, "maintainer", "looks good to me")
        bot = st.add_issue_comment(REPO, 1, "ci-bot[bot]", "/review", type="Bot")
        on_draft = st.add_issue_comment(REPO, 2, "maintainer", "/review")
        on_closed = st.add_issue_comment(REPO, 3, "maintainer", "/bot hello?")
        await dep.tick()
        for c in (asked, again, in_thread):
            assert bot_reactions(sandbox80, c.id) == {"eyes"}, c.body
        for c in (stranger, on_draft, on_closed):
            assert bot_reactions(sandbox80, c.id) == {"confused"}, c.body
        for c in (chatter, bot):
            assert bot_reactions(sandbox80, c.id) == set()
        assert len(reaction_posts(sandbox80)) == 6, "each added once"
        assert len(dep.reviews(2)) == 1 and len(dep.reviews(3)) == 1, "refused: nothing else"
        assert not [c for c in st.issue_comments_of(REPO, 3)
                    if c.user == BOT and "reply-to:" in c.body], "the /bot is not answered"
        await dep.restart()
        await dep.tick()
        assert len(reaction_posts(sandbox80)) == 6, "never again after a restart"
        assert not (await dep.entry()).reactions
    finally:
        await dep.stop()


async def test_a_reaction_lost_to_a_github_error_is_added_later(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    st = sandbox80.state
    dep = await Deployment(tmp_path, sandbox80, model).start()
    try:
        await dep.tick()
        asked = st.add_issue_comment(REPO, 1, "maintainer", "/bot why?")
        sandbox80.inject_error(502, path_contains="/reactions")
        await dep.tick()
        assert bot_reactions(sandbox80, asked.id) == set()
        assert [r.content for r in (await dep.entry()).reactions] == ["eyes"], "still owed"
        assert len(dep.bot_comments()) == 1, "the answer did not wait for the reaction"
        await dep.restart()
        rec = await dep.entry()
        rec.reactions[0].next_attempt_at = None   # past its backoff
        store = await dep.store()
        await store.update_pr(rec_key(), lambda e: rec)
        dep.work.scheduler.wake("demo", None)
        await dep.tick()
        assert bot_reactions(sandbox80, asked.id) == {"eyes"}
        assert not (await dep.entry()).reactions
    finally:
        await dep.stop()


def rec_key() -> str:
    from dsh_github_reviewer.core.session_key import PrRef

    return PrRef("demo", REPO, 1)
