"""Fix tracking end to end: the re-review names the threads a push fixed, the bot resolves
exactly those (GraphQL resolveReviewThread) with one "Fixed in <sha>" reply — never a person's
thread, never one a person unresolved — and a re-run after a crash does nothing twice."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.app import ReviewerApp
from dsh_github_reviewer.core.triggers import BotIdentity, fixed_threads
from dsh_github_reviewer.pr_output.threads import resolve_fixed
from dsh_github_reviewer.testing.scenario import FEATURE, PUSH, REPO, build_shop, push_fix
from tests.e2e.conftest import Deployment
from tests.e2e.fault_kit import Clock

pytestmark = pytest.mark.slow
BOT = "shop-review-bot"
ME = BotIdentity(BOT)


def fixed_replies(st, root_id: int) -> list:
    return [c for c in st.review_comments_of(REPO, 1)
            if c.in_reply_to == root_id and c.user == BOT and c.body.startswith("Fixed in ")]


async def test_fixed_threads_are_resolved_once_and_never_a_persons(shop):
    st = shop.sb.state
    await shop.tick()
    (first,) = shop.reviews()
    roots = {c.path + ":" + str(c.line): c for c in st.comments_of_review(first.id)}
    sql = roots["shop/orders.py:10"]
    person = st.add_review_comment(REPO, 1, "maintainer", "Please also add a docstring.",
                                   path="shop/orders.py", line=15)
    head = push_fix(shop.sb)                       # parameterizes the SQL query
    await shop.tick()
    second = shop.reviews()[1]
    user = shop.model.served[-1].request["messages"]
    told = next(m["content"] for m in reversed(user) if m["role"] == "user")
    assert f"- thread {sql.id}: shop/orders.py:10:" in told, "the open threads are listed"
    assert fixed_threads(second, ME) == [sql.id]
    assert st.resolved_threads == {sql.id: BOT}, "exactly the fixed one, never a person's"
    (reply,) = fixed_replies(st, sql.id)
    assert reply.body.startswith(f"Fixed in {head}.")
    assert person.id not in st.resolved_threads

    # A re-run after a crash between the post and the record changes nothing...
    client = ReviewerApp.of(shop.harness).connected["demo"].client
    second = (await client.list_reviews("acme", "shop", 1))[1]
    assert await resolve_fixed(client, "acme", "shop", 1, second, [sql.id], ME) == []
    assert len(fixed_replies(st, sql.id)) == 1
    # ...and one between the resolve and the reply posts the reply once.
    st.review_comments.remove(reply)
    await resolve_fixed(client, "acme", "shop", 1, second, [sql.id], ME)
    await resolve_fixed(client, "acme", "shop", 1, second, [sql.id], ME)
    assert len(fixed_replies(st, sql.id)) == 1
    # The bot never resolves a person's thread, even when told to.
    assert await resolve_fixed(client, "acme", "shop", 1, second, [person.id], ME) == []
    assert person.id not in st.resolved_threads

    # A person unresolves the fixed thread: the bot never resolves it again.
    st.unresolve_thread(sql.id, "maintainer")
    st.commit(REPO, "feature-1", {"shop/orders.py": PUSH["shop/orders.py"] + "\n# more\n"})
    await shop.tick()
    assert len(shop.reviews()) == 3
    told = next(m["content"] for m in reversed(shop.model.served[-1].request["messages"])
                if m["role"] == "user")
    assert f"thread {sql.id}:" not in told.split("<your_open_threads>")[-1]
    third = (await client.list_reviews("acme", "shop", 1))[2]
    assert await resolve_fixed(client, "acme", "shop", 1, third, [sql.id], ME) == []
    assert sql.id not in st.resolved_threads and len(fixed_replies(st, sql.id)) == 1
    assert FEATURE   # the scenario's files are the ones the rules fire on


# Each names the GitHub request of the resolution that fails: the resolve mutation, or the
# "Fixed in" reply after the thread was resolved.
@pytest.mark.parametrize(("path", "body"), [("graphql", "resolveReviewThread"),
                                            ("/replies", None)])
async def test_a_github_error_while_resolving_is_retried_until_done(tmp_path, sandbox80, model,
                                                                    path, body):
    st = sandbox80.state
    build_shop(sandbox80)
    clock = Clock(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
    await dep.tick()
    (first,) = dep.reviews()
    sql = next(c for c in st.comments_of_review(first.id) if c.line == 10)
    head = push_fix(sandbox80)
    sandbox80.inject_error(502, path_contains=path, body_contains=body)
    await dep.tick()
    second = dep.reviews()[1]
    assert fixed_threads(second, ME) == [sql.id]
    assert not sandbox80.faults, "the 502 hit the resolution"
    rec = await dep.entry()
    assert rec.status == "reviewed" and rec.reviewed_head_sha == head, "the review stands"
    (owed,) = rec.fixes
    assert owed.review_id == second.id and owed.attempts == 1 and "502" in owed.last_error
    assert owed.next_attempt_at > clock(), "with backoff, not retried at once"
    if body == "resolveReviewThread":
        assert sql.id not in st.resolved_threads and not fixed_replies(st, sql.id)

    await dep.tick()                                  # still inside the backoff: untouched
    assert (await dep.entry()).fixes == rec.fixes
    clock.skip()
    await dep.tick()
    assert st.resolved_threads == {sql.id: BOT}
    (reply,) = fixed_replies(st, sql.id)
    assert reply.body.startswith(f"Fixed in {head}.")
    assert (await dep.entry()).fixes == []
    clock.skip()
    await dep.tick()
    assert len(fixed_replies(st, sql.id)) == 1 and len(dep.reviews()) == 2
    await dep.stop()


async def test_the_rereview_names_what_it_fixed_and_the_bot_answer_leaves_it_out(shop):
    """The demo's flow: review, push a fix, re-review, then ``/bot``. The re-review says which
    finding it fixed by place and first words (never an internal thread id), and the answer
    no longer lists that finding among the open ones."""
    st = shop.sb.state
    await shop.tick()
    (first,) = shop.reviews()
    sql = next(c for c in st.comments_of_review(first.id)
               if c.path == "shop/orders.py" and c.line == 10)
    sql_words = sql.body.split("** ", 1)[1].split("\n", 1)[0]
    push_fix(shop.sb)
    await shop.tick()
    second = shop.reviews()[1]
    assert "**Fixed since the last review:**\n\n- `shop/orders.py:10` (" + sql_words[:40] \
        in second.body
    visible = second.body.split("<!--", 1)[0]
    assert str(sql.id) not in visible, "no internal thread id shown to people"
    st.add_issue_comment(REPO, 1, "maintainer", "/bot what is still open?")
    await shop.tick()
    (answer,) = [c.body for c in st.issue_comments_of(REPO, 1)
                 if c.user == BOT and "You asked" in c.body]
    assert "shop/orders.py` line 10" not in answer, answer
    assert "shop/orders.py` line 15" in answer, "the open ones are still listed"
