"""A scripted review team for the ScriptedModelServer: personas, a coordinator, and faults.

Personas behave like small reviewing LLMs with read tools: take the prepared diff of their user
turn (or read it with the tool when there is none), apply the rules of
their concern, and answer with a report in the format their system prompt asks for (findings
already reported earlier in their own conversation are not repeated). The coordinator reads the
reports in its user turn, comments on each finding at its line (its pending review is started
for it, as its prompt says) and submits one COMMENT review
whose verdict is based on the findings only — it ignores a failed persona on purpose, so tests
prove that code, not the model, fails the verdict closed. ``fail`` makes a persona's every
request fail (HTTP 500, retried by the provider) to exercise that path. Any other session falls
back to the single ``reviewer_policy``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from dsh_harness.testing import ModelRequest, Reply, is_compaction_request

from .reviewer_model import (
    _TARGET,
    RULES,
    _calls,
    _chat,
    _prepared_diff,
    compaction_reply,
    findings_in_diff,
    fixed_threads,
    reviewer_policy,
    severity_of,
)

PERSONA_RULES: dict[str, list[str]] = {
    "security": [RULES[0][1], RULES[1][1], RULES[2][1], RULES[5][1]],
    "quality": [RULES[3][1], RULES[4][1]],
}
FETCHALL = re.compile(r"\.fetchall\(\)")
FETCHALL_MESSAGE = ("`fetchall()` loads the whole result set into memory; iterate the cursor "
                    "or paginate.")
PERSONA_SYSTEM = re.compile(r"^You are the (\S+) reviewer in dsh-github-reviewer's review team")
COORDINATOR_SYSTEM = "You are the coordinator of dsh-github-reviewer's review team"
# The coordinator's prompt says its pending review is started for it (no ``create`` call).
STARTED = "Your pending review is started when your turn begins"
_FINDING = re.compile(r"^- `([^`]+):(\d+)` (RIGHT|LEFT)(?: \[(\w+)\])?: (.+)$", re.M)
_REPORT = re.compile(r'<persona_report persona="([^"]+)" status="completed">\n(.*?)\n'
                     r"</persona_report>", re.S)


class ScriptedFailure(LookupError):
    """Raised inside the policy: the server answers HTTP 500 (a transient error)."""


class TeamModel:
    """A policy object: ``ScriptedModelServer(policy=TeamModel())``."""

    def __init__(self) -> None:
        self.fail: set[str] = set()
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, req: ModelRequest) -> Reply:
        if is_compaction_request(req):  # a session's summary, not a review request
            return compaction_reply(req)
        m = PERSONA_SYSTEM.match(req.system)
        if m:
            name = m.group(1)
            with self._lock:
                self.calls[name] = self.calls.get(name, 0) + 1
            if name in self.fail:
                raise ScriptedFailure(f"scripted failure of persona {name}")
            return persona_reply(name, req)
        if req.system.startswith(COORDINATOR_SYSTEM):
            with self._lock:
                self.calls["coordinator"] = self.calls.get("coordinator", 0) + 1
            if "coordinator" in self.fail:
                raise ScriptedFailure("scripted failure of the coordinator")
            return coordinator_reply(req)
        return reviewer_policy(req)


def _pr(user: str) -> dict[str, Any]:
    m = _TARGET.search(user)
    owner, repo, number = m.groups()[:3] if m else ("", "", "0")
    return {"owner": owner, "repo": repo, "pullNumber": int(number)}


def _earlier_text(req: ModelRequest) -> str:
    start = len(req.messages) - len(req.since_last_user())
    return "\n".join(m.get("content") or "" for m in req.messages[1:start]
                     if m["role"] == "assistant")


def persona_reply(name: str, req: ModelRequest) -> Reply:
    user = req.last_user_text()
    if user.startswith("Flow: chat"):
        return Reply(content="Personas do not chat.")
    turn = req.since_last_user()
    diff = _prepared_diff(user)  # the prepared diff or interdiff of the user turn, if any
    if diff is None:
        if not _calls(turn):
            return Reply(tool_calls=[("pull_request_read", {**_pr(user), "method": "get_diff"})])
        diff = next((m["content"] for m in turn if m["role"] == "tool"), "")
    lines = []
    for f in findings_in_diff(diff):
        if f.message in PERSONA_RULES.get(name, []):
            lines.append(f"- `{f.path}:{f.line}` RIGHT [{severity_of(f.message)}]: {f.message}")
    if name == "performance":
        lines += _fetchall(diff)
    earlier = _earlier_text(req)
    new = [line for line in lines if line not in earlier]
    return Reply(content="\n".join(new) if new else "No findings.")


def _fetchall(diff: str) -> list[str]:
    out, path, line = [], "", 0
    for raw in diff.split("\n"):
        if raw.startswith("+++ "):
            path = raw[6:] if raw.startswith("+++ b/") else ""
        elif raw.startswith("@@"):
            line = int(re.match(r"^@@ -\d+(?:,\d+)? \+(\d+)", raw).group(1))  # type: ignore[union-attr]
        elif path and raw.startswith("+") and not raw.startswith("+++"):
            if FETCHALL.search(raw):
                out.append(f"- `{path}:{line}` RIGHT [minor]: {FETCHALL_MESSAGE}")
            line += 1
        elif path and raw.startswith(" "):
            line += 1
    return out


def coordinator_reply(req: ModelRequest,
                      fixed: Callable[[str, ModelRequest], list[int]] | None = None) -> Reply:
    """``fixed`` (optional) replaces the rule for which open threads the push fixed (the eval's
    scripted team answers from a case's ground truth, like ``reviewer_policy``)."""
    user = req.last_user_text()
    if user.startswith("Flow: chat"):
        return _chat(req, user)
    pr = _pr(user)
    findings = []
    for persona, text in _REPORT.findall(user):
        for path, line, side, severity, message in _FINDING.findall(text):
            # Two personas reporting one defect at one line: one comment, as a careful
            # coordinator merges them.
            if not any((p, n, m) == (path, int(line), message) for _, p, n, _, _, m in findings):
                findings.append((persona, path, int(line), side, severity or "major", message))
    calls = _calls(req.since_last_user())
    if not calls and _prepared_diff(user) is None:
        # No prepared diff in its message (an older coordinator prompt): it confirms the
        # reports in the diff it reads itself, as its prompt said and real models do.
        return Reply(tool_calls=[("pull_request_read", {**pr, "method": "get_diff"})])
    ready = not calls or calls[-1][0] == "pull_request_read"
    if ready and STARTED not in req.system:
        # An older coordinator prompt: it starts the pending review itself.
        return Reply(tool_calls=[("pull_request_review_write", {**pr, "method": "create"})])
    created = calls and calls[-1][0] == "pull_request_review_write" \
        and calls[-1][1].get("method") == "create"
    if (ready or created) and findings:
        return Reply(content=f"Commenting on {len(findings)} finding(s).", tool_calls=[
            ("add_comment_to_pending_review",
             {**pr, "path": path, "body": f"[{persona}] {message}", "severity": severity,
              "subjectType": "LINE", "line": line, "side": side})
            for persona, path, line, side, severity, message in findings])
    if ready or (calls[-1][0] in ("add_comment_to_pending_review", "pull_request_review_write")
                 and not (calls[-1][0] == "pull_request_review_write"
                          and calls[-1][1].get("method") == "submit_pending")):
        if findings:
            summary = (f"The team found {len(findings)} new issue(s): "
                       + "; ".join(f"{p}:{n} ({who})" for who, p, n, _, _, _ in findings)
                       + ".\n\nVerdict: cannot merge: "
                       + f"{len(findings)} finding(s) to fix")
        else:
            summary = "The team found no new issues.\n\nVerdict: can merge"
        submit = {**pr, "method": "submit_pending", "event": "COMMENT", "body": summary}
        # The prepared diff it was given shows which of its open threads this push fixed.
        fixed_ids = (fixed(user, req) if fixed is not None
                     else fixed_threads(user, _prepared_diff(user) or ""))
        if fixed_ids:
            submit["fixedThreads"] = fixed_ids
        return Reply(tool_calls=[("pull_request_review_write", submit)])
    return Reply(content="Review submitted.")
