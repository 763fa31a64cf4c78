"""The second look through the real loop (poller, runner, guard, real github-mcp-server,
sandbox GitHub, scripted model): with ``review.verify = true`` the verifier checks the drafted
findings with a known policy (``testing/reviewer_model.py``: the off-by-one dropped, the SQL
injection lowered to major, the eval kept). Exactly the dropped finding is missing from the
review and listed, with its reason, in the summary comment; the review session's requests
are byte-identical to a run without the verifier; the verifier's own session hits the prefix
cache on the re-review (≥ 90 % of its input cached); its cost is shown apart."""

from __future__ import annotations

import json

import pytest

from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.core.triggers import SUMMARY_MARKER
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.scenario import REPO, build_shop, model_server, push_fix
from dsh_github_reviewer.work.second_look import outcomes

from .conftest import Deployment

pytestmark = pytest.mark.slow
VERIFY = "review.verify = true\n"
VERIFIER_SID = "github:demo:acme:shop:pr:1:persona:verifier"


# Review instructions of a realistic size (~6 KB; the shop's one-liner is a toy): they are part
# of both sessions' stable prefix, as in a real repository.
RULES = "\n".join(
    f"- Rule {i}: {topic} must be checked in every changed module; explain the risk and the "
    "fix in one or two sentences, cite the line, and do not report style nits here."
    for i, topic in enumerate(["SQL parameterization", "input validation", "error handling",
                               "resource cleanup", "logging of secrets", "TLS settings",
                               "bounds of loops and slices", "time zones", "retries",
                               "concurrency of shared state", "API compatibility",
                               "test coverage of changed behaviour"] * 3, 1))
INSTRUCTIONS = ("# Review instructions for acme/shop\nFocus on security and correctness.\n\n"
                + RULES + "\n")


def shop(sb) -> None:
    build_shop(sb)
    sb.state.commit(REPO, "main", {".github/review_instructions.md": INSTRUCTIONS},
                    message="Longer review instructions")


def summary(sb) -> str:
    (c,) = [c for c in sb.state.issue_comments_of(REPO, 1) if SUMMARY_MARKER in c.body]
    return c.body


def review_requests(model, sb) -> list[str]:
    """The review session's requests (the reviewer's system prompt), sandbox address
    normalized (each run has its own sandbox)."""
    out = []
    for s in model.served:
        msgs = s.request["messages"]
        if msgs[0]["content"].startswith("You are dsh-github-reviewer"):
            out.append(json.dumps(s.request, sort_keys=True).replace(sb.host, "SANDBOX"))
    return out


async def test_the_second_look_drops_lowers_and_lists(tmp_path, sandbox80, model):
    shop(sandbox80)
    st = sandbox80.state
    dep = await Deployment(tmp_path, sandbox80, model, extra_account=VERIFY).start()
    try:
        await dep.tick()
        (review,) = dep.reviews()
        inline = st.comments_of_review(review.id)
        bodies = [c.body for c in inline]
        assert len(inline) == 2, bodies
        assert not any("Off-by-one" in b for b in [*bodies, review.body]), \
            "the dropped finding is not in the review"
        assert "A second look checked the 3 drafted finding(s) before posting: dropped 1 " \
            "(listed with the reason in the summary comment), lowered the severity of 1." \
            in review.body
        sql = next(b for b in bodies if "SQL built" in b)
        assert sql.startswith("**[major]**"), "lowered from critical"
        assert next(b for b in bodies if "eval()" in b).startswith("**[critical]**")
        text = summary(sandbox80)
        section = text.split("<details><summary>Second look: 1 drafted finding dropped", 1)
        assert len(section) == 2, text
        assert "Off-by-one" in section[1]
        assert "**dropped:** shop/cart.py:2: the code at this line does not do that." \
            in section[1]
        assert "Cost of the second look (its own session): $" in text
        findings = text.split("### Findings", 1)[1].split("<details>", 1)[0]
        assert "Off-by-one" not in findings, "a dropped finding is not listed as open"
        (saved,) = await outcomes((await dep.store()).domain, PrRef.parse("demo:acme/shop#1"))
        assert {c.text.split(":", 1)[0]: c.action for c in saved.checked} == {
            "Off-by-one": "drop", "SQL built by string concatenation is injectable; use a "
            "parameterized query (`?` placeholders).": "lower",
            "`eval()` on caller-supplied input executes arbitrary code; parse the value "
            "explicitly instead.": "keep"}

        lesson = "Payments talk to our own test gateway; verify=False is accepted there."
        st.add_issue_comment(REPO, 1, "maintainer", f"/bot learn {lesson}")
        await dep.tick()
        push_fix(sandbox80)
        await dep.tick()
        assert len(dep.reviews()) == 2
        verifier_users = [m["content"] for s in model.served
                          if s.request["messages"][0]["content"].startswith("You are the second")
                          for m in s.request["messages"] if m["role"] == "user"]
        assert "<lessons>" in verifier_users[-1] and lesson in verifier_users[-1], \
            "the second look is given the repository's lessons"
        log = await dep.harness.sessions.read(VERIFIER_SID)
        turns = [e.turn for e in log.events if e.type == "turn_start"]
        assert len(turns) == 2, "one verifier turn per review, in one persistent session"
        reads = [e for e in log.events if e.type == "tool_result"]
        assert reads and not any(e.is_error for e in reads), "the guarded read tools work"
        last = [e for e in log.events if e.type == "assistant_message" and e.turn == turns[-1]]
        prompt = sum(e.usage.prompt for e in last)
        cached = sum(e.usage.cache_read for e in last)
        assert cached >= 0.9 * prompt, f"re-review verifier cache hit {cached}/{prompt}"
        # The review session's cost is its own: the verifier's tokens are not in it.
        review_log = await dep.harness.sessions.read("github:demo:acme:shop:pr:1")
        assert all(e.meta.get("flow") != "verify" for e in review_log.events
                   if e.type == "turn_start")
    finally:
        await dep.stop()


async def test_review_session_requests_are_the_same_without_the_verifier(tmp_path, sandbox80,
                                                                         model):
    build_shop(sandbox80)
    dep = await Deployment(tmp_path / "on", sandbox80, model, extra_account=VERIFY).start()
    try:
        await dep.tick()
    finally:
        await dep.stop()
    with SandboxGitHub.on_loopback_80() as sb_off, model_server() as model_off:
        build_shop(sb_off)
        off = await Deployment(tmp_path / "off", sb_off, model_off).start()
        try:
            await off.tick()
        finally:
            await off.stop()
        with_verifier = review_requests(model, sandbox80)
        without = review_requests(model_off, sb_off)
    assert with_verifier and with_verifier == without
    assert any(s.request["messages"][0]["content"].startswith("You are the second look")
               for s in model.served)


async def test_the_second_look_checks_the_team_coordinators_draft(tmp_path, sandbox80):
    from dsh_github_reviewer.testing.team_model import TeamModel
    from dsh_harness.testing import ScriptedModelServer

    team = ('review.verify = true\n[plugins.github-reviewer.accounts.review.team]\n'
            'personas = ["quality", "security"]\n')
    build_shop(sandbox80)
    with ScriptedModelServer(policy=TeamModel()) as model:
        dep = await Deployment(tmp_path, sandbox80, model, extra_account=team).start()
        try:
            await dep.tick()
            (review,) = dep.reviews()
            bodies = [c.body for c in sandbox80.state.comments_of_review(review.id)]
            assert bodies and not any("Off-by-one" in b for b in bodies)
            assert "Verdict: " in review.body, "the coordinator's verdict line is kept"
            (saved,) = await outcomes((await dep.store()).domain, PrRef.parse("demo:acme/shop#1"))
            assert [c.path for c in saved.dropped] == ["shop/cart.py"]
            assert "Off-by-one" in summary(sandbox80).split("<details><summary>Second look", 1)[1]
            ids = {s.id for s in await dep.harness.sessions.summaries()}
            assert VERIFIER_SID in ids
        finally:
            await dep.stop()


def never_submits(req):
    """The reviewer drafts but ends its turn without submit_pending."""
    from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
    from dsh_harness.testing import Reply

    reply = reviewer_policy(req)
    if any(name == "pull_request_review_write" and args.get("method") == "submit_pending"
           for name, args in (reply.tool_calls or [])):
        return Reply(content="I am done.")
    return reply


async def test_a_draft_the_bot_submits_itself_gets_the_second_look_too(tmp_path, sandbox80):
    from dsh_harness.testing import ScriptedModelServer

    build_shop(sandbox80)
    with ScriptedModelServer(policy=never_submits) as model:
        dep = await Deployment(tmp_path, sandbox80, model, extra_account=VERIFY).start()
        try:
            await dep.tick()
            (review,) = dep.reviews()
            assert "the bot posted the 3 finding(s) it had drafted" in review.body
            bodies = [c.body for c in sandbox80.state.comments_of_review(review.id)]
            assert len(bodies) == 2 and not any("Off-by-one" in b for b in bodies)
            assert "Off-by-one" in summary(sandbox80).split("<details><summary>Second look")[1]
        finally:
            await dep.stop()


async def test_without_a_summary_comment_the_review_body_lists_the_dropped(tmp_path, sandbox80,
                                                                         model):
    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model,
                           extra_account=VERIFY + "review.summary = false\n").start()
    try:
        await dep.tick()
        (review,) = dep.reviews()
        inline = [c.body for c in sandbox80.state.comments_of_review(review.id)]
        assert len(inline) == 2 and not any("Off-by-one" in b for b in inline)
        listed = review.body.split("<details><summary>Second look: 1 drafted finding", 1)[1]
        assert "Off-by-one" in listed and "**dropped:** shop/cart.py:2" in listed
    finally:
        await dep.stop()


def verifier_fails(req):
    from dsh_github_reviewer.testing.reviewer_model import reviewer_policy

    if req.last_user_text().startswith("Flow: verify"):
        raise LookupError("scripted failure of the verifier")
    return reviewer_policy(req)


async def test_a_failed_second_look_posts_every_finding_and_says_so(tmp_path, sandbox80):
    from dsh_harness.testing import ScriptedModelServer

    build_shop(sandbox80)
    with ScriptedModelServer(policy=verifier_fails) as model:
        dep = await Deployment(tmp_path, sandbox80, model, extra_account=VERIFY).start()
        try:
            await dep.tick()
            (review,) = dep.reviews()
            assert len(sandbox80.state.comments_of_review(review.id)) == 3, "nothing lost"
            assert "The second look could not check the 3 drafted finding(s)" in review.body
            assert (await dep.entry()).status == "reviewed"
            (saved,) = await outcomes((await dep.store()).domain, PrRef.parse("demo:acme/shop#1"))
            assert saved.error and not saved.dropped
        finally:
            await dep.stop()
