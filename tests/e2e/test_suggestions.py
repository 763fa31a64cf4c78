"""GitHub suggestions end to end: real github-mcp-server, sandbox GitHub (which validates them
like GitHub), scripted model."""

from __future__ import annotations

import re

import pytest

from dsh_github_reviewer.testing.scenario import FEATURE, REPO, build_shop
from dsh_harness.testing import ModelRequest, Reply

from .conftest import Deployment

pytestmark = pytest.mark.slow
BIG_BASE = "".join(f"v{i} = {i}\n" for i in range(1, 31))
BIG_HEAD = BIG_BASE.replace("v2 = 2\n", "v2 = 2 + 0\n").replace("v28 = 28\n", "v28 = 28 + 0\n")


async def test_a_sure_one_line_fix_is_posted_as_a_suggestion_that_applies(shop):
    await shop.tick()
    (review,) = shop.reviews()
    st = shop.sb.state
    (cart,) = [c for c in st.comments_of_review(review.id) if c.path == "shop/cart.py"]
    assert "```suggestion\n" in cart.body
    fixed = st.applied_suggestion(cart)
    assert fixed == FEATURE["shop/cart.py"].replace("len(items) + 1)", "len(items))")
    assert "```suggestion" in shop.model.served[0].request["messages"][0]["content"], \
        "the system prompt says when a suggestion helps"


def suggester(req: ModelRequest) -> Reply:
    """A suggestion across two hunks first; after the guard's error, one inside a hunk."""
    user = req.last_user_text()
    m = re.search(r"Review only ([^/\s]+)/([^#\s]+)#(\d+)", user)
    if not user.startswith("Flow: review") or m is None:
        return Reply(content="?")
    pr = {"owner": m.group(1), "repo": m.group(2), "pullNumber": int(m.group(3))}
    turn = req.since_last_user()
    results = [x["content"] for x in turn if x["role"] == "tool"]
    comment = {**pr, "path": "big.py", "severity": "nit", "subjectType": "LINE",
               "side": "RIGHT", "startSide": "RIGHT"}
    if not results:
        return Reply(tool_calls=[
            ("pull_request_review_write", {**pr, "method": "create"}),
            ("add_comment_to_pending_review", {
                **comment, "startLine": 2, "line": 28,
                "body": "Drop the `+ 0`.\n\n```suggestion\nv2 = 2\n```"})])
    if len(results) == 2:
        return Reply(tool_calls=[("add_comment_to_pending_review", {
            **comment, "startLine": 2, "line": 3,
            "body": "Drop the `+ 0`.\n\n```suggestion\nv2 = 2\nv3 = 3\n```"})])
    if len(results) == 3:
        return Reply(tool_calls=[("pull_request_review_write", {
            **pr, "method": "submit_pending", "event": "COMMENT", "body": "One nit."})])
    return Reply(content="Done.")


async def test_a_suggestion_github_would_reject_is_refused_before_github(tmp_path, sandbox80,
                                                                         model):
    build_shop(sandbox80)
    st = sandbox80.state
    st.commit(REPO, "main", {"big.py": BIG_BASE})
    st.pull(REPO, 1).base_sha = st.repo(REPO).branches["main"]
    st.commit(REPO, "feature-1", {"big.py": BIG_HEAD})
    model.policy = suggester
    dep = await Deployment(tmp_path, sandbox80, model).start()
    try:
        await dep.tick()
        assert (await dep.entry()).status == "reviewed"
    finally:
        await dep.stop()
    results = [x["content"] for x in model.served[-1].request["messages"] if x["role"] == "tool"]
    assert ("a ```suggestion must replace lines inside one diff hunk; lines 2-28 is not. Lines "
            "of big.py a suggestion may replace (RIGHT side, one hunk each): 1-5, 25-30"
            ) in results[1]
    assert not [e for e in sandbox80.log if e.status == 422], "nothing invalid reached GitHub"
    (review,) = dep.reviews()
    (comment,) = st.comments_of_review(review.id)
    assert (comment.start_line, comment.line) == (2, 3)
    assert st.applied_suggestion(comment) == BIG_HEAD.replace("v2 = 2 + 0\n", "v2 = 2\n")
