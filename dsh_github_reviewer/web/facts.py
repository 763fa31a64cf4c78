"""What the web index shows per PR, folded from a PR session's new events
(``dsh_web_session_facts``): title, author, state, head, and the last review — when, on which
head, its outcome and number of findings — plus counts of posted reviews and ``/bot`` questions.

The posted review is read from the log as the guard sees it: ``pull_request_review_write``
``method=create`` starts the local draft, each accepted ``add_comment_to_pending_review`` adds
a finding, an accepted ``method=submit_pending`` posts it. A tool result with ``is_error`` means
the guard refused the call, so it does not count. Facts are plain JSON (kept in the web index);
keys starting with ``_`` are fold state, not shown.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

from ..core.session_key import parse_session_id
from ..turn.told import TOLD
from . import noise

SUBMIT = {"submit_pending", "submit_pending_pull_request_review"}
CREATE = {"create", "create_pending_pull_request_review"}
COMMENT_TOOL = "add_comment_to_pending_review"
REVIEW_TOOLS = {"pull_request_review_write", "create_pending_pull_request_review",
                "submit_pending_pull_request_review"}


# Characters that never pass in a link from data; format characters (Cf: bidi controls,
# zero-width ones) are all outside ASCII and checked one by one only in non-ASCII links.
_ASCII_BAD = re.compile(r"[\s\"'<>\\`\x00-\x1f\x7f]")


def web_url(value: Any) -> str | None:
    """An http(s) address with a host, else None: a link copied from data (a session's
    ``meta.url``, a note) is never ``javascript:``, ``data:`` or a path into this UI."""
    if not isinstance(value, str):
        return None
    return _checked_url(value)


@functools.lru_cache(maxsize=32_768)
def _checked_url(value: str) -> str | None:
    # Cached: the PR list checks every row's link again whenever it is rebuilt (10,000 PRs).
    if _ASCII_BAD.search(value) or (not value.isascii() and any(
            ch.isspace() or unicodedata.category(ch) == "Cf" for ch in value)):
        return None
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc \
            or not value.lower().startswith(parts.scheme.lower() + "://"):
        return None
    return value


def review_url(note: str | None) -> str | None:
    """The posted review's URL, from the note the guard puts on an accepted submit's result."""
    return web_url((note or "").removeprefix("review "))


def call_method(name: str, arguments: str) -> tuple[str, dict[str, Any]]:
    """(method, arguments) of a tool call; the method is the tool name for old dialects."""
    try:
        args = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        args = {}
    if not isinstance(args, dict):
        args = {}
    consolidated = name in ("pull_request_review_write", "pull_request_read")
    method = str(args.get("method", "")) if consolidated else name
    return method, args


def new_facts(session: Any) -> dict[str, Any] | None:
    key = parse_session_id(session.id)
    if key is None:
        return None
    meta = session.meta or {}
    return {"account": key.account, "owner": meta.get("owner") or key.owner,
            "repo": meta.get("repo") or key.repo, "number": key.number, "persona": key.persona,
            "url": web_url(meta.get("url")),
            "title": None, "author": None, "state": None, "head": None, "reviews": 0,
            "questions": 0, "findings": 0, "last_review": None, "last_outcome": None,
            "noise": noise.empty(),
            "_turn": None, "_calls": {}, "_draft": None, "_posted": False,
            "_book": None, "_findings": []}


def fold(pr: dict[str, Any], events: list) -> None:
    book = noise.load_book(pr.get("_book"))
    posted = pr.setdefault("_findings", [])
    changed = False
    for e in events:
        kind = e.type
        if kind == "turn_start":
            meta = e.meta or {}
            info = meta.get("pr") if isinstance(meta.get("pr"), dict) else {}
            for field in ("title", "author", "state", "head"):
                if info.get(field):
                    pr[field] = str(info[field])
            if "draft" in info or "merged" in info:   # recorded since the header says so
                pr["draft"], pr["merged"] = bool(info.get("draft")), bool(info.get("merged"))
            flow = str(meta.get("flow", ""))
            pr["_turn"] = {"turn": e.turn, "flow": flow, "head": info.get("head"),
                           "told": meta.get(TOLD) if isinstance(meta.get(TOLD), dict) else None}
            pr["_draft"], pr["_calls"], pr["_posted"] = None, {}, False
            if flow == "chat":
                pr["questions"] += 1
        elif kind == "user_message":
            turn = pr["_turn"] or {}
            if turn.get("flow") == "review" and not turn.get("seen"):
                turn["seen"] = True   # the turn's first message is the bot's review message
                told = turn.get("told")
                book.review_turn({TOLD: told} if told else {}, e.content)
                changed = True
        elif kind == "assistant_message":
            for c in e.tool_calls:
                if c.name in REVIEW_TOOLS or c.name == COMMENT_TOOL:
                    method, args = call_method(c.name, c.arguments)
                    pr["_calls"][c.id] = {"name": c.name, "method": method,
                                          "commit": args.get("commitID")}
                    if c.name == COMMENT_TOOL:
                        pr["_calls"][c.id]["finding"] = noise.posted_item(args)
                    elif method in SUBMIT:
                        fixed = args.get("fixedThreads")
                        pr["_calls"][c.id]["fixed"] = fixed if isinstance(fixed, list) else []
        elif kind == "tool_result":
            call = pr["_calls"].pop(e.call_id, None)
            if call is None or e.is_error:
                continue
            if call["method"] in CREATE and pr["_draft"] is None:
                pr["_draft"] = {"head": call["commit"], "findings": 0, "items": []}
            elif call["name"] == COMMENT_TOOL and pr["_draft"] is not None:
                pr["_draft"]["findings"] += 1
                pr["_draft"].setdefault("items", []).append(call.get("finding"))
            elif call["method"] in SUBMIT and pr["_draft"] is not None:
                turn = pr["_turn"] or {}
                pr["reviews"] += 1
                pr["findings"] = pr.get("findings", 0) + pr["_draft"]["findings"]
                pr["_posted"] = True
                book.submitted({"fixedThreads": call.get("fixed", [])})
                day = e.at.date().isoformat()
                posted += [{**f, "day": day} for f in pr["_draft"].get("items", []) if f]
                changed = True
                pr["last_review"] = {"at": e.at.isoformat(), "turn": turn.get("turn"),
                                     "head": pr["_draft"]["head"] or turn.get("head"),
                                     "findings": pr["_draft"]["findings"],
                                     "url": review_url(e.note)}
                pr["last_outcome"] = "posted"
        elif kind == "turn_end":
            turn = pr["_turn"] or {}
            if turn.get("flow") == "review" and not pr["_posted"]:
                why = e.error or e.reason
                pr["last_outcome"] = (f"not posted ({why})" if e.reason != "completed"
                                      else "not posted (finished without submitting)")
            pr["_turn"], pr["_calls"] = None, {}
    if changed:
        pr["_book"] = noise.dump_book(book)
        pr["noise"] = noise.figures(posted, book)


def update(session: Any, facts: dict[str, Any], events: list) -> None:
    """``dsh_web_session_facts`` for PR sessions: ``facts["pr"]``."""
    pr = facts.get("pr")
    if pr is None:
        pr = new_facts(session)
        if pr is None:
            return
        facts["pr"] = pr
    fold(pr, events)
