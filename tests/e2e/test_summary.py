"""One living summary comment per PR, through the real loop: created once, edited in place on
every review and /bot answer, "reviewing <sha>…" while a review runs, findings with severity
and status (open, fixed, dismissed), cost; no model tokens spent on it."""

from __future__ import annotations

import re

import pytest

from dsh_github_reviewer.core.triggers import SUMMARY_MARKER
from dsh_github_reviewer.testing.scenario import REPO, push_fix

pytestmark = pytest.mark.slow
BOT = "shop-review-bot"


def summaries(st) -> list:
    return [c for c in st.issue_comments_of(REPO, 1) if SUMMARY_MARKER in c.body]


def row(body: str, where: str) -> str:
    return next(line for line in body.split("\n") if f"`{where}`" in line and "|" in line)


async def test_one_summary_after_three_reviews_and_a_bot_answer(shop):
    st = shop.sb.state
    edits: list[str] = []
    edit = st.edit_issue_comment
    st.edit_issue_comment = lambda c, body: (edits.append(body), edit(c, body))[1]
    await shop.tick()
    (summary,) = summaries(st)
    assert summary.user == BOT
    head = st.pull(REPO, 1).head_sha
    body = summary.body
    assert f"Head last reviewed: `{head[:12]}` (1 review so far)" in body
    assert "- `shop/cart.py` — added (+2/-0)" in body and "- `shop/orders.py` — modified" in body
    assert "| critical | 🔴 open |" in row(body, "shop/orders.py:10")
    assert "| major | 🔴 open |" in row(body, "shop/cart.py:2")
    assert "Findings (3 open, 0 fixed, 0 dismissed)" in body
    assert re.search(r"Cost of this PR's reviews and answers: \$\d+\.\d{4} · prompt cache hit",
                     body)
    assert "`/review`" in body and "`/bot <question>`" in body

    served, edited = len(shop.model.served), len(edits)
    assert edited == 1, "created as 'reviewing…', edited once when the review was posted"
    st.add_issue_comment(REPO, 1, "maintainer", "/bot what did you find?")
    await shop.tick()
    chat_requests = len(shop.model.served) - served
    assert chat_requests == 1, "the summary costs no model request"
    assert [c.id for c in summaries(st)] == [summary.id] and len(edits) == edited + 1

    new_head = push_fix(shop.sb)   # fixes the SQL injection
    await shop.tick()
    assert any(f"Reviewing `{new_head[:12]}`…" in b for b in edits), "shown while it runs"
    body = summaries(st)[0].body
    assert "| ✅ fixed |" in row(body, "shop/orders.py:10")
    assert f"Head last reviewed: `{new_head[:12]}` (2 reviews so far)" in body

    eval_root = next(c for c in st.review_comments_of(REPO, 1)
                     if c.user == BOT and c.path == "shop/orders.py" and c.line == 15
                     and c.in_reply_to is None)
    st.resolve_thread(eval_root.id, "maintainer")   # a person dismisses the finding
    st.add_issue_comment(REPO, 1, "maintainer", "/review")
    shop.sb.reset_log()
    await shop.tick()
    assert len(shop.reviews()) == 3
    # The thread states the review turn read are the summary's too (the review resolved
    # nothing): GraphQL is asked once for the whole review, not again for the summary.
    assert len(shop.sb.requests("POST", "graphql")) == 1
    (final,) = summaries(st)
    assert final.id == summary.id, "edited in place, never a second"
    assert "| ⚪ dismissed |" in row(final.body, "shop/orders.py:15")
    assert "(3 reviews so far)" in final.body
    for r in shop.model.served:
        assert SUMMARY_MARKER not in str(r.request), "never sent to the model"


async def test_summary_off_posts_none(tmp_path, sandbox80, model):
    from dsh_github_reviewer.testing.scenario import build_shop

    from .conftest import Deployment

    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model,
                           extra_account="review = { summary = false }\n").start()
    try:
        await dep.tick()
        assert len(dep.reviews()) == 1 and summaries(sandbox80.state) == []
    finally:
        await dep.stop()


async def test_the_pr_page_shows_findings_with_severity_and_status(shop):
    """The web UI's PR page (from the session log only): each finding's severity and whether
    it is open, fixed (the bot resolved it after a push) or dismissed (a person resolved it)."""
    from dsh_github_reviewer.core.session_key import PrKey
    from dsh_github_reviewer.web import view as web_view
    from dsh_github_reviewer.web.facts import update as update_facts

    st = shop.sb.state
    await shop.tick()
    push_fix(shop.sb)
    await shop.tick()
    eval_root = next(c for c in st.review_comments_of(REPO, 1)
                     if c.user == BOT and c.line == 15 and c.in_reply_to is None)
    st.resolve_thread(eval_root.id, "maintainer")
    st.add_issue_comment(REPO, 1, "maintainer", "/review")
    await shop.tick()
    sid = PrKey("demo", "acme", "shop", 1).session_id
    log = await shop.harness.sessions.read(sid)
    facts: dict = {}
    update_facts(log.header, facts, log.events)
    page = web_view.build(log.header, log.events, facts)
    status = {(f["path"], f["line"]): (f["severity"], f["status"])
              for f in page["context"]["findings"]}
    assert status[("shop/orders.py", 10)] == ("critical", "fixed")
    assert status[("shop/orders.py", 15)] == ("critical", "dismissed")
    assert status[("shop/cart.py", 2)] == ("major", "open")


async def test_only_a_maintainers_thumbs_down_dismisses_a_finding(shop):
    """Anyone can react: the PR's author (alice) 👎ing the bot's critical finding, or a stranger
    doing so, leaves it open — in the summary comment and on the PR page (whose statuses the
    noise figures and the needs-attention view share); a maintainer's 👎 dismisses it. Who
    reacted is read once per changed 👎 count, not on every review."""
    from dsh_github_reviewer.core.session_key import PrKey
    from dsh_github_reviewer.web import view as web_view
    from dsh_github_reviewer.web.facts import update as update_facts

    st = shop.sb.state
    await shop.tick()

    def root(path: str, line: int):
        return next(c for c in st.review_comments_of(REPO, 1) if c.user == BOT
                    and c.path == path and c.line == line and c.in_reply_to is None)

    sql, evil, cart = (root("shop/orders.py", 10), root("shop/orders.py", 15),
                       root("shop/cart.py", 2))
    st.react(sql.id, "alice", "-1")          # the PR's author
    st.react(evil.id, "mallory", "-1")       # a stranger, who also comments
    st.add_issue_comment(REPO, 1, "mallory", "looks fine to me")
    st.react(cart.id, "maintainer", "-1")    # a MEMBER, who asks for a review
    st.add_issue_comment(REPO, 1, "maintainer", "/review")
    await shop.tick()
    assert len(shop.reviews()) == 2
    (summary,) = summaries(st)
    assert "| 🔴 open |" in row(summary.body, "shop/orders.py:10")
    assert "| 🔴 open |" in row(summary.body, "shop/orders.py:15")
    assert "| ⚪ dismissed |" in row(summary.body, "shop/cart.py:2")

    sid = PrKey("demo", "acme", "shop", 1).session_id
    log = await shop.harness.sessions.read(sid)
    facts: dict = {}
    update_facts(log.header, facts, log.events)
    page = web_view.build(log.header, log.events, facts)
    status = {(f["path"], f["line"]): f["status"] for f in page["context"]["findings"]}
    assert status[("shop/orders.py", 10)] == "open"
    assert status[("shop/orders.py", 15)] == "open"
    assert status[("shop/cart.py", 2)] == "dismissed"

    def lists() -> int:
        return sum(1 for e in shop.sb.log if e.method == "GET"
                   and e.path.endswith("/reactions"))
    before = lists()
    st.add_issue_comment(REPO, 1, "maintainer", "/review")
    await shop.tick()
    assert len(shop.reviews()) == 3 and lists() == before, "unchanged counts: no re-read"


async def test_a_collaborator_who_only_reacted_dismisses_a_finding(shop):
    """carol can push to the repository but never wrote on the PR: her 👎 dismisses (her
    association is read from her repository permission); rita can only read, and alice wrote
    the PR, so their 👎 leave findings open. Each unknown voter's permission is asked once:
    later refreshes ask nothing."""
    from dsh_github_reviewer.core.session_key import PrKey
    from dsh_github_reviewer.github import votes
    from dsh_github_reviewer.web import view as web_view
    from dsh_github_reviewer.web.facts import update as update_facts

    votes.forget()   # another test's sandbox may have had this address
    st = shop.sb.state
    st.set_permission(REPO, "carol", "write")
    st.set_permission(REPO, "rita", "read")
    await shop.tick()

    def root(path: str, line: int):
        return next(c for c in st.review_comments_of(REPO, 1) if c.user == BOT
                    and c.path == path and c.line == line and c.in_reply_to is None)

    def asked() -> list[str]:
        return sorted(e.path.split("/")[-2] for e in shop.sb.log
                      if e.method == "GET" and e.path.endswith("/permission"))

    st.react(root("shop/orders.py", 10).id, "alice", "-1")   # the PR's author
    st.react(root("shop/orders.py", 15).id, "rita", "-1")    # read-only
    st.react(root("shop/cart.py", 2).id, "carol", "-1")      # can push; wrote nothing
    st.add_issue_comment(REPO, 1, "maintainer", "/review")
    await shop.tick()
    assert len(shop.reviews()) == 2
    (summary,) = summaries(st)
    assert "| 🔴 open |" in row(summary.body, "shop/orders.py:10")
    assert "| 🔴 open |" in row(summary.body, "shop/orders.py:15")
    assert "| ⚪ dismissed |" in row(summary.body, "shop/cart.py:2")
    assert all(c.user in (BOT, "maintainer") for c in st.issue_comments_of(REPO, 1))

    log = await shop.harness.sessions.read(PrKey("demo", "acme", "shop", 1).session_id)
    facts: dict = {}
    update_facts(log.header, facts, log.events)
    page = web_view.build(log.header, log.events, facts)
    status = {(f["path"], f["line"]): f["status"] for f in page["context"]["findings"]}
    assert status[("shop/orders.py", 10)] == "open"
    assert status[("shop/orders.py", 15)] == "open"
    assert status[("shop/cart.py", 2)] == "dismissed"
    assert asked() == ["carol", "rita"], "once each; never the author or a known commenter"

    st.add_issue_comment(REPO, 1, "maintainer", "/review")
    await shop.tick()
    assert len(shop.reviews()) == 3 and asked() == ["carol", "rita"]
    (summary,) = summaries(st)
    assert "| ⚪ dismissed |" in row(summary.body, "shop/cart.py:2")
