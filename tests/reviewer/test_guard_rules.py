"""Spec §5, table-driven: every allow and reject rule of the guard, with its message."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.github.diff import commentable_lines
from dsh_github_reviewer.github.guard_rules import (
    ChangedFiles,
    Rejected,
    Scope,
    check_comment,
    check_file,
    check_read,
    check_review_write,
    check_target,
)

BASE, HEAD = "b" * 40, "h" * 40
SCOPE = Scope(owner="Octo", repo="App", number=7, base_sha=BASE, base_ref="main", head_sha=HEAD,
              head_ref="feature", head_owner="fork-owner", head_repo="app-fork", trigger="t")
SAME_REPO = Scope(owner="Octo", repo="App", number=7, base_sha=BASE, base_ref="main",
                  head_sha=HEAD, head_ref="feature", head_owner="Octo", head_repo="App")
PATCH = "@@ -10,3 +10,4 @@\n ctx\n-old\n+new1\n+new2\n ctx2"
CHANGED = ChangedFiles(paths={"src/a.py", "new_name.py"}, previous={"old_name.py"},
                       lines={"src/a.py": commentable_lines(PATCH),
                              "new_name.py": commentable_lines("@@ -1 +1 @@\n-a\n+b")})
PR = {"owner": "octo", "repo": "app", "pullNumber": 7}
TARGET_ERR = "tool call must target current PR Octo/App#7"


@pytest.mark.parametrize(("args", "error"), [
    ({**PR}, None),
    ({"owner": "OCTO", "repo": " App ", "pullNumber": 7}, None),
    ({**PR, "pullNumber": 8}, TARGET_ERR),
    ({**PR, "pullNumber": "7"}, TARGET_ERR),
    ({**PR, "pullNumber": 7.0}, TARGET_ERR),
    ({**PR, "pullNumber": True}, TARGET_ERR),
    ({**PR, "owner": "other"}, TARGET_ERR),
    ({**PR, "repo": "app-fork"}, TARGET_ERR),
    ({"repo": "app", "pullNumber": 7}, TARGET_ERR),
    ({"owner": "octo", "pullNumber": 7}, TARGET_ERR),
    ({"owner": "octo", "repo": "app"}, TARGET_ERR),
])
def test_target(args, error):
    if error:
        with pytest.raises(Rejected, match=error):
            check_target(args, SCOPE)
    else:
        assert check_target(args, SCOPE) == {"owner": "Octo", "repo": "App", "pullNumber": 7}


@pytest.mark.parametrize("method", ["get", "get_diff", "get_files", "get_status",
                                    "get_check_runs"])
def test_read_methods_allowed(method):
    assert check_read({**PR, "method": method}, SCOPE)[0] == method


@pytest.mark.parametrize("method", ["get_comments", "get_reviews", "get_commits", "merge", None,
                                    "GET", 3])
def test_read_methods_rejected(method):
    with pytest.raises(Rejected, match="is not allowed for automated review"):
        check_read({**PR, "method": method}, SCOPE)


def test_read_pagination_args():
    assert check_read({**PR, "method": "get_files", "page": 2, "perPage": 50}, SCOPE)[1] == {
        "owner": "Octo", "repo": "App", "pullNumber": 7, "page": 2, "perPage": 50}
    with pytest.raises(Rejected, match="perPage must be >= 1 and <= 100"):
        check_read({**PR, "method": "get_files", "perPage": 500}, SCOPE)
    with pytest.raises(Rejected, match="page must be a JSON integer"):
        check_read({**PR, "method": "get_files", "page": "2"}, SCOPE)
    assert "page" not in check_read({**PR, "method": "get", "page": 2}, SCOPE)[1]


FILE_CASES = [
    # (args, expected out | error substring)
    ({"owner": "fork-owner", "repo": "app-fork", "path": "x.py"},
     {"owner": "fork-owner", "repo": "app-fork", "path": "x.py", "sha": HEAD}),
    ({"owner": "octo", "repo": "app", "path": "./x.py", "sha": HEAD},
     {"owner": "Octo", "repo": "App", "path": "x.py", "sha": HEAD}),
    ({"owner": "octo", "repo": "app", "path": "x.py", "ref": "refs/pull/7/head"},
     {"owner": "Octo", "repo": "App", "path": "x.py", "ref": "refs/pull/7/head"}),
    ({"owner": "fork-owner", "repo": "app-fork", "path": "x.py", "ref": "feature"},
     {"owner": "fork-owner", "repo": "app-fork", "path": "x.py", "ref": "feature"}),
    ({"owner": "fork-owner", "repo": "app-fork", "path": "x.py", "ref": "refs/heads/feature"},
     {"owner": "fork-owner", "repo": "app-fork", "path": "x.py", "ref": "refs/heads/feature"}),
    ({"owner": "octo", "repo": "app", "path": "src/a.py", "sha": BASE},
     {"owner": "Octo", "repo": "App", "path": "src/a.py", "sha": BASE}),
    ({"owner": "octo", "repo": "app", "path": "old_name.py", "ref": "main"},
     {"owner": "Octo", "repo": "App", "path": "old_name.py", "ref": "main"}),
    ({"owner": "octo", "repo": "app", "path": "src/a.py", "ref": "refs/heads/main"},
     {"owner": "Octo", "repo": "App", "path": "src/a.py", "ref": "refs/heads/main"}),
    ({"owner": "evil", "repo": "app", "path": "x.py"}, "must read the PR's base repository"),
    ({"owner": "octo", "repo": "app", "path": "x.py", "sha": HEAD, "ref": "main"},
     "either sha or ref, not both"),
    ({"owner": "octo", "repo": "app", "path": "x.py", "sha": "c" * 40},
     "sha must be the PR's base SHA"),
    ({"owner": "octo", "repo": "app", "path": "x.py", "ref": "develop"}, "is not allowed"),
    ({"owner": "octo", "repo": "app", "path": "x.py", "ref": "feature"}, "is not allowed"),
    ({"owner": "fork-owner", "repo": "app-fork", "path": "x.py", "ref": "refs/pull/7/head"},
     "is not allowed"),
    ({"owner": "octo", "repo": "app", "path": "x.py", "ref": "refs/pull/8/head"},
     "is not allowed"),
    ({"owner": "octo", "repo": "app", "path": "secrets.env", "sha": BASE},
     "limited to the PR's changed files"),
    ({"owner": "octo", "repo": "app", "path": "secrets.env", "ref": "main"},
     "limited to the PR's changed files"),
    ({"owner": "octo", "repo": "app", "path": "secrets.env", "ref": BASE},
     "limited to the PR's changed files"),
    ({"owner": "fork-owner", "repo": "app-fork", "path": "secrets.env", "sha": BASE},
     "limited to the PR's changed files"),
    ({"owner": "octo", "repo": "app", "path": "/etc/passwd"}, "relative file path"),
    ({"owner": "octo", "repo": "app", "path": "a/../../b"}, "relative file path"),
    ({"owner": "octo", "repo": "app", "path": "a\x00b"}, "relative file path"),
    ({"owner": "octo", "repo": "app", "path": ""}, "path must be a non-blank string"),
    ({"owner": "octo", "repo": "app"}, "path must be a non-blank string"),
    ({"owner": 1, "repo": "app", "path": "x"}, "owner must be a non-blank string"),
]


@pytest.mark.parametrize(("args", "expected"), FILE_CASES)
def test_file_rules(args, expected):
    if isinstance(expected, str):
        with pytest.raises(Rejected, match=expected.replace("(", r"\(")):
            check_file(args, SCOPE, CHANGED)
    else:
        assert check_file(args, SCOPE, CHANGED) == expected


def test_same_repo_head_branch_is_head_side_and_base_branch_is_base_side():
    args = {"owner": "octo", "repo": "app", "path": "anything.py", "ref": "feature"}
    assert check_file(args, SAME_REPO, CHANGED)["ref"] == "feature"
    with pytest.raises(Rejected, match="limited to the PR's changed files"):
        check_file({**args, "ref": "main"}, SAME_REPO, CHANGED)


def test_base_side_fails_closed_without_changed_files():
    with pytest.raises(Rejected, match="base-side reads are unavailable"):
        check_file({"owner": "octo", "repo": "app", "path": "src/a.py", "sha": BASE}, SCOPE,
                   None)
    head = check_file({"owner": "octo", "repo": "app", "path": "x"}, SCOPE, None)
    assert head["sha"] == HEAD


@pytest.mark.parametrize(("args", "expected"), [
    ({**PR, "method": "create"},
     ("create", {"owner": "Octo", "repo": "App", "pullNumber": 7, "method": "create",
                 "commitID": HEAD})),
    ({**PR, "method": "create", "commitID": HEAD, "event": "APPROVE", "body": "x", "extra": 1},
     ("create", {"owner": "Octo", "repo": "App", "pullNumber": 7, "method": "create",
                 "commitID": HEAD})),
    ({**PR, "method": "create", "commitID": BASE}, "commitID must be the PR's head SHA"),
    ({**PR, "method": "submit_pending", "event": "COMMENT", "body": "Summary", "x": 1},
     ("submit_pending", {"owner": "Octo", "repo": "App", "pullNumber": 7,
                         "method": "submit_pending", "event": "COMMENT", "body": "Summary"})),
    ({**PR, "method": "submit_pending", "event": "APPROVE", "body": "ok"}, "event=COMMENT"),
    ({**PR, "method": "submit_pending", "event": "REQUEST_CHANGES", "body": "no"},
     "event=COMMENT"),
    ({**PR, "method": "submit_pending", "body": "no event"}, "event=COMMENT"),
    ({**PR, "method": "submit_pending", "event": "COMMENT", "body": "  "},
     "body must summarize"),
    ({**PR, "method": "submit_pending", "event": "COMMENT"}, "body must be a string"),
    ({**PR, "method": "delete_pending"}, "is not allowed"),
    ({**PR, "method": "approve"}, "is not allowed"),
    ({**PR, "method": "merge"}, "is not allowed"),
    ({**PR, "pullNumber": 9, "method": "create"}, TARGET_ERR),
])
def test_review_write_rules(args, expected):
    if isinstance(expected, str):
        with pytest.raises(Rejected, match=expected):
            check_review_write(args, SCOPE)
    else:
        assert check_review_write(args, SCOPE) == expected


LINE = {**PR, "path": "src/a.py", "body": "b", "subjectType": "LINE"}


@pytest.mark.parametrize(("args", "expected"), [
    ({**LINE, "line": 11, "side": "RIGHT"}, {"line": 11, "side": "RIGHT"}),
    ({**LINE, "line": 11, "side": "LEFT"}, {"line": 11, "side": "LEFT"}),
    ({**LINE, "line": 13, "side": "RIGHT", "startLine": 10, "startSide": "RIGHT"},
     {"line": 13, "side": "RIGHT", "startLine": 10, "startSide": "RIGHT"}),
    ({**LINE, "path": "./src/a.py", "line": 10, "side": "RIGHT"}, {"path": "src/a.py"}),
    ({**LINE, "subjectType": "FILE"}, {"subjectType": "FILE"}),
    ({**LINE, "line": 40, "side": "RIGHT"},
     r"line 40 \(RIGHT\) of src/a.py is not in the PR's diff.*nearest: 11, 12, 13"),
    ({**LINE, "line": 13, "side": "LEFT"}, "Commentable LEFT lines: 10-12; nearest: 10, 11, 12"),
    ({**LINE, "line": 13, "side": "RIGHT", "startLine": 2, "startSide": "RIGHT"},
     "line 2 \\(RIGHT\\)"),
    ({**LINE, "line": 11, "side": "RIGHT", "startLine": 12, "startSide": "RIGHT"},
     "startLine must be between 1 and line"),
    ({**LINE, "line": 11, "side": "RIGHT", "startLine": 10}, "give both or neither"),
    ({**LINE, "line": 11, "side": "RIGHT", "startSide": "RIGHT"}, "give both or neither"),
    ({**LINE, "line": 11, "side": "RIGHT", "startLine": 10, "startSide": "UP"},
     "startSide must be LEFT or RIGHT"),
    ({**LINE, "line": "11", "side": "RIGHT"}, "line must be a JSON integer"),
    ({**LINE, "line": 0, "side": "RIGHT"}, "line must be >= 1"),
    ({**LINE, "line": 11}, "side must be LEFT"),
    ({**LINE, "line": 11, "side": "right"}, "side must be LEFT"),
    ({**LINE, "side": "RIGHT"}, "line must be a JSON integer"),
    ({**LINE, "subjectType": "FILE", "startLine": 1, "startSide": "RIGHT"},
     "FILE comments take no startLine"),
    ({**LINE, "subjectType": "HUNK"}, "subjectType must be FILE or LINE"),
    ({**LINE, "path": "/src/a.py", "line": 11, "side": "RIGHT"}, "relative file path"),
    ({**LINE, "path": "src/../a.py", "line": 11, "side": "RIGHT"}, "relative file path"),
    ({**LINE, "path": "README.md", "line": 1, "side": "RIGHT"}, "is not a file changed"),
    ({**LINE, "path": "old_name.py", "line": 1, "side": "LEFT"}, "is not a file changed"),
    ({**LINE, "body": " ", "line": 11, "side": "RIGHT"}, "body must be a non-blank string"),
    ({**LINE, "pullNumber": 8, "line": 11, "side": "RIGHT"}, TARGET_ERR),
])
def test_comment_rules(args, expected):
    if isinstance(expected, str):
        with pytest.raises(Rejected, match=expected):
            check_comment(args, SCOPE, CHANGED)
    else:
        out = check_comment(args, SCOPE, CHANGED)
        assert expected.items() <= out.items()


def test_comments_fail_closed_without_changed_files():
    with pytest.raises(Rejected, match="inline comments are unavailable"):
        check_comment({**LINE, "line": 11, "side": "RIGHT"}, SCOPE, None)
