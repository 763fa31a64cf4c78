"""Validation of the model's tool arguments, as pure functions of the turn's scope.

Each function returns the normalized arguments that may go out, or raises ``Rejected`` with
the text the model gets back. Rejected calls never reach GitHub and never use the budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dsh_harness import ToolRejected

from ..core.severity import SEVERITIES
from ..core.triggers import Trigger
from .diff import CommentableLines
from .suggestions import SuggestionError, one_suggestion

READ_METHODS = ("get", "get_diff", "get_files", "get_status", "get_check_runs")
WRITE_METHODS = ("create", "submit_pending")


class Rejected(ToolRejected):
    pass


# The session log's note on a finding refused for its severity (counted per turn and shown
# to people; the model gets the message).
SEVERITY_REFUSED = "rejected: severity missing or invalid"
SEVERITY_MEANINGS = ("critical: breaks production, security or data loss; major: fix before "
                     "merging; minor: low risk; nit: optional")


def severity_refused(args: dict[str, Any]) -> Rejected:
    """A finding without a valid severity: nothing is added, and the message repeats the
    allowed values and the exact call to resend, so a weak model that just copies it back
    loses no finding."""
    given = args.get("severity")
    what = ("severity is missing" if given is None else
            f"severity {json.dumps(given, ensure_ascii=False)[:40]} is not allowed")
    resend = {**{k: v for k, v in args.items() if k != "severity"}, "severity": "minor"}
    call = json.dumps(resend, ensure_ascii=False, separators=(",", ":"))
    return Rejected(f"{what}; this finding was NOT added. severity must be one of "
                    f"{', '.join(SEVERITIES)} ({SEVERITY_MEANINGS}). Resend it now as "
                    f"add_comment_to_pending_review {call} — with \"minor\" replaced by the "
                    "severity that fits.", note=SEVERITY_REFUSED)


@dataclass
class Scope:
    """The PR a turn is about: only it may be read and commented on."""

    owner: str
    repo: str
    number: int
    base_sha: str
    base_ref: str
    head_sha: str
    head_ref: str
    head_owner: str
    head_repo: str
    flow: str = "review"  # "review" | "chat"
    # What the turn answers: its review's marker (None: a turn that posts no review).
    trigger: Trigger | None = None

    @property
    def base_full(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def head_full(self) -> str:
        return f"{self.head_owner}/{self.head_repo}"

    @property
    def pr_label(self) -> str:
        return f"{self.owner}/{self.repo}#{self.number}"


@dataclass
class ChangedFiles:
    """The PR's changed files (with previous names) and their commentable lines."""

    paths: set[str] = field(default_factory=set)
    previous: set[str] = field(default_factory=set)
    lines: dict[str, CommentableLines] = field(default_factory=dict)

    def touches(self, path: str) -> bool:
        return path in self.paths or path in self.previous


def _string(args: dict[str, Any], key: str, required: bool = True) -> str | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise Rejected(f"{key} must be a non-blank string")
    return value.strip()


def _int(args: dict[str, Any], key: str, required: bool = True) -> int | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise Rejected(f"{key} must be a JSON integer (e.g. 42, not \"42\")")
    return value


def check_target(args: dict[str, Any], scope: Scope) -> dict[str, Any]:
    """owner/repo/pullNumber must name the current PR's base repository and number."""
    wrong = Rejected(f"tool call must target current PR {scope.pr_label}")
    owner, repo = args.get("owner"), args.get("repo")
    number = args.get("pullNumber")
    if not isinstance(owner, str) or not isinstance(repo, str) or isinstance(number, bool) \
            or not isinstance(number, int):
        raise wrong
    if owner.strip().lower() != scope.owner.lower() or repo.strip().lower() != \
            scope.repo.lower() or number != scope.number:
        raise wrong
    return {"owner": scope.owner, "repo": scope.repo, "pullNumber": scope.number}


def check_read(args: dict[str, Any], scope: Scope) -> tuple[str, dict[str, Any]]:
    target = check_target(args, scope)
    method = args.get("method")
    if method not in READ_METHODS:
        raise Rejected(f"pull_request_read method {method!r} is not allowed for automated "
                       f"review (allowed: {', '.join(READ_METHODS)})")
    out = dict(target)
    if method == "get_files":
        for key in ("page", "perPage"):
            value = _int(args, key, required=False)
            if value is not None:
                if value < 1 or (key == "perPage" and value > 100):
                    raise Rejected(f"{key} must be >= 1" + (" and <= 100" if key == "perPage"
                                                             else ""))
                out[key] = value
    return method, out


def _normalize_path(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    if path.startswith("/") or "\x00" in path or ".." in path.split("/") or not path:
        raise Rejected("path must be a relative file path inside the repository "
                       "(no leading /, no .., no NUL)")
    return path


def check_file(args: dict[str, Any], scope: Scope, changed: ChangedFiles | None
               ) -> dict[str, Any]:
    owner, repo = _string(args, "owner"), _string(args, "repo")
    full = f"{owner}/{repo}".lower()
    on_base, on_head = full == scope.base_full.lower(), full == scope.head_full.lower()
    if not (on_base or on_head):
        raise Rejected(f"get_file_contents must read the PR's base repository {scope.base_full} "
                       f"or head repository {scope.head_full}")
    path = _normalize_path(_string(args, "path"))  # type: ignore[arg-type]
    sha, ref = _string(args, "sha", False), _string(args, "ref", False)
    if sha is not None and ref is not None:
        raise Rejected("pass either sha or ref, not both")
    if sha is not None and sha not in (scope.base_sha, scope.head_sha):
        raise Rejected(f"sha must be the PR's base SHA {scope.base_sha} or head SHA "
                       f"{scope.head_sha}")
    if ref is not None:
        allowed = {scope.base_sha, scope.head_sha}
        if on_base:
            allowed |= {scope.base_ref, f"refs/heads/{scope.base_ref}",
                        f"refs/pull/{scope.number}/head"}
        if on_head:
            allowed |= {scope.head_ref, f"refs/heads/{scope.head_ref}"}
        if ref not in allowed:
            raise Rejected(f"ref {ref!r} is not allowed; use the head SHA {scope.head_sha}, the "
                           f"base SHA {scope.base_sha}, or this PR's branches")
    if sha is None and ref is None:
        sha = scope.head_sha
    head_branch = on_head and ref in (scope.head_ref, f"refs/heads/{scope.head_ref}")
    base_side = sha == scope.base_sha or ref == scope.base_sha or (
        on_base and not head_branch and ref in (scope.base_ref, f"refs/heads/{scope.base_ref}"))
    if base_side:
        if changed is None:
            raise Rejected("base-side reads are unavailable: the PR's changed files could not "
                           "be loaded")
        if not changed.touches(path):
            raise Rejected(f"base-side reads are limited to the PR's changed files; {path} "
                           "is not one of them")
    out: dict[str, Any] = {"owner": scope.owner if on_base else scope.head_owner,
                           "repo": scope.repo if on_base else scope.head_repo, "path": path}
    if sha is not None:
        out["sha"] = sha
    else:
        out["ref"] = ref
    return out


def check_review_write(args: dict[str, Any], scope: Scope) -> tuple[str, dict[str, Any]]:
    target = check_target(args, scope)
    method = args.get("method")
    if method == "create":
        commit = args.get("commitID")
        if commit is not None and commit != scope.head_sha:
            raise Rejected(f"commitID must be the PR's head SHA {scope.head_sha}")
        return "create", {**target, "method": "create", "commitID": scope.head_sha}
    if method == "submit_pending":
        if args.get("event") != "COMMENT":
            raise Rejected("submit_pending requires event=COMMENT: this bot only comments; it "
                           "cannot approve or request changes")
        body = args.get("body")
        if not isinstance(body, str):
            raise Rejected("body must be a string")
        if not body.strip():
            raise Rejected("body must summarize the review (a short summary is fine when "
                           "there are no findings)")
        fixed = args.get("fixedThreads", [])
        if not isinstance(fixed, list) or any(isinstance(i, bool) or not isinstance(i, int)
                                              for i in fixed):
            raise Rejected("fixedThreads must be a list of thread ids (JSON integers)")
        out = {**target, "method": "submit_pending", "event": "COMMENT", "body": body}
        if fixed:
            out["fixedThreads"] = list(dict.fromkeys(fixed))
        return "submit_pending", out
    raise Rejected(f"pull_request_review_write method {method!r} is not allowed (allowed: "
                   "create, then add_comment_to_pending_review, then submit_pending with "
                   "event=COMMENT)")


def _check_suggestion_range(path: str, lines: CommentableLines, line: int, side: str,
                            start_line: int | None, start_side: str | None) -> None:
    """GitHub applies a suggestion to new-file lines start..line and rejects the whole review
    (422) unless they are RIGHT-side lines inside one hunk."""
    start = start_line if start_line is not None else line
    where = (f"Lines of {path} a suggestion may replace (RIGHT side, one hunk each): "
             f"{lines.hunk_ranges()}")
    if side != "RIGHT" or (start_side or "RIGHT") != "RIGHT":
        raise Rejected("a ```suggestion replaces new code: side (and startSide) must be RIGHT. "
                       + where)
    if lines.right_hunk(start, line) is None:
        span = f"lines {start}-{line}" if start != line else f"line {line}"
        raise Rejected(f"a ```suggestion must replace lines inside one diff hunk; {span} "
                       f"is not. {where}")


def check_comment(args: dict[str, Any], scope: Scope, changed: ChangedFiles | None
                  ) -> dict[str, Any]:
    target = check_target(args, scope)
    path = args.get("path")
    if not isinstance(path, str) or not path.strip():
        raise Rejected("path must be a non-blank string")
    path = _normalize_path(path.strip())
    body = _string(args, "body")
    severity = args.get("severity")
    if severity not in SEVERITIES:
        raise severity_refused(args)
    subject = args.get("subjectType")
    if subject not in ("FILE", "LINE"):
        raise Rejected("subjectType must be FILE or LINE")
    out: dict[str, Any] = {**target, "path": path, "body": body, "severity": severity,
                           "subjectType": subject}
    if changed is None:
        raise Rejected("inline comments are unavailable: the PR's changed files could not be "
                       "loaded")
    if path not in changed.paths:
        raise Rejected(f"{path} is not a file changed by this PR; comment on a changed file")
    try:
        suggestion = one_suggestion(body)  # type: ignore[arg-type]
    except SuggestionError as exc:
        raise Rejected(str(exc)) from None
    if suggestion is not None and subject == "FILE":
        raise Rejected("a ```suggestion replaces lines: use subjectType LINE with side RIGHT "
                       "and the line (or startLine..line) it replaces")
    if subject == "FILE":
        if "startLine" in args or "startSide" in args:
            raise Rejected("FILE comments take no startLine/startSide")
        return out
    line = _int(args, "line")
    side = args.get("side")
    if side not in ("LEFT", "RIGHT"):
        raise Rejected("side must be LEFT (old code) or RIGHT (new code)")
    if line < 1:  # type: ignore[operator]
        raise Rejected("line must be >= 1")
    start_line, start_side = args.get("startLine"), args.get("startSide")
    if (start_line is None) != (start_side is None):
        raise Rejected("startLine and startSide go together: give both or neither")
    if start_line is not None:
        start_line = _int(args, "startLine")
        if start_side not in ("LEFT", "RIGHT"):
            raise Rejected("startSide must be LEFT or RIGHT")
        if not 1 <= start_line <= line:  # type: ignore[operator]
            raise Rejected("startLine must be between 1 and line")
    lines = changed.lines.get(path, CommentableLines())
    for n, s in ((line, side), (start_line, start_side)):
        if n is not None and not lines.allows(s, n):  # type: ignore[arg-type]
            near = ", ".join(map(str, lines.nearest(s, n))) or "none"  # type: ignore[arg-type]
            raise Rejected(f"line {n} ({s}) of {path} is not in the PR's diff, and GitHub would "
                           f"drop the comment. Commentable {s} lines: {lines.ranges(s)}; "
                           f"nearest: {near}")
    if suggestion is not None:
        _check_suggestion_range(path, lines, line, side, start_line,  # type: ignore[arg-type]
                                start_side)
    out.update({"line": line, "side": side})
    if start_line is not None:
        out.update({"startLine": start_line, "startSide": start_side})
    return out
