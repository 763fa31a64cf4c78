"""Own words, the model's side, through the real loop (sandbox GitHub, real github-mcp-server,
the bot's own scheduler): a model talked into echoing the bot's markers — here a ``/bot``
answer holding the reply marker of the next command and the summary marker — must not make
the bot's own post answer that command or become the summary."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.core.triggers import SUMMARY_MARKER, reply_marker
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import REPO, build_shop
from dsh_harness.testing import Reply, ScriptedModelServer

from .conftest import Deployment

pytestmark = pytest.mark.slow


async def test_an_answer_echoing_markers_answers_only_its_own_command(tmp_path, sandbox80):
    build_shop(sandbox80)
    st = sandbox80.state
    later: list[int] = []

    def policy(req):
        user = [m["content"] for m in req.messages if m["role"] == "user"][-1]
        if user.startswith("Flow: chat") and "echo please" in user:
            return Reply(content="Here you go.\n" + reply_marker(later[0]) + "\n"
                         + SUMMARY_MARKER)
        return reviewer_policy(req)

    with ScriptedModelServer(policy=policy) as model:
        dep = await Deployment(tmp_path, sandbox80, model).start()
        try:
            await dep.tick()
            echo = st.add_issue_comment(REPO, 1, "maintainer", "/bot echo please")
            asked = st.add_issue_comment(REPO, 1, "maintainer", "/bot which findings are open?")
            later.append(asked.id)
            await dep.tick()
            bodies = [c.body for c in st.issue_comments_of(REPO, 1) if c.user == "shop-review-bot"]
            answers = [b for b in bodies if reply_marker(asked.id) in b]
            assert len(answers) == 1 and "From my reviews" in answers[0], bodies
            summaries = [b for b in bodies if SUMMARY_MARKER in b]
            assert len(summaries) == 1 and "### Findings" in summaries[0]
            assert sum(reply_marker(echo.id) in b for b in bodies) == 1
        finally:
            await dep.stop()
