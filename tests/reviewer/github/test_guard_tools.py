"""The guarded tools with the real github-mcp-server 0.12.1 and the sandbox GitHub."""

from __future__ import annotations

import asyncio
import json

import pytest

from dsh_github_reviewer.core.triggers import Trigger
from dsh_github_reviewer.core.triggers import review_marker as marker
from dsh_github_reviewer.github.guard import Guard
from dsh_github_reviewer.github.review_submit import FindingLimits
from dsh_github_reviewer.testing import SandboxGitHub
from tests.reviewer.guard_kit import SESSION, TOKEN, Driver, begin_turn, make_repo, runtime_for

pytestmark = pytest.mark.slow
PR = {"owner": "octo", "repo": "app", "pullNumber": 1}
LINE = {"severity": "minor", "subjectType": "LINE"}
FILE = {"severity": "minor", "subjectType": "FILE"}


@pytest.fixture
def sb():
    with SandboxGitHub.on_loopback_80() as sandbox:
        sandbox.add_token("dsh-bot", TOKEN)
        make_repo(sandbox)
        yield sandbox


async def review_once(drive: Driver, lines=(5, 15), body="Two findings.") -> list:
    results = [await drive("pull_request_review_write", {**PR, "method": "create"})]
    for n in lines:
        results.append(await drive("add_comment_to_pending_review", {
            **PR, "path": "app.py", "body": f"about line {n}", **LINE,
            "line": n, "side": "RIGHT"}))
    results.append(await drive("pull_request_review_write", {
        **PR, "method": "submit_pending", "event": "COMMENT", "body": body}))
    return results


def writes(sb: SandboxGitHub):
    return [e for e in sb.log if e.method != "GET"]


async def test_reads_through_the_legacy_dialect(sb, http):
    guard, runtime = Guard(), runtime_for(sb)
    turn = await begin_turn(guard, sb, http, runtime)
    drive = Driver(guard)
    try:
        err, diff = await drive("pull_request_read", {**PR, "method": "get_diff"})
        assert not err and "+line 5 changed" in diff
        err, meta = await drive("pull_request_read", {**PR, "method": "get"})
        assert not err and '"title":"Change"' in meta
        err, files = await drive("pull_request_read", {**PR, "method": "get_files"})
        assert not err and '"filename":"new.py"' in files
        err, text = await drive("get_file_contents", {"owner": "octo", "repo": "app",
                                                      "path": "new.py"})
        assert not err and "print('hi')" in text   # the embedded resource's text
        err, msg = await drive("pull_request_read", {**PR, "method": "get_check_runs"})
        assert err and "not available on this github-mcp-server version" in msg
        err, msg = await drive("get_file_contents", {"owner": "octo", "repo": "app",
                                                     "path": "secret_config.py",
                                                     "sha": turn.scope.base_sha})
        assert err and "limited to the PR's changed files" in msg
        assert [c[0] for c in turn.calls] == ["get_pull_request_diff", "get_pull_request",
                                              "get_pull_request_files", "get_file_contents"]
        assert turn.reads == 4, "rejected calls must not use the budget"
    finally:
        await guard.end("github:default:octo:app:pr:1")



async def test_a_turn_that_answers_no_trigger_submits_no_review(sb, http):
    """The review's marker is written from the turn's typed trigger: a turn whose scope names
    none (no review was asked for) cannot post a review without one."""
    guard = Guard()
    await begin_turn(guard, sb, http, runtime_for(sb), trigger=None)
    results = await review_once(Driver(guard))
    await guard.end(SESSION)
    err, msg = results[-1]
    assert err and "answers no review request" in msg
    assert "COMMENTED" not in [r.state for r in sb.state.reviews_of("octo/app", 1)]

async def test_one_review_with_inline_comments_then_a_rereview(sb, http):
    guard, runtime = Guard(), runtime_for(sb)
    turn = await begin_turn(guard, sb, http, runtime, trigger=Trigger.auto("demo", "first"))
    results = await review_once(Driver(guard))
    assert [e for e, _ in results] == [False] * 4, results
    await guard.end("github:default:octo:app:pr:1")
    (review,) = sb.state.reviews_of("octo/app", 1)
    assert review.state == "COMMENTED" and review.commit_id == turn.scope.head_sha
    assert review.body.startswith("Two findings.")
    assert marker(Trigger.auto("demo", "first")) in review.body
    assert [(c.path, c.line, c.side) for c in sb.state.comments_of_review(review.id)] == [
        ("app.py", 5, "RIGHT"), ("app.py", 15, "RIGHT")]

    # A later push, a second review in a new turn: works (no 0.12.1 pending-review problem).
    sb.state.commit("octo/app", "feature", {"new.py": "print('hi')\nprint('more')\n"})
    await begin_turn(guard, sb, http, runtime, trigger=Trigger.auto("demo", "second"))
    drive = Driver(guard)
    results = [await drive("pull_request_review_write", {**PR, "method": "create"}),
               await drive("add_comment_to_pending_review", {
                   **PR, "path": "new.py", "body": "more?", **LINE, "line": 2,
                   "side": "RIGHT"}),
               await drive("pull_request_review_write", {
                   **PR, "method": "submit_pending", "event": "COMMENT", "body": "One more."})]
    await guard.end("github:default:octo:app:pr:1")
    assert [e for e, _ in results] == [False] * 3, results
    reviews = sb.state.reviews_of("octo/app", 1)
    assert [r.state for r in reviews] == ["COMMENTED", "COMMENTED"]
    assert not [r for r in sb.state.reviews if r.state == "PENDING"]


async def test_crash_before_submit_then_resume_posts_exactly_one(sb, http):
    guard, runtime = Guard(), runtime_for(sb)
    await begin_turn(guard, sb, http, runtime, trigger=Trigger.auto("demo", "crash"))
    drive = Driver(guard)
    await drive("pull_request_review_write", {**PR, "method": "create"})
    await drive("add_comment_to_pending_review", {**PR, "path": "app.py", "body": "x",
                                                  **LINE, "line": 5,
                                                  "side": "RIGHT"})
    # The process dies here: the draft was local, nothing is pending on GitHub.
    guard.turns.clear()
    assert sb.state.reviews_of("octo/app", 1) == []
    fresh = Guard()
    await begin_turn(fresh, sb, http, runtime, trigger=Trigger.auto("demo", "crash"))
    results = await review_once(Driver(fresh), lines=(5,), body="Resumed review.")
    assert [e for e, _ in results] == [False] * 3
    # Crash after the post but before the work record was saved: the retried turn finds the marker.
    again = Guard()
    turn = await begin_turn(again, sb, http, runtime, trigger=Trigger.auto("demo", "crash"))
    results = await review_once(Driver(again), lines=(15,), body="Would be a duplicate.")
    assert [e for e, _ in results] == [False] * 3
    assert turn.posted_now is False and turn.submitted is not None
    (review,) = sb.state.reviews_of("octo/app", 1)
    assert review.body.startswith("Resumed review.") and review.state == "COMMENTED"
    for g in (fresh, again):
        await g.end("github:default:octo:app:pr:1")


async def test_stale_pending_review_is_cleared_before_posting(sb, http):
    pr = sb.state.pull("octo/app", 1)
    sb.state.start_review("octo/app", 1, "dsh-bot", pr.head_sha)   # e.g. left by 0.12.1 tools
    guard, runtime = Guard(), runtime_for(sb)
    await begin_turn(guard, sb, http, runtime, trigger=Trigger.auto("demo", "stale"))
    results = await review_once(Driver(guard), lines=(5,))
    await guard.end("github:default:octo:app:pr:1")
    assert [e for e, _ in results] == [False] * 3
    assert [r.state for r in sb.state.reviews_of("octo/app", 1)] == ["COMMENTED"]


async def test_approve_request_changes_and_merge_never_reach_github(sb, http):
    guard, runtime = Guard(), runtime_for(sb)
    await begin_turn(guard, sb, http, runtime)
    drive = Driver(guard)
    await drive("pull_request_review_write", {**PR, "method": "create"})
    sb.reset_log()
    for args in [{**PR, "method": "submit_pending", "event": "APPROVE", "body": "ok"},
                 {**PR, "method": "submit_pending", "event": "REQUEST_CHANGES", "body": "no"},
                 {**PR, "method": "approve"}, {**PR, "method": "merge"},
                 {**PR, "method": "delete_pending"}]:
        err, _ = await drive("pull_request_review_write", args)
        assert err
    err, _ = await drive("pull_request_read", {**PR, "method": "merge"})
    assert err
    await guard.end("github:default:octo:app:pr:1")
    assert sb.log == [] and sb.state.reviews == []
    assert not sb.state.pull("octo/app", 1).merged


async def test_chat_turns_cannot_write_and_no_turn_means_no_tools(sb, http):
    guard, runtime = Guard(), runtime_for(sb)
    drive = Driver(guard)
    err, msg = await drive("pull_request_read", {**PR, "method": "get"})
    assert err and "no active review turn" in msg
    await begin_turn(guard, sb, http, runtime, flow="chat")
    for name, args in [("pull_request_review_write", {**PR, "method": "create"}),
                       ("add_comment_to_pending_review", {**PR, "path": "app.py", "body": "x",
                                                          **FILE})]:
        err, msg = await drive(name, args)
        assert err and "disabled in chat turns" in msg
    err, _ = await drive("pull_request_read", {**PR, "method": "get"})
    assert not err
    await guard.end("github:default:octo:app:pr:1")
    assert sb.state.reviews == []


async def test_read_budget_counts_executed_reads_and_says_posting_still_works(sb, http):
    guard, runtime = Guard(), runtime_for(sb)
    await begin_turn(guard, sb, http, runtime, limits=FindingLimits(read_calls=2))
    drive = Driver(guard)
    assert not (await drive("pull_request_read", {**PR, "method": "get"}))[0]
    assert (await drive("pull_request_read", {**PR, "method": "nope"}))[0]
    assert not (await drive("pull_request_read", {**PR, "method": "get_diff"}))[0]
    err, msg = await drive("pull_request_read", {**PR, "method": "get"})
    assert err and "read budget spent (2 reads, review.max_read_calls)" in msg
    assert "submit_pending" in msg and "budget of its own" in msg, "posting still works"
    # create is never budgeted: a model that read a lot can always post.
    err, msg = await drive("pull_request_review_write", {**PR, "method": "create"})
    assert not err, msg
    await guard.end("github:default:octo:app:pr:1")


async def test_thirty_reads_leave_the_posting_budget_whole(sb, http):
    """Reading and posting have separate budgets: a model that spent all 30 reads still posts
    its findings inline (one shared budget listed every one of them in the body)."""
    guard, runtime = Guard(), runtime_for(sb)
    await begin_turn(guard, sb, http, runtime, trigger=Trigger.auto("demo", "reader"),
                     limits=FindingLimits(read_calls=30, comment_calls=50))
    drive = Driver(guard)
    for _ in range(30):
        assert not (await drive("pull_request_read", {**PR, "method": "get"}))[0]
    assert (await drive("pull_request_read", {**PR, "method": "get"}))[0], "reads are spent"
    results = await review_once(drive, lines=(5, 15), body="Read everything.")
    assert all(not err for err, _ in results), results
    await guard.end("github:default:octo:app:pr:1")
    (review,) = sb.state.reviews_of("octo/app", 1)
    assert len(sb.state.comments_of_review(review.id)) == 2, "both inline"
    assert "posting budget" not in review.body


async def test_forty_findings_on_a_thirty_comment_budget_are_all_posted_or_listed(sb, http):
    """Every finding past the posting budget is listed in the review body and create/submit
    are never refused: 40 drafted → 40 on the PR (inline or listed)."""
    guard, runtime = Guard(), runtime_for(sb)
    await begin_turn(guard, sb, http, runtime, trigger=Trigger.auto("demo", "forty"),
                     limits=FindingLimits(read_calls=30, comment_calls=25))
    drive = Driver(guard)
    for _ in range(5):
        assert not (await drive("pull_request_read", {**PR, "method": "get"}))[0]
    assert not (await drive("pull_request_review_write", {**PR, "method": "create"}))[0]
    for i in range(40):
        err, msg = await drive("add_comment_to_pending_review", {
            **PR, "path": "app.py", **LINE, "line": 5, "side": "RIGHT",
            "body": f"finding number {i:02d}"})
        assert not err, msg
    assert "listed in the review body" in msg
    err, msg = await drive("pull_request_review_write", {**PR, "method": "submit_pending",
                                                         "event": "COMMENT", "body": "sum"})
    assert not err and msg == "Submitted with 40 comment(s)."
    await guard.end("github:default:octo:app:pr:1")
    (review,) = sb.state.reviews_of("octo/app", 1)
    inline = [c.body for c in sb.state.comments_of_review(review.id)]
    assert len(inline) == 25 and all(b.startswith("**[minor]** finding") for b in inline)
    posted = {i for i in range(40) if any(f"finding number {i:02d}" in b for b in inline)}
    listed = {i for i in range(40) if f"finding number {i:02d}" in review.body}
    assert posted | listed == set(range(40)) and not posted & listed
    assert "posting budget (`review.max_comment_calls`, 25) was spent" in review.body


async def test_a_finding_without_severity_is_refused_counted_and_accepted_when_resent(sb, http):
    guard, runtime = Guard(), runtime_for(sb)
    turn = await begin_turn(guard, sb, http, runtime, trigger=Trigger.auto("demo", "sev"))
    drive = Driver(guard)
    assert not (await drive("pull_request_review_write", {**PR, "method": "create"}))[0]
    args = {**PR, "path": "app.py", "body": "no severity", "subjectType": "LINE", "line": 5,
            "side": "RIGHT"}
    err, msg = await drive("add_comment_to_pending_review", args)
    assert err and "critical, major, minor, nit" in msg and turn.severity_refusals == 1
    assert turn.draft is not None and turn.draft.comments == [], "nothing half-added"
    resend = msg.split("add_comment_to_pending_review ", 1)[1].split(" — ", 1)[0]
    assert not (await drive("add_comment_to_pending_review", json.loads(resend)))[0]
    assert turn.severity_refusals == 1 and len(turn.draft.comments) == 1
    await guard.end("github:default:octo:app:pr:1")


async def test_secrets_are_redacted_from_outbound_text(sb, http):
    guard, runtime = Guard(), runtime_for(sb)
    await begin_turn(guard, sb, http, runtime, trigger=Trigger.auto("demo", "secret"))
    drive = Driver(guard)
    leak = "ghp_" + "L" * 36
    await drive("pull_request_review_write", {**PR, "method": "create"})
    await drive("add_comment_to_pending_review", {**PR, "path": "app.py", **LINE,
                                                  "line": 5, "side": "RIGHT",
                                                  "body": f"token {leak} here"})
    await drive("add_comment_to_pending_review", {**PR, "path": "new.py", **FILE,
                                                  "body": f"file note {leak}"})
    await drive("pull_request_review_write", {**PR, "method": "submit_pending",
                                              "event": "COMMENT", "body": f"sum {leak}"})
    await guard.end("github:default:octo:app:pr:1")
    (review,) = sb.state.reviews_of("octo/app", 1)
    texts = [review.body] + [c.body for c in sb.state.comments_of_review(review.id)]
    assert all(leak not in t for t in texts) and "[REDACTED_SECRET]" in review.body
    assert "`new.py`" in review.body   # FILE comments are folded into the body


async def test_discovery_runs_once_for_ten_prs_at_once(sb):
    runtime = runtime_for(sb)
    results = await asyncio.gather(*(runtime.tools(TOKEN) for _ in range(10)))
    assert runtime.discoveries == 1
    assert all("get_pull_request" in r for r in results)
    await runtime.tools(TOKEN)
    assert runtime.discoveries == 1


async def test_failed_discovery_is_retried_by_the_next_pr(sb):
    from dsh_github_reviewer.config import McpSettings
    from dsh_github_reviewer.github.mcp_host import McpError, McpRuntime

    runtime = McpRuntime(McpSettings(command="/bin/false"), sb.web_url, 5)
    with pytest.raises(McpError):
        await runtime.tools(TOKEN)
    runtime.settings = McpSettings()
    assert "get_pull_request" in await runtime.tools(TOKEN)
    assert runtime.discoveries == 2
