"""Findings are never lost to the tool budget or the step limit, and every one carries its
severity: real github-mcp-server, sandbox GitHub, scripted model."""

from __future__ import annotations

import re

import pytest

from dsh_github_reviewer.core import severity
from dsh_github_reviewer.core.triggers import SUMMARY_MARKER
from dsh_github_reviewer.testing.scenario import REPO, build_shop
from dsh_harness.testing import ModelRequest, Reply

from .conftest import Deployment

pytestmark = pytest.mark.slow
CALC = "".join(f"def f{i}(s):\n    return eval(s)\n\n\n" for i in range(37))


def all_findings_text(dep: Deployment) -> tuple[list[str], str]:
    (review,) = dep.reviews()
    return [c.body for c in dep.sb.state.comments_of_review(review.id)], review.body


async def test_forty_findings_with_a_thirty_comment_budget_all_posted_or_listed(
        tmp_path, sandbox80, model):
    build_shop(sandbox80)
    sandbox80.state.commit(REPO, "feature-1", {"shop/calc.py": CALC}, message="calc")
    dep = await Deployment(tmp_path, sandbox80, model,
                           extra_account="review = { max_comment_calls = 30 }\n").start()
    try:
        await dep.tick()
        assert (await dep.entry()).status == "reviewed"
        inline, body = all_findings_text(dep)
        # 37 eval() in calc.py + 3 in the shop's feature = 40 findings drafted.
        assert len(inline) == 30, "the posting budget: 30 comments inline (create is free)"
        listed = re.findall(r"^- \*\*\[(\w+)\]\*\* `([^`]+)`", body, re.M)
        assert len(listed) == 10, body
        assert "posting budget (`review.max_comment_calls`, 30) was spent" in body
        places = {c.path + ":" + str(c.line) for c in
                  dep.sb.state.comments_of_review(dep.reviews()[0].id)} | {p for _, p in listed}
        expected = {f"shop/calc.py:{2 + 4 * i}" for i in range(37)} | {
            "shop/cart.py:2", "shop/orders.py:10", "shop/orders.py:15"}
        assert places == expected, "every finding posted or listed, none twice"
        assert all(severity.parse(b)[0] in severity.SEVERITIES for b in inline)
        # The summary counts every reported finding, inline or listed in the body.
        (summary,) = [c.body for c in dep.sb.state.issue_comments_of(REPO, 1)
                      if SUMMARY_MARKER in c.body]
        assert "Findings (40 open (10 of them listed in a review body), 0 fixed" in summary
        assert summary.count("🔴 open (in the review body)") == 10
    finally:
        await dep.stop()


def endless_reader(req: ModelRequest) -> Reply:
    """Drafts two findings, then keeps reading until the agent's step limit."""
    user = req.last_user_text()
    m = re.search(r"Review only ([^/\s]+)/([^#\s]+)#(\d+)", user)
    if not user.startswith("Flow: review") or m is None:
        return Reply(content="?")
    pr = {"owner": m.group(1), "repo": m.group(2), "pullNumber": int(m.group(3))}
    turn = req.since_last_user()
    if not any(msg.get("tool_calls") for msg in turn):
        return Reply(tool_calls=[
            ("pull_request_review_write", {**pr, "method": "create"}),
            ("add_comment_to_pending_review", {
                **pr, "path": "shop/orders.py", "body": "eval on input", "severity": "critical",
                "subjectType": "LINE", "line": 15, "side": "RIGHT"}),
            ("add_comment_to_pending_review", {
                **pr, "path": "shop/cart.py", "body": "off by one", "severity": "major",
                "subjectType": "LINE", "line": 2, "side": "RIGHT"})])
    return Reply(tool_calls=[("pull_request_read", {**pr, "method": "get"})])


async def test_a_draft_is_submitted_by_the_bot_at_the_step_limit(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    model.policy = endless_reader
    dep = await Deployment(tmp_path, sandbox80, model,
                           extra_account="review = { max_tool_calls = 5 }\n").start()
    try:
        await dep.tick()
        entry = await dep.entry()
        assert entry.status == "reviewed", entry.last_error
        inline, body = all_findings_text(dep)
        assert sorted(inline) == ["**[critical]** eval on input", "**[major]** off by one"]
        assert "step limit" in body and "the 2 finding(s) it had drafted" in body
        tool_results = [m["content"] for m in model.served[-1].request["messages"]
                        if m["role"] == "tool"]
        assert any("budget spent" in t and "submit_pending" in t for t in tool_results)
        await dep.tick()
        assert len(dep.reviews()) == 1, "posted once"
    finally:
        await dep.stop()
