"""A scripted reviewer model: a policy for the harness's ScriptedModelServer.

It behaves like a (very small) reviewing LLM through the four guarded tools: it takes the
prepared diff from the user message (only what changed, on a re-review) and fetches with
``pull_request_read`` only what the message does not carry — the patches of files the diff
budget left out (``get_files``), or the whole diff when no prepared diff came (``get_diff``).
It finds real problems in the added lines with a few rules, leaves out findings people rejected
on its threads, starts a review, comments on each new finding at its line, and submits a
COMMENT summary. In a /bot chat it answers from the findings in its own conversation history —
which is why the session must be persistent. Used by the offline demo, end-to-end tests and
benchmarks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dsh_harness.testing import ModelRequest, Reply, is_compaction_request

# The rules' severities, by the start of their message (the tool argument the model passes).
SEVERITY = {"`eval()`": "critical", "SQL built": "critical", "TLS certificate": "major",
            "Off-by-one": "major", "A bare": "minor", "A hard-coded": "major"}


def severity_of(message: str) -> str:
    return next((s for prefix, s in SEVERITY.items() if message.startswith(prefix)), "minor")


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
_TARGET = re.compile(r"Review only ([^/\s]+)/([^#\s]+)#(\d+) at head SHA ([0-9a-f]+)")
_LEFT_OUT = re.compile(r"\[diff cut at [^:]+: \d+ file\(s\) left out, largest first: (.+?)\. "
                       r"Read them")
_THREAD = re.compile(r"^- ([^\s:]+)(?::\d+)? \(thread \d+; your comment: (.*)\)$")
RETRY = "no review was posted from it"
REJECTIONS = ("intended", "by design", "not a bug", "false positive", "won't fix")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    text: str
    message: str
    source: str = ""   # the added line as written (with its indentation)


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
                    out.append(Finding(path, line, raw[1:].strip(), message, raw[1:]))
                    break
            line += 1
        elif raw.startswith(" "):
            line += 1
    return out


def _prepared_diff(user: str) -> str | None:
    if "\n<diff>\n" not in user:
        return None
    return user.split("\n<diff>\n", 1)[1].split("</diff>", 1)[0]


def _left_out(user: str) -> list[str]:
    m = _LEFT_OUT.search(user)
    if not m:
        return []
    names = re.sub(r" and \d+ more$", "", m.group(1))
    return [re.sub(r" \([^)]*\)$", "", n) for n in names.split(", ")]


def _rejected(user: str) -> set[tuple[str, str]]:
    """(path, first line of its comment) of threads where people rejected the finding."""
    if "<feedback_on_your_threads>" not in user:
        return set()
    block = user.split("<feedback_on_your_threads>", 1)[1].split("</feedback_on_your_threads>")[0]
    out, current = set(), None
    for line in block.split("\n"):
        m = _THREAD.match(line)
        if m:
            current = (m.group(1), m.group(2))
        elif current and line.startswith("  reply ") and any(
                word in line.lower() for word in REJECTIONS):
            out.add(current)
    return out


_OPEN = re.compile(r"^- thread (\d+): ([^\s:]+)(?::\d+)?: (.*)$", re.M)


def fixed_threads(user: str, diff: str) -> list[int]:
    """Open threads (``<your_open_threads>``) whose finding this diff removes: a removed line of
    the thread's file matched the thread's rule and no added line there matches it now."""
    if "<your_open_threads>" not in user:
        return []
    block = user.split("<your_open_threads>", 1)[1].split("</your_open_threads>", 1)[0]
    lines: dict[str, list[str]] = {}
    path = ""
    for raw in diff.split("\n"):
        if raw.startswith("+++ "):
            path = raw[6:] if raw.startswith("+++ b/") else ""
        elif path and raw[:1] in ("+", "-") and not raw.startswith(("+++", "---")):
            lines.setdefault(path, []).append(raw)
    out = []
    for ident, where, first in _OPEN.findall(block):
        rule = next((p for p, message in RULES if first.startswith(message[:40])), None)
        changed = lines.get(where, [])
        if rule is not None and any(x[0] == "-" and rule.search(x[1:]) for x in changed) \
                and not any(x[0] == "+" and rule.search(x[1:]) for x in changed):
            out.append(int(ident))
    return out


def _patches(result: str, wanted: list[str]) -> str:
    """get_files output (JSON file entries) as diff text for the ``wanted`` files."""
    try:
        entries = json.loads(result)
    except json.JSONDecodeError:
        return ""
    if isinstance(entries, dict):
        entries = entries.get("files") or []
    return "".join(f"+++ b/{e['filename']}\n{e.get('patch') or ''}\n" for e in entries
                   if isinstance(e, dict) and e.get("filename") in wanted)


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


_OFF_BY_ONE = re.compile(r"(len\([^)]*\))\s*\+\s*1\)")


def _comment_body(f: Finding) -> str:
    """The finding; a one-line fix it is sure of (the off-by-one) as a GitHub suggestion."""
    body = f"{f.message}\n\n`{f.text}`"
    if f.message.startswith("Off-by-one") and _OFF_BY_ONE.search(f.source):
        body += "\n\n```suggestion\n" + _OFF_BY_ONE.sub(r"\1)", f.source, count=1) + "\n```"
    return body


def compaction_reply(req: ModelRequest) -> Reply:
    """The answer to a compaction request (``is_compaction_request``: it carries the session's
    tools and messages, so a review rule would answer it with a tool call): a summary in text,
    as a model told to call no tool writes one — the findings the folded conversation reported
    (a persona's report lines, a reviewer's comments), by place."""
    folded = req.messages[1:-1]
    lines = [line for m in folded if m["role"] == "assistant"
             for line in (m.get("content") or "").split("\n") if line.startswith("- `")]
    lines += [f"- `{a.get('path')}:{a.get('line')}` {str(a.get('body', '')).split(chr(10))[0]}"
              for name, a in _calls(folded) if name == "add_comment_to_pending_review"]
    found = list(dict.fromkeys(lines))
    return Reply(content="Summary of the review so far: " + (
        f"{len(found)} finding(s) reported.\n" + "\n".join(found) if found
        else "no findings reported."))


def reviewer_policy(req: ModelRequest,
                    find: Callable[[str, ModelRequest], list[Finding]] | None = None,
                    fixed: Callable[[str, ModelRequest], list[int]] | None = None) -> Reply:
    """``find`` and ``fixed`` (optional) replace the rules: what to report, and which open
    threads the push fixed, from the diff / the user text and the request (the eval's
    scripted models answer from a case's ground truth)."""
    if is_compaction_request(req):
        return compaction_reply(req)
    user = req.last_user_text()
    turn = req.since_last_user()
    if user.startswith("Flow: chat"):
        return _chat(req, user)
    if user.startswith("Flow: verify"):
        return verifier_policy(req)
    target = _TARGET.search(user)
    if not user.startswith("Flow: review") or target is None:
        return Reply(content="I only review pull requests.")
    owner, repo, number, head = target.groups()
    pr = {"owner": owner, "repo": repo, "pullNumber": int(number)}
    calls = _calls(turn)
    results = [m["content"] for m in turn if m["role"] == "tool"]
    prepared, left_out = _prepared_diff(user), _left_out(user)
    if prepared is None and RETRY in user:
        # A retry: the material is in the earlier turn that ended without a submit.
        earlier = [m["content"] for m in req.messages
                   if m["role"] == "user" and _prepared_diff(m["content"] or "") is not None]
        if earlier:
            prepared, left_out = _prepared_diff(earlier[-1]), _left_out(earlier[-1])
    if not calls:
        if prepared is None:
            return Reply(content="No diff in the message; reading it.",
                         tool_calls=[("pull_request_read", {**pr, "method": "get_diff"})])
        if left_out:
            return Reply(content=f"{len(left_out)} file(s) were left out of the diff; reading "
                                 "their patches.", tool_calls=[(
                                     "pull_request_read",
                                     {**pr, "method": "get_files", "perPage": 100})])
        return Reply(tool_calls=[("pull_request_review_write", {**pr, "method": "create"})])
    last = calls[-1][0]
    read = next((r for (name, _), r in zip(calls, results, strict=False)
                 if name == "pull_request_read"), "")
    if prepared is None:
        diff = read
    else:
        diff = prepared + (_patches(read, left_out) if left_out else "")
    earlier = _earlier_comments(req)
    rejected = _rejected(user)
    found = find(diff, req) if find is not None else findings_in_diff(diff)
    dropped = [f for f in found if any(
        path == f.path and f.message.startswith(first.rstrip("…").rstrip())
        for path, first in rejected)]
    new = [f for f in found if (f.path, _comment_body(f)) not in earlier and f not in dropped]
    if last == "pull_request_read":
        return Reply(tool_calls=[("pull_request_review_write", {**pr, "method": "create"})])
    if last == "pull_request_review_write" and calls[-1][1].get("method") == "create":
        if new:
            return Reply(content=f"Commenting on {len(new)} finding(s).", tool_calls=[
                ("add_comment_to_pending_review",
                 {**pr, "path": f.path, "body": _comment_body(f),
                  "severity": severity_of(f.message), "subjectType": "LINE",
                  "line": f.line, "side": "RIGHT"}) for f in new])
        last = "add_comment_to_pending_review"
    if last == "add_comment_to_pending_review":
        if new:
            summary = (f"Found {len(new)} issue(s) at head {head}: "
                       + "; ".join(f"{f.path}:{f.line}" for f in new) + ".")
        else:
            summary = "No new findings in this revision."
        if rejected:
            summary += (f" Dropped {len(rejected)} finding(s) people explained as intended.")
        if earlier:
            summary += f" {len(earlier)} earlier finding(s) were reported in previous reviews."
        submit = {**pr, "method": "submit_pending", "event": "COMMENT", "body": summary}
        fixed_ids = fixed(user, req) if fixed is not None else fixed_threads(user, diff)
        if fixed_ids:
            # The bot's body lists them by place and first words: no internal ids here.
            submit["fixedThreads"] = fixed_ids
        return Reply(tool_calls=[("pull_request_review_write", submit)])
    return Reply(content="Review submitted.")


def _fixed_later(req: ModelRequest, comment: dict[str, Any]) -> bool:
    """Whether a later review of this conversation named ``comment``'s thread as fixed (the
    open-threads list of that review's message gives each id's place and first words)."""
    fixed = {i for name, a in _calls(req.messages)
             if name == "pull_request_review_write" for i in a.get("fixedThreads") or []}
    if not fixed:
        return False
    first = str(comment.get("body", "")).split("\n", 1)[0]
    for m in req.messages:
        if m["role"] != "user" or "<your_open_threads>" not in (m.get("content") or ""):
            continue
        for ident, where, text in _OPEN.findall(m["content"]):
            if int(ident) in fixed and where == comment.get("path") and first.startswith(
                    text.rstrip("…").rstrip()):
                return True
    return False


# The second look's known policy (a verifier that is sure of these): findings starting with a
# VERIFY_DROP prefix are dropped, those starting with a VERIFY_LOWER key lowered to its value,
# every other one kept. In the shop scenario: the off-by-one is dropped, the SQL injection
# lowered to major, the eval kept.
VERIFY_DROP = ("Off-by-one",)
VERIFY_LOWER = {"SQL built": "major"}
_VERIFY_TARGET = re.compile(r"drafted for ([^/\s]+)/([^#\s]+)#(\d+) at head SHA ([0-9a-f]+)")
_DRAFTED = re.compile(r"^(\d+)\. \[(\w+)\] (\S+)\n   (.*)$", re.M)


def verifier_policy(req: ModelRequest) -> Reply:
    """The second look: read the first finding's file once (the guarded read tools work in
    the verifier's turn), then one conclusion-first line per finding."""
    user = req.last_user_text()
    target = _VERIFY_TARGET.search(user)
    drafted = _DRAFTED.findall(user)
    if target is None:
        return Reply(content="Nothing to check.")
    owner, repo, _, head = target.groups()
    if not _calls(req.since_last_user()) and drafted:
        path = drafted[0][2].split(":", 1)[0]
        return Reply(tool_calls=[("get_file_contents", {"owner": owner, "repo": repo,
                                                        "path": path, "sha": head})])
    lines = []
    for n, _sev, where, first in drafted:
        first = re.sub(r"^\[[\w-]+\]\s*", "", first)   # a team's "[persona] " prefix
        if first.startswith(VERIFY_DROP):
            lines.append(f"{n} drop — {where}: the code at this line does not do that.")
        elif (low := next((v for k, v in VERIFY_LOWER.items() if first.startswith(k)), None)):
            lines.append(f"{n} lower {low} — {where}: real, but only reachable by admins.")
        else:
            lines.append(f"{n} keep — {where}: confirmed.")
    return Reply(content="\n".join(lines))


def _chat(req: ModelRequest, user: str) -> Reply:
    question = user.split("<question>", 1)[-1].split("</question>", 1)[0].strip()
    if "say nothing" in question.lower():
        return Reply(content="")  # an empty answer: nothing must be posted
    earlier = [a for name, a in _calls(req.messages) if name == "add_comment_to_pending_review"
               and not _fixed_later(req, a)]
    if not earlier:
        return Reply(content=f"You asked: {question}\n\nI have not reported any findings on "
                             "this pull request.")
    lines = "\n".join(f"- `{a.get('path')}` line {a.get('line')}: "
                      f"{a.get('body', '').split(chr(10))[0]}" for a in earlier)
    return Reply(content=f"You asked: {question}\n\nFrom my reviews of this pull request:\n"
                         f"{lines}")
