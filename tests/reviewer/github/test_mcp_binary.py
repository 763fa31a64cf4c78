"""The real github-mcp-server binary (0.12.1) against the sandbox on 127.0.0.N:80."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from dsh_github_reviewer.testing import SandboxGitHub

BINARY = Path(sys.executable).parent / "github-mcp-server"
TOKEN = "ghp_" + "m" * 36

pytestmark = pytest.mark.slow


@pytest.fixture
def sandbox80():
    if not BINARY.exists() and not shutil.which("github-mcp-server"):
        pytest.fail("github-mcp-server is not installed (it is a dependency of this package)")
    with SandboxGitHub.on_loopback_80() as sb:
        sb.add_token("dsh-bot", TOKEN)
        st = sb.state
        st.create_repo("octo/app", {"app.py": "def f(x):\n    return x\n", "README.md": "hi\n"})
        st.commit("octo/app", "feature",
                  {"app.py": "def f(x):\n    return x + 1\n\ndef g():\n    pass\n"})
        st.open_pull("octo/app", "feature", title="Add g", body="body", author="alice")
        yield sb


async def call_all(sb: SandboxGitHub, calls):
    params = StdioServerParameters(
        command=str(BINARY if BINARY.exists() else shutil.which("github-mcp-server")),
        args=["stdio", "--toolsets=pull_requests,repos"],
        env={"GITHUB_PERSONAL_ACCESS_TOKEN": TOKEN, "GITHUB_HOST": sb.web_url})
    results = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, args in calls:
            res = await session.call_tool(name, args)
            text = "\n".join(c.text for c in res.content if getattr(c, "text", None))
            results.append((res.is_error, text))
    return results


async def test_binary_reads_pr_diff_files_and_file(sandbox80):
    pr = sandbox80.state.pull("octo/app", 1)
    base = {"owner": "octo", "repo": "app", "pullNumber": 1}
    (get, diff, files, content) = await call_all(sandbox80, [
        ("get_pull_request", base),
        ("get_pull_request_diff", base),
        ("get_pull_request_files", base),
        ("get_file_contents", {"owner": "octo", "repo": "app", "path": "app.py",
                               "sha": pr.head_sha}),
    ])
    assert not get[0] and '"title":"Add g"' in get[1]
    assert not diff[0] and "+def g():" in diff[1] and "diff --git a/app.py b/app.py" in diff[1]
    assert not files[0] and '"filename":"app.py"' in files[1]
    assert not content[0] and "successfully downloaded text file" in content[1]


async def test_binary_pending_review_lands_in_sandbox(sandbox80):
    pr = sandbox80.state.pull("octo/app", 1)
    base = {"owner": "octo", "repo": "app", "pullNumber": 1}
    line = {"path": "app.py", "subjectType": "LINE", "side": "RIGHT"}
    results = await call_all(sandbox80, [
        ("create_pending_pull_request_review", {**base, "commitID": pr.head_sha}),
        ("add_comment_to_pending_review", {**base, **line, "line": 2, "body": "first"}),
        ("add_comment_to_pending_review", {**base, **line, "line": 4, "body": "second"}),
        ("submit_pending_pull_request_review", {**base, "event": "COMMENT", "body": "summary"}),
    ])
    assert [err for err, _ in results] == [False] * 4, results
    (review,) = sandbox80.state.reviews_of("octo/app", 1)
    assert (review.state, review.body, review.commit_id) == ("COMMENTED", "summary", pr.head_sha)
    comments = sandbox80.state.comments_of_review(review.id)
    assert [(c.path, c.line, c.body) for c in comments] == [("app.py", 2, "first"),
                                                           ("app.py", 4, "second")]


async def test_binary_0_12_1_cannot_add_to_a_second_pending_review(sandbox80):
    """Documents the upstream `reviews(first: 1)` problem the guarded tools work around."""
    pr = sandbox80.state.pull("octo/app", 1)
    base = {"owner": "octo", "repo": "app", "pullNumber": 1}
    line = {"path": "app.py", "subjectType": "LINE", "side": "RIGHT", "line": 2}
    results = await call_all(sandbox80, [
        ("create_pending_pull_request_review", {**base, "commitID": pr.head_sha}),
        ("submit_pending_pull_request_review", {**base, "event": "COMMENT", "body": "one"}),
        ("create_pending_pull_request_review", {**base, "commitID": pr.head_sha}),
        ("add_comment_to_pending_review", {**base, **line, "body": "lost"}),
    ])
    assert results[3][0] and "is not pending" in results[3][1]
