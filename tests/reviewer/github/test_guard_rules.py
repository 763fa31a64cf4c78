"""Table-driven: every allow and reject rule of the guard, with its message.

Rejection texts are part of the tool contract (the model reads them to correct its call), so
they are compared whole, and allowed calls are compared as the whole outgoing arguments.
"""

from __future__ import annotations

import json

import pytest

from dsh_github_reviewer.github.diff import commentable_lines
from dsh_github_reviewer.github.guard_rules import (
    SEVERITY_REFUSED,
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
              head_ref="feature", head_owner="fork-owner", head_repo="app-fork")
SAME_REPO = Scope(owner="Octo", repo="App", number=7, base_sha=BASE, base_ref="main",
                  head_sha=HEAD, head_ref="feature", head_owner="Octo", head_repo="App")
PATCH = "@@ -10,3 +10,4 @@\n ctx\n-old\n+new1\n+new2\n ctx2"
CHANGED = ChangedFiles(paths={"src/a.py", "new_name.py"}, previous={"old_name.py"},
                       lines={"src/a.py": commentable_lines(PATCH),
                              "new_name.py": commentable_lines("@@ -1 +1 @@\n-a\n+b")})
PR = {"owner": "octo", "repo": "app", "pullNumber": 7}
TARGET_ERR = "tool call must target current PR Octo/App#7"
PATH_ERR = ("path must be a relative file path inside the repository "
            "(no leading /, no .., no NUL)")
REF_ERR = (f"ref {{!r}} is not allowed; use the head SHA {HEAD}, the base SHA {BASE}, or this "
           "PR's branches")
BASE_ONLY_ERR = ("base-side reads are limited to the PR's changed files; secrets.env is not one "
                 "of them")


def rejection(check, *args) -> str:
    with pytest.raises(Rejected) as exc:
        check(*args)
    return str(exc.value)


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
        assert rejection(check_target, args, SCOPE) == error
    else:
        assert check_target(args, SCOPE) == {"owner": "Octo", "repo": "App", "pullNumber": 7}


@pytest.mark.parametrize("method", ["get", "get_diff", "get_files", "get_status",
                                    "get_check_runs"])
def test_read_methods_allowed(method):
    assert check_read({**PR, "method": method, "page": 2}, SCOPE) == (
        method, {"owner": "Octo", "repo": "App", "pullNumber": 7,
                 **({"page": 2} if method == "get_files" else {})})


@pytest.mark.parametrize("method", ["get_comments", "get_reviews", "get_commits", "merge", None,
                                    "GET", 3])
def test_read_methods_rejected(method):
    assert rejection(check_read, {**PR, "method": method}, SCOPE) == (
        f"pull_request_read method {method!r} is not allowed for automated review (allowed: "
        "get, get_diff, get_files, get_status, get_check_runs)")


@pytest.mark.parametrize(("paging", "expected"), [
    ({"page": 1, "perPage": 1}, None),
    ({"page": 2, "perPage": 50}, None),
    ({"page": 10_000, "perPage": 100}, None),
    ({}, None),
    ({"page": None, "perPage": None}, None),       # null is "not given"
    ({"page": 0}, "page must be >= 1"),
    ({"page": -1}, "page must be >= 1"),
    ({"perPage": 0}, "perPage must be >= 1 and <= 100"),
    ({"perPage": 101}, "perPage must be >= 1 and <= 100"),
    ({"perPage": 500}, "perPage must be >= 1 and <= 100"),
    ({"page": "2"}, 'page must be a JSON integer (e.g. 42, not "42")'),
    ({"perPage": 2.0}, 'perPage must be a JSON integer (e.g. 42, not "42")'),
    ({"page": True}, 'page must be a JSON integer (e.g. 42, not "42")'),
])
def test_read_pagination_args(paging, expected):
    args = {**PR, "method": "get_files", **paging}
    if isinstance(expected, str):
        assert rejection(check_read, args, SCOPE) == expected
    else:
        given = {k: v for k, v in paging.items() if v is not None}
        assert check_read(args, SCOPE) == (
            "get_files", {"owner": "Octo", "repo": "App", "pullNumber": 7, **given})


def test_pagination_only_applies_to_get_files():
    # Other methods ignore (and drop) paging arguments instead of validating them.
    assert check_read({**PR, "method": "get", "page": 0, "perPage": "x"}, SCOPE) == (
        "get", {"owner": "Octo", "repo": "App", "pullNumber": 7})


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
    ({"owner": "evil", "repo": "app", "path": "x.py"},
     "get_file_contents must read the PR's base repository Octo/App or head repository "
     "fork-owner/app-fork"),
    ({"owner": "octo", "repo": "app", "path": "x.py", "sha": HEAD, "ref": "main"},
     "pass either sha or ref, not both"),
    ({"owner": "octo", "repo": "app", "path": "x.py", "sha": "c" * 40},
     f"sha must be the PR's base SHA {BASE} or head SHA {HEAD}"),
    ({"owner": "octo", "repo": "app", "path": "x.py", "ref": "develop"},
     REF_ERR.format("develop")),
    ({"owner": "octo", "repo": "app", "path": "x.py", "ref": "feature"},
     REF_ERR.format("feature")),
    ({"owner": "fork-owner", "repo": "app-fork", "path": "x.py", "ref": "refs/pull/7/head"},
     REF_ERR.format("refs/pull/7/head")),
    ({"owner": "octo", "repo": "app", "path": "x.py", "ref": "refs/pull/8/head"},
     REF_ERR.format("refs/pull/8/head")),
    ({"owner": "octo", "repo": "app", "path": "secrets.env", "sha": BASE},
     BASE_ONLY_ERR),
    ({"owner": "octo", "repo": "app", "path": "secrets.env", "ref": "main"},
     BASE_ONLY_ERR),
    ({"owner": "octo", "repo": "app", "path": "secrets.env", "ref": BASE},
     BASE_ONLY_ERR),
    ({"owner": "fork-owner", "repo": "app-fork", "path": "secrets.env", "sha": BASE},
     BASE_ONLY_ERR),
    ({"owner": "octo", "repo": "app", "path": "/etc/passwd"}, PATH_ERR),
    ({"owner": "octo", "repo": "app", "path": "a/../../b"}, PATH_ERR),
    ({"owner": "octo", "repo": "app", "path": "a\x00b"}, PATH_ERR),
    ({"owner": "octo", "repo": "app", "path": ""}, "path must be a non-blank string"),
    ({"owner": "octo", "repo": "app"}, "path must be a non-blank string"),
    ({"owner": 1, "repo": "app", "path": "x"}, "owner must be a non-blank string"),
    ({"owner": "octo", "repo": " ", "path": "x"}, "repo must be a non-blank string"),
    ({"owner": "octo", "repo": "app", "path": "x", "sha": ""}, "sha must be a non-blank string"),
    ({"owner": "octo", "repo": "app", "path": "x", "ref": 1}, "ref must be a non-blank string"),
]


@pytest.mark.parametrize(("args", "expected"), FILE_CASES)
def test_file_rules(args, expected):
    if isinstance(expected, str):
        assert rejection(check_file, args, SCOPE, CHANGED) == expected
    else:
        assert check_file(args, SCOPE, CHANGED) == expected


def test_same_repo_head_branch_is_head_side_and_base_branch_is_base_side():
    args = {"owner": "octo", "repo": "app", "path": "anything.py", "ref": "feature"}
    assert check_file(args, SAME_REPO, CHANGED)["ref"] == "feature"
    assert rejection(check_file, {**args, "ref": "main"}, SAME_REPO, CHANGED) == (
        "base-side reads are limited to the PR's changed files; anything.py is not one of them")


def test_head_branch_wins_when_it_shares_the_base_branch_name():
    # A ref naming the head branch reads the head side even where the base branch has the same
    # name, so it is not limited to the changed files.
    scope = Scope(owner="Octo", repo="App", number=7, base_sha=BASE, base_ref="main",
                  head_sha=HEAD, head_ref="main", head_owner="Octo", head_repo="App")
    args = {"owner": "octo", "repo": "app", "path": "anything.py", "ref": "refs/heads/main"}
    assert check_file(args, scope, CHANGED) == {"owner": "Octo", "repo": "App",
                                                "path": "anything.py", "ref": "refs/heads/main"}


def test_base_side_fails_closed_without_changed_files():
    assert rejection(check_file, {"owner": "octo", "repo": "app", "path": "src/a.py",
                                  "sha": BASE}, SCOPE, None) == (
        "base-side reads are unavailable: the PR's changed files could not be loaded")
    head = check_file({"owner": "octo", "repo": "app", "path": "x"}, SCOPE, None)
    assert head["sha"] == HEAD


SUBMIT_ERR = ("submit_pending requires event=COMMENT: this bot only comments; it cannot approve "
              "or request changes")
WRITE_METHOD_ERR = ("pull_request_review_write method {!r} is not allowed (allowed: create, "
                    "then add_comment_to_pending_review, then submit_pending with event=COMMENT)")


@pytest.mark.parametrize(("args", "expected"), [
    ({**PR, "method": "create"},
     ("create", {"owner": "Octo", "repo": "App", "pullNumber": 7, "method": "create",
                 "commitID": HEAD})),
    ({**PR, "method": "create", "commitID": HEAD, "event": "APPROVE", "body": "x", "extra": 1},
     ("create", {"owner": "Octo", "repo": "App", "pullNumber": 7, "method": "create",
                 "commitID": HEAD})),
    ({**PR, "method": "create", "commitID": BASE}, f"commitID must be the PR's head SHA {HEAD}"),
    ({**PR, "method": "submit_pending", "event": "COMMENT", "body": "Summary", "x": 1},
     ("submit_pending", {"owner": "Octo", "repo": "App", "pullNumber": 7,
                         "method": "submit_pending", "event": "COMMENT", "body": "Summary"})),
    ({**PR, "method": "submit_pending", "event": "APPROVE", "body": "ok"}, SUBMIT_ERR),
    ({**PR, "method": "submit_pending", "event": "REQUEST_CHANGES", "body": "no"},
     SUBMIT_ERR),
    ({**PR, "method": "submit_pending", "body": "no event"}, SUBMIT_ERR),
    ({**PR, "method": "submit_pending", "event": "COMMENT", "body": "  "},
     "body must summarize the review (a short summary is fine when there are no "
     "findings)"),
    ({**PR, "method": "submit_pending", "event": "COMMENT"}, "body must be a string"),
    ({**PR, "method": "submit_pending", "event": "COMMENT", "body": 5}, "body must be a string"),
    ({**PR, "method": "delete_pending"}, WRITE_METHOD_ERR.format("delete_pending")),
    ({**PR, "method": "approve"}, WRITE_METHOD_ERR.format("approve")),
    ({**PR, "method": "merge"}, WRITE_METHOD_ERR.format("merge")),
    ({**PR}, WRITE_METHOD_ERR.format(None)),
    ({**PR, "pullNumber": 9, "method": "create"}, TARGET_ERR),
])
def test_review_write_rules(args, expected):
    if isinstance(expected, str):
        assert rejection(check_review_write, args, SCOPE) == expected
    else:
        assert check_review_write(args, SCOPE) == expected


LINE = {**PR, "path": "src/a.py", "body": "b", "severity": "major", "subjectType": "LINE"}
OUT = {"owner": "Octo", "repo": "App", "pullNumber": 7, "path": "src/a.py", "body": "b",
       "severity": "major", "subjectType": "LINE"}
SEVERITY_ERR = ("severity must be one of critical, major, minor, nit (critical: breaks "
                "production, security or data loss; major: fix before merging; minor: low "
                "risk; nit: optional)")
# CHANGED's src/a.py: RIGHT lines 10-13, LEFT lines 10-12 (hunk "@@ -10,3 +10,4 @@").
NOT_IN_DIFF = ("line {n} ({s}) of {path} is not in the PR's diff, and GitHub would drop the "
               "comment. Commentable {s} lines: {ranges}; nearest: {near}")


@pytest.mark.parametrize(("args", "expected"), [
    ({**LINE, "line": 11, "side": "RIGHT"}, {**OUT, "line": 11, "side": "RIGHT"}),
    ({**LINE, "line": 11, "side": "LEFT"}, {**OUT, "line": 11, "side": "LEFT"}),
    ({**LINE, "line": 13, "side": "RIGHT", "startLine": 10, "startSide": "RIGHT"},
     {**OUT, "line": 13, "side": "RIGHT", "startLine": 10, "startSide": "RIGHT"}),
    # startLine may equal line, and the range may start on the LEFT side
    ({**LINE, "line": 12, "side": "RIGHT", "startLine": 12, "startSide": "RIGHT"},
     {**OUT, "line": 12, "side": "RIGHT", "startLine": 12, "startSide": "RIGHT"}),
    ({**LINE, "line": 12, "side": "RIGHT", "startLine": 10, "startSide": "LEFT"},
     {**OUT, "line": 12, "side": "RIGHT", "startLine": 10, "startSide": "LEFT"}),
    ({**LINE, "path": " ./src/a.py ", "line": 10, "side": "RIGHT", "body": "  text  "},
     {**OUT, "line": 10, "side": "RIGHT", "body": "text"}),
    ({**LINE, "subjectType": "FILE"}, {**OUT, "subjectType": "FILE"}),
    # FILE comments drop line arguments instead of validating them
    ({**LINE, "subjectType": "FILE", "line": 999, "side": "UP"}, {**OUT, "subjectType": "FILE"}),
    # arguments the guard does not know never go out
    ({**LINE, "line": 11, "side": "RIGHT", "inReplyTo": 5, "commitID": "x"},
     {**OUT, "line": 11, "side": "RIGHT"}),
])
def test_comment_allowed_with_whole_outgoing_arguments(args, expected):
    assert check_comment(args, SCOPE, CHANGED) == expected


@pytest.mark.parametrize(("args", "expected"), [
    ({**LINE, "line": 40, "side": "RIGHT"},
     NOT_IN_DIFF.format(n=40, s="RIGHT", path="src/a.py", ranges="10-13", near="11, 12, 13")),
    ({**LINE, "line": 13, "side": "LEFT"},
     NOT_IN_DIFF.format(n=13, s="LEFT", path="src/a.py", ranges="10-12", near="10, 11, 12")),
    ({**LINE, "line": 13, "side": "RIGHT", "startLine": 2, "startSide": "RIGHT"},
     NOT_IN_DIFF.format(n=2, s="RIGHT", path="src/a.py", ranges="10-13", near="10, 11, 12")),
    ({**LINE, "line": 12, "side": "RIGHT", "startLine": 1, "startSide": "LEFT"},
     NOT_IN_DIFF.format(n=1, s="LEFT", path="src/a.py", ranges="10-12", near="10, 11, 12")),
    ({**LINE, "line": 11, "side": "RIGHT", "startLine": 12, "startSide": "RIGHT"},
     "startLine must be between 1 and line"),
    ({**LINE, "line": 11, "side": "RIGHT", "startLine": 0, "startSide": "RIGHT"},
     "startLine must be between 1 and line"),
    ({**LINE, "line": 11, "side": "RIGHT", "startLine": "10", "startSide": "RIGHT"},
     'startLine must be a JSON integer (e.g. 42, not "42")'),
    ({**LINE, "line": 11, "side": "RIGHT", "startLine": 10},
     "startLine and startSide go together: give both or neither"),
    ({**LINE, "line": 11, "side": "RIGHT", "startSide": "RIGHT"},
     "startLine and startSide go together: give both or neither"),
    ({**LINE, "line": 11, "side": "RIGHT", "startLine": 10, "startSide": "UP"},
     "startSide must be LEFT or RIGHT"),
    ({**LINE, "line": 11, "side": "RIGHT", "startLine": 10, "startSide": "left"},
     "startSide must be LEFT or RIGHT"),
    ({**LINE, "line": "11", "side": "RIGHT"}, 'line must be a JSON integer (e.g. 42, not "42")'),
    ({**LINE, "line": 0, "side": "RIGHT"}, "line must be >= 1"),
    ({**LINE, "line": -3, "side": "LEFT"}, "line must be >= 1"),
    ({**LINE, "line": 11}, "side must be LEFT (old code) or RIGHT (new code)"),
    ({**LINE, "line": 11, "side": "right"}, "side must be LEFT (old code) or RIGHT (new code)"),
    ({**LINE, "side": "RIGHT"}, 'line must be a JSON integer (e.g. 42, not "42")'),
    ({**LINE, "subjectType": "FILE", "startLine": 1, "startSide": "RIGHT"},
     "FILE comments take no startLine/startSide"),
    ({**LINE, "subjectType": "FILE", "startLine": 1}, "FILE comments take no startLine/startSide"),
    ({**LINE, "subjectType": "FILE", "startSide": "LEFT"},
     "FILE comments take no startLine/startSide"),
    ({**LINE, "subjectType": "HUNK"}, "subjectType must be FILE or LINE"),
    ({**LINE, "subjectType": None}, "subjectType must be FILE or LINE"),
    ({**LINE, "path": "/src/a.py", "line": 11, "side": "RIGHT"}, PATH_ERR),
    ({**LINE, "path": "src/../a.py", "line": 11, "side": "RIGHT"}, PATH_ERR),
    ({**LINE, "path": "./", "line": 11, "side": "RIGHT"}, PATH_ERR),
    ({**LINE, "path": " ", "line": 11, "side": "RIGHT"}, "path must be a non-blank string"),
    ({**LINE, "path": 3, "line": 11, "side": "RIGHT"}, "path must be a non-blank string"),
    ({**LINE, "path": "README.md", "line": 1, "side": "RIGHT"},
     "README.md is not a file changed by this PR; comment on a changed file"),
    ({**LINE, "path": "old_name.py", "line": 1, "side": "LEFT"},
     "old_name.py is not a file changed by this PR; comment on a changed file"),
    ({**LINE, "body": " ", "line": 11, "side": "RIGHT"}, "body must be a non-blank string"),
    ({**LINE, "pullNumber": 8, "line": 11, "side": "RIGHT"}, TARGET_ERR),
])
def test_comment_rejections(args, expected):
    assert rejection(check_comment, args, SCOPE, CHANGED) == expected


@pytest.mark.parametrize("given, what", [
    (None, "severity is missing"), ("blocker", 'severity "blocker" is not allowed'),
    ("MAJOR", 'severity "MAJOR" is not allowed')])
def test_a_finding_without_a_valid_severity_is_refused_with_the_call_to_resend(given, what):
    """A weak model that omits severity gets the allowed values and the exact call back; the
    resent call is accepted as it stands (nothing else about it was wrong)."""
    args = {k: v for k, v in LINE.items() if k != "severity"} | {"line": 11, "side": "RIGHT"}
    if given is not None:
        args["severity"] = given
    with pytest.raises(Rejected) as info:
        check_comment(args, SCOPE, CHANGED)
    msg = str(info.value)
    assert msg.startswith(what + "; this finding was NOT added. ") and SEVERITY_ERR in msg
    assert info.value.note == SEVERITY_REFUSED, "the session log records why, as data"
    call = msg.split("add_comment_to_pending_review ", 1)[1].split(" — ", 1)[0]
    resent = json.loads(call)
    assert resent == {**args, "severity": "minor"}
    assert check_comment(resent, SCOPE, CHANGED) == {**OUT, "line": 11, "side": "RIGHT",
                                                     "severity": "minor"}


def test_line_one_is_a_valid_line():
    changed = ChangedFiles(paths={"top.py"},
                           lines={"top.py": commentable_lines("@@ -1,2 +1,2 @@\n-a\n+b\n c")})
    args = {**LINE, "path": "top.py", "line": 1, "side": "RIGHT"}
    expected = {**OUT, "path": "top.py", "line": 1, "side": "RIGHT"}
    assert check_comment(args, SCOPE, changed) == expected
    ranged = {**args, "line": 2, "startLine": 1, "startSide": "LEFT"}
    assert check_comment(ranged, SCOPE, changed) == {
        **expected, "line": 2, "startLine": 1, "startSide": "LEFT"}


def test_changed_file_without_diff_lines_takes_file_comments_only():
    # A binary or renamed-only file is changed but has no hunk: no line is commentable.
    changed = ChangedFiles(paths={"logo.png"})
    args = {**LINE, "path": "logo.png", "line": 1, "side": "RIGHT"}
    assert rejection(check_comment, args, SCOPE, changed) == NOT_IN_DIFF.format(
        n=1, s="RIGHT", path="logo.png", ranges="none", near="none")
    assert check_comment({**args, "subjectType": "FILE"}, SCOPE, changed) == {
        **OUT, "path": "logo.png", "subjectType": "FILE"}


def test_comments_fail_closed_without_changed_files():
    assert rejection(check_comment, {**LINE, "line": 11, "side": "RIGHT"}, SCOPE, None) == (
        "inline comments are unavailable: the PR's changed files could not be loaded")
