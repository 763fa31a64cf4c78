"""A scripted reviewer model: a policy for the harness's ScriptedModelServer.

It behaves like a (very small) reviewing LLM through the four guarded tools: it reads the diff
with ``pull_request_read get_diff``, finds real problems in the added lines with a few rules,
starts a review, comments on each new finding at its line, and submits a COMMENT summary. In a
/bot chat it answers from the findings in its own conversation history — which is why the
session must be persistent. Used by the offline demo, end-to-end tests and benchmarks.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from dsh_harness.testing import ModelRequest, Reply

RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\beval\("), "`eval()` on caller-supplied input executes arbitrary code; "
                              "parse the value explicitly instead."),
    (re.compile(r"(SELECT|INSERT|UPDATE|DELETE)\b.*['\"]\s*\+|\+\s*['\"].*\b(WHERE|VALUES)",
                re.I), "SQL built by string concatenation is injectable; use a parameterized "
                       "query (`?` placeholders)."),
    (re.compile(r"verify\s*=\s*False"), "TLS certificate verification is disabled; this allows "
                                        "man-in-the-middle attacks."),
    (re.compile(r"range\(.*len\([^)]*\)\s*\+\s*1\)"), "Off-by-one: `range(..., len(x) + 1)` "
                                                      "indexes one past the end (IndexError)."),
    (re.compile(r"^\s*except\s*:"), "A bare `except:` also swallows KeyboardInterrupt and "
                                    "hides real errors; catch the specific exception."),
    (re.compile(r"(password|secret|api_key)\s*=\s*['\"][^'\"]+['\"]", re.I),
     "A hard-coded credential; read it from the environment or a secret store."),
]
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_FIELD = re.compile(r"^(repository|number|head): (.+)$", re.M)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    text: str
    message: str


def findings_in_diff(diff: str) -> list[Finding]:
    out: list[Finding] = []
    path, line = "", 0
    for raw in diff.split("\n"):
        if raw.startswith("+++ "):
            path = raw[6:] if raw.startswith("+++ b/") else ""
            continue
        m = _HUNK.match(raw)
        if m:
            line = int(m.group(1))
            continue
        if not path or raw.startswith(("--- ", "diff --git", "index ")):
            continue
        if raw.startswith("+"):
            for pattern, message in RULES:
                if pattern.search(raw[1:]):
                    out.append(Finding(path, line, raw[1:].strip(), message))
                    break
            line += 1
        elif raw.startswith(" "):
            line += 1
    return out


def _pr_fields(text: str) -> dict[str, str]:
    return {k: v.strip() for k, v in _FIELD.findall(text)}


def _calls(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for m in messages:
        for c in m.get("tool_calls") or []:
            try:
                args = json.loads(c["function"]["arguments"] or "{}")
            except json.JSONDecodeError:
                args = {}
            out.append((c["function"]["name"], args))
    return out


def _earlier_comments(req: ModelRequest) -> set[tuple[str, str]]:
    """(path, comment) pairs already posted in earlier turns of this conversation."""
    turn_start = len(req.messages) - len(req.since_last_user())
    return {(a.get("path", ""), a.get("body", ""))
            for name, a in _calls(req.messages[:turn_start])
            if name == "add_comment_to_pending_review"}


def _comment_body(f: Finding) -> str:
    return f"{f.message}\n\n`{f.text}`"


def reviewer_policy(req: ModelRequest) -> Reply:
    user = req.last_user_text()
    turn = req.since_last_user()
    if user.startswith("Flow: chat"):
        return _chat(req, user)
    if not user.startswith("Flow: review"):
        return Reply(content="I only review pull requests.")
    fields = _pr_fields(user)
    owner, repo = fields.get("repository", "/").split("/", 1)
    pr = {"owner": owner, "repo": repo, "pullNumber": int(fields.get("number", "0"))}
    calls = _calls(turn)
    results = [m["content"] for m in turn if m["role"] == "tool"]
    if not calls:
        return Reply(content="Reading the diff first.",
                     tool_calls=[("pull_request_read", {**pr, "method": "get_diff"})])
    last = calls[-1][0]
    diff = next((r for (name, _), r in zip(calls, results, strict=False)
                 if name == "pull_request_read"), "")
    earlier = _earlier_comments(req)
    new = [f for f in findings_in_diff(diff) if (f.path, _comment_body(f)) not in earlier]
    if last == "pull_request_read":
        return Reply(tool_calls=[("pull_request_review_write", {**pr, "method": "create"})])
    if last == "pull_request_review_write" and calls[-1][1].get("method") == "create":
        if new:
            return Reply(content=f"Commenting on {len(new)} finding(s).", tool_calls=[
                ("add_comment_to_pending_review",
                 {**pr, "path": f.path, "body": _comment_body(f), "subjectType": "LINE",
                  "line": f.line, "side": "RIGHT"}) for f in new])
        last = "add_comment_to_pending_review"
    if last == "add_comment_to_pending_review":
        if new:
            summary = (f"Found {len(new)} issue(s) at head {fields.get('head', '?')}: "
                       + "; ".join(f"{f.path}:{f.line}" for f in new) + ".")
        else:
            summary = "No new findings in this revision."
        if earlier:
            summary += f" {len(earlier)} earlier finding(s) were reported in previous reviews."
        return Reply(tool_calls=[("pull_request_review_write", {
            **pr, "method": "submit_pending", "event": "COMMENT", "body": summary})])
    return Reply(content="Review submitted.")


def _chat(req: ModelRequest, user: str) -> Reply:
    question = user.split("<question>", 1)[-1].split("</question>", 1)[0].strip()
    if "say nothing" in question.lower():
        return Reply(content="")  # an empty answer: nothing must be posted
    earlier = [a for name, a in _calls(req.messages) if name == "add_comment_to_pending_review"]
    if not earlier:
        return Reply(content=f"You asked: {question}\n\nI have not reported any findings on "
                             "this pull request.")
    lines = "\n".join(f"- `{a.get('path')}` line {a.get('line')}: "
                      f"{a.get('body', '').split(chr(10))[0]}" for a in earlier)
    return Reply(content=f"You asked: {question}\n\nFrom my reviews of this pull request:\n"
                         f"{lines}")
