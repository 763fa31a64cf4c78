"""The four tools the model sees: the same names, schemas and descriptions for every PR and
every github-mcp-server version. No per-PR value ever appears here (prefix-cache stability)."""

from __future__ import annotations

from typing import Any

OWNER = {"type": "string", "description": "Owner of the PR's base repository"}
REPO = {"type": "string", "description": "Name of the PR's base repository"}
PULL = {"type": "integer", "description": "Number of the pull request under review"}

PULL_REQUEST_READ: dict[str, Any] = {
    "name": "pull_request_read",
    "description": ("Read the pull request under review. method: get (metadata), get_diff "
                    "(unified diff), get_files (changed files with patches; page/perPage), "
                    "get_status (commit status), get_check_runs (check runs)."),
    "parameters": {"type": "object", "properties": {
        "method": {"type": "string",
                   "enum": ["get", "get_diff", "get_files", "get_status", "get_check_runs"]},
        "owner": OWNER, "repo": REPO, "pullNumber": PULL,
        "page": {"type": "integer", "minimum": 1},
        "perPage": {"type": "integer", "minimum": 1, "maximum": 100}},
        "required": ["method", "owner", "repo", "pullNumber"]},
}

GET_FILE_CONTENTS: dict[str, Any] = {
    "name": "get_file_contents",
    "description": ("Read a file of the PR's head (default) or base. Give either sha (the PR's "
                    "head or base SHA) or ref (one of the PR's branches), not both. Reading the "
                    "base side is limited to files the PR changes."),
    "parameters": {"type": "object", "properties": {
        "owner": {"type": "string", "description": "Owner of the base or head repository"},
        "repo": {"type": "string", "description": "Name of the base or head repository"},
        "path": {"type": "string", "description": "File path relative to the repository root"},
        "sha": {"type": "string", "description": "Commit SHA: the PR's head or base SHA"},
        "ref": {"type": "string", "description": "A branch of the PR, or refs/pull/N/head"}},
        "required": ["owner", "repo", "path"]},
}

PULL_REQUEST_REVIEW_WRITE: dict[str, Any] = {
    "name": "pull_request_review_write",
    "description": ("Write the review: method=create starts a pending review on the head "
                    "commit; method=submit_pending with event=COMMENT and a summary body "
                    "posts it with its inline comments. Approving or requesting changes is "
                    "not possible."),
    "parameters": {"type": "object", "properties": {
        "method": {"type": "string", "enum": ["create", "submit_pending"]},
        "owner": OWNER, "repo": REPO, "pullNumber": PULL,
        "commitID": {"type": "string", "description": "Head SHA (optional; injected)"},
        "event": {"type": "string", "enum": ["COMMENT"]},
        "body": {"type": "string", "description": "Review summary (submit_pending)"},
        "fixedThreads": {"type": "array", "items": {"type": "integer"},
                         "description": ("submit_pending on a re-review: ids of your earlier "
                                         "threads this push fixed (the thread N listed in the "
                                         "message); the bot resolves them after posting")}},
        "required": ["method", "owner", "repo", "pullNumber"]},
}

ADD_COMMENT_TO_PENDING_REVIEW: dict[str, Any] = {
    "name": "add_comment_to_pending_review",
    "description": ("Add a finding to the pending review, with its severity. subjectType LINE "
                    "needs line "
                    "and side (RIGHT: new code, LEFT: removed code) inside the diff; a range "
                    "adds startLine/startSide. subjectType FILE comments on the whole file."),
    "parameters": {"type": "object", "properties": {
        "owner": OWNER, "repo": REPO, "pullNumber": PULL,
        "path": {"type": "string", "description": "Changed file, relative path"},
        "body": {"type": "string", "description": "The comment (Markdown)"},
        "severity": {"type": "string", "enum": ["critical", "major", "minor", "nit"],
                     "description": ("critical: breaks production, security or data loss; "
                                     "major: a real bug or risk to fix before merging; minor: "
                                     "worth fixing, low risk; nit: optional polish")},
        "subjectType": {"type": "string", "enum": ["FILE", "LINE"]},
        "line": {"type": "integer", "minimum": 1},
        "side": {"type": "string", "enum": ["LEFT", "RIGHT"]},
        "startLine": {"type": "integer", "minimum": 1},
        "startSide": {"type": "string", "enum": ["LEFT", "RIGHT"]}},
        "required": ["owner", "repo", "pullNumber", "path", "body", "severity",
                     "subjectType"]},
}

ALL = [PULL_REQUEST_READ, GET_FILE_CONTENTS, PULL_REQUEST_REVIEW_WRITE,
       ADD_COMMENT_TO_PENDING_REVIEW]
WRITE_TOOLS = {"pull_request_review_write", "add_comment_to_pending_review"}
