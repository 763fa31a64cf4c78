"""The PR page (``dsh_web_session_view``): the reviews as posted — summary and each inline
comment with its file, line, diff excerpt and GitHub link — then the ``/bot`` questions and
answers as a conversation. Built from the session's events only (what the guard accepted), so
it shows what went to GitHub without asking GitHub.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from ..app.pr_state import LAST_TURN, from_facts
from ..core.session_key import parse_session_id
from ..core.severity import SEVERITIES
from ..core.triggers import Trigger, meta_trigger
from ..turn.prompts import ASKED
from .facts import COMMENT_TOOL, CREATE, REVIEW_TOOLS, SUBMIT, call_method, review_url, web_url
from .findings import FindingBook

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_FILE = re.compile(r"^diff --git a/(.*?) b/(.*)$")
_LEGACY_ASKER = re.compile(r"^Flow: chat\. (\S+) asked with /bot on ")
_LEGACY_WHERE = ("The question was asked on ", " (a review-thread comment).")
_LINE_AT_END = re.compile(r" line (\d+)$")
QUESTION = ("\n\n<question>\n", "\n</question>")
BODY_END = "\n</pull_request_body>"
DIFF_START = "\n\n<diff>\n"
EXCERPT_LINES = 6


@dataclass
class DiffLine:
    old: int | None
    new: int | None
    text: str


def parse_diff(text: str) -> dict[str, list[DiffLine]]:
    """Every file section of a ``git diff``-style text: path -> its hunk lines."""
    files: dict[str, list[DiffLine]] = {}
    current: list[DiffLine] | None = None
    old = new = 0
    for raw in text.split("\n"):
        m = _FILE.match(raw)
        if m:
            current = files.setdefault(m.group(2), [])
            continue
        h = _HUNK.match(raw)
        if h and current is not None:
            old, new = int(h.group(1)), int(h.group(2))
            current.append(DiffLine(None, None, raw))
            continue
        if current is None or not current:
            continue
        tag = raw[:1]
        if tag == "+":
            current.append(DiffLine(None, new, raw))
            new += 1
        elif tag == "-":
            current.append(DiffLine(old, None, raw))
            old += 1
        elif tag == " ":
            current.append(DiffLine(old, new, raw))
            old, new = old + 1, new + 1
    return files


def excerpt(diff: dict[str, list[DiffLine]], path: str, line: int | None, side: str | None,
            start: int | None) -> list[dict[str, Any]]:
    """The diff lines up to the commented line (a few before it, or the commented range)."""
    lines = diff.get(path)
    if not lines or line is None:
        return []
    pick = (lambda d: d.old) if side == "LEFT" else (lambda d: d.new)
    end = next((i for i, d in enumerate(lines) if pick(d) == line), None)
    if end is None:
        return []
    first = start if start is not None and start <= line else line - EXCERPT_LINES + 1
    begin = end
    while begin > 0 and end - begin < 2 * EXCERPT_LINES:
        prev = lines[begin - 1]
        if prev.old is None and prev.new is None:
            break  # the hunk header
        n = pick(prev)
        if n is not None and n < first:
            break
        begin -= 1
    return [{"old": d.old, "new": d.new, "text": d.text, "target": i == end or (
        start is not None and pick(d) is not None and start <= pick(d) <= line)}
        for i, d in enumerate(lines[begin:end + 1], start=begin)]


def question_link(pr_url: str | None, trigger: Trigger | None, in_thread: bool) -> str | None:
    """The ``/bot`` comment on GitHub: the chat trigger names its comment id (None: a session
    meta from elsewhere, no link)."""
    ident = trigger.comment_id if trigger is not None else None
    if not pr_url or not pr_url.startswith(("https://", "http://")) or ident is None:
        return None
    return f"{pr_url}#discussion_r{ident}" if in_thread else f"{pr_url}#issuecomment-{ident}"


def comment_link(pr_url: str | None, path: str, line: int | None, side: str | None) -> str | None:
    """GitHub's anchor for a line in the PR's files view (``#diff-<sha256(path)>R<line>``)."""
    if not pr_url or not pr_url.startswith(("https://", "http://")):
        return None
    anchor = hashlib.sha256(path.encode()).hexdigest()
    where = f"{'L' if side == 'LEFT' else 'R'}{line}" if line else ""
    return f"{pr_url}/files#diff-{anchor}{where}"


@dataclass
class Review:
    turn: int
    at: str | None = None
    head: str | None = None
    body: str = ""
    comments: list[dict[str, Any]] = field(default_factory=list)
    posted: bool = False
    outcome: str = ""
    url: str | None = None  # the review on GitHub (recorded since the guard notes it)


@dataclass
class Exchange:
    turn: int
    at: str
    asker: str
    question: str
    path: str | None = None
    line: int | None = None
    answer: str | None = None
    outcome: str = ""
    link: str | None = None


def diff_part(text: str) -> str:
    """The prepared diff of a user message: the bot's ``<diff>`` part after the PR body (a
    body, written by the PR author, could hold a look-alike one)."""
    at = text.find(DIFF_START, max(0, text.rfind(BODY_END)))
    if at < 0:
        return ""
    end = text.find("\n</diff>", at)
    return text[at:end if end >= 0 else None]


def asked(turn: int, at: str, meta: dict[str, Any], text: str) -> Exchange:
    """A ``/bot`` question: who asked and where from the turn meta (``asked``); the question
    is the bot's ``<question>`` part that ends the message. A turn recorded before the meta
    existed reads who and where from the bot's own first two lines only (a question's text
    comes after them and cannot reach them)."""
    question = text
    head, sep, rest = text.partition(QUESTION[0])
    if sep and rest.endswith(QUESTION[1]):
        question = rest[:-len(QUESTION[1])]
    info = meta.get(ASKED)
    if isinstance(info, dict):
        path = info.get("path") if isinstance(info.get("path"), str) else None
        return Exchange(turn=turn, at=at, asker=str(info.get("by") or "someone"),
                        question=question, path=path,
                        line=_int(info.get("line")) if path else None)
    who, path, line = "someone", None, None
    if sep:
        lines = head.split("\n")
        if m := _LEGACY_ASKER.match(lines[0]):
            who = m.group(1)
        if len(lines) > 1 and lines[1].startswith(_LEGACY_WHERE[0]) \
                and lines[1].endswith(_LEGACY_WHERE[1]):
            path = lines[1][len(_LEGACY_WHERE[0]):-len(_LEGACY_WHERE[1])]
            if m := _LINE_AT_END.search(path):
                path, line = path[:m.start()], int(m.group(1))
    return Exchange(turn=turn, at=at, asker=who, question=question, path=path, line=line)


def build(session: Any, events: list, facts: dict[str, Any],
          state: tuple[str, str] | None = None) -> dict[str, Any] | None:
    """The PR page; ``state`` is (state, why) from the PR's work record when there is one."""
    key = parse_session_id(session.id)
    if key is None:
        return None
    pr = dict(facts.get("pr") or {})
    pr["state"], pr["state_why"] = state or (from_facts(pr), LAST_TURN)
    pr_url = pr["url"] = web_url(pr.get("url"))
    reviews: list[Review] = []
    chats: list[Exchange] = []
    diff: dict[str, list[DiffLine]] = {}
    flow, review, chat = "", None, None
    trigger: Trigger | None = None
    calls: dict[str, tuple[str, str, dict[str, Any]]] = {}
    drafted: list[dict[str, Any]] = []
    book = FindingBook()
    turn_meta: dict[str, Any] = {}
    for e in events:
        kind = e.type
        if kind == "turn_start":
            meta = turn_meta = e.meta or {}
            flow = str(meta.get("flow", ""))
            info = meta.get("pr") if isinstance(meta.get("pr"), dict) else {}
            review = Review(turn=e.turn, head=info.get("head")) if flow == "review" else None
            chat = None
            trigger = meta_trigger(meta)
            calls, drafted = {}, []
        elif kind == "user_message":
            if flow == "review":
                book.review_turn(turn_meta, e.content)
            diff.update(parse_diff(diff_part(e.content)))
            if flow == "chat" and chat is None:
                chat = asked(e.turn, e.at.isoformat(), turn_meta, e.content)
                chat.link = question_link(pr_url, trigger, chat.path is not None)
                chats.append(chat)
        elif kind == "assistant_message":
            for c in e.tool_calls:
                method, args = call_method(c.name, c.arguments)
                calls[c.id] = (c.name, method, args)
            if chat is not None and e.content and not e.tool_calls:
                chat.answer = e.content
        elif kind == "tool_result":
            name, method, args = calls.pop(e.call_id, ("", "", {}))
            if e.is_error:
                continue
            if (name == "pull_request_read" and method == "get_diff") or name == (
                    "get_pull_request_diff"):
                diff.update(parse_diff(e.content))
            elif review is not None and name in REVIEW_TOOLS and method in CREATE:
                review.head = args.get("commitID") or review.head
            elif review is not None and name == COMMENT_TOOL:
                drafted.append(args)
            elif review is not None and name in REVIEW_TOOLS and method in SUBMIT:
                review.at, review.body, review.posted = e.at.isoformat(), str(
                    args.get("body", "")), True
                review.url = review_url(e.note)
                book.submitted(args)
                review.comments = [_comment(a, diff, pr_url) for a in drafted]
                reviews.append(review)
        elif kind == "turn_end":
            if review is not None and not review.posted:
                review.at = e.at.isoformat()
                review.outcome = e.error or (e.reason if e.reason != "completed"
                                             else "finished without submitting a review")
                reviews.append(review)
            if chat is not None:
                chat.outcome = "" if e.reason == "completed" else (e.error or e.reason)
            review, chat = None, None
    reviews.reverse()  # newest first
    posted = [r for r in reviews if r.posted]
    findings, seen = [], set()
    for r in posted:
        for c in r.comments:
            c["status"] = book.status(c["path"], c["line"], c["body"])
            ident = (c["path"], c["line"], c["body"].split("\n", 1)[0])
            if ident not in seen:
                seen.add(ident)
                findings.append({**c, "head": r.head, "turn": r.turn})
    title = f"{key.owner}/{key.repo}#{key.number}" + (f": {pr['title']}" if pr.get("title") else "")
    return {"template": "pr_review.html", "title": title, "context": {
        "pr": pr, "key": key, "latest": posted[0] if posted else None,
        "reviews": reviews, "chats": chats, "pr_url": pr_url, "findings": findings}}


def _comment(args: dict[str, Any], diff: dict[str, list[DiffLine]], pr_url: str | None
             ) -> dict[str, Any]:
    path = str(args.get("path", ""))
    line = _int(args.get("line"))
    side = args.get("side") if args.get("side") in ("LEFT", "RIGHT") else "RIGHT"
    start = _int(args.get("startLine"))
    sev = args.get("severity")
    return {"path": path, "line": line, "side": side, "start_line": start,
            "body": str(args.get("body", "")),
            "severity": sev if sev in SEVERITIES else None,
            "file_level": args.get("subjectType") == "FILE",
            "excerpt": excerpt(diff, path, line, side, start),
            "link": comment_link(pr_url, path, line, side)}


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
