"""A scripted history of PR sessions and work records whose noise figures and needs-attention
list are known by hand (shared by the ASGI and the Chromium tests)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from dsh_github_reviewer.core.session_key import PrKey, PrRef
from dsh_github_reviewer.work.records import DOMAIN, Notice, PrRecord
from dsh_github_reviewer.work.store import WorkStore
from dsh_harness.sessions.events import (
    AssistantMessage,
    TitleSet,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)

SUGGESTION = "Use a constant.\n```suggestion\nLIMIT = 10\n```"


def finding(path: str, line: int, severity: str, body: str) -> dict[str, Any]:
    return {"path": path, "line": line, "side": "RIGHT", "subjectType": "LINE",
            "severity": severity, "body": body}


def told(places: dict[int, dict[str, Any]], threads: dict[int, str] | None = None,
         facts: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"told": {"base_ref": "main", "head": "c" * 40,
                     "places": {str(i): {"path": f["path"], "line": f["line"],
                                         "first": f["body"].split("\n")[0]}
                                for i, f in places.items()},
                     "threads": {str(i): v for i, v in (threads or {}).items()},
                     "facts": list(facts)}}


async def pr_history(h, repo: str, number: int, title: str,
                     reviews: list[tuple[dict[str, Any], list[dict[str, Any]], list[int]]],
                     ) -> None:
    """One PR session: each review turn (its meta, the findings it posts, its fixedThreads)."""
    owner, name = repo.split("/")
    sid = PrKey("demo", owner, name, number).session_id
    s = await h.sessions.create(sid, {"owner": owner, "repo": name, "number": number,
                                      "url": f"https://github.com/{repo}/pull/{number}"})
    await s.record(TitleSet, title=f"Review {repo} PR {number}", pinned=True)
    pr = {"title": title, "author": "alice", "state": "open", "head": "c" * 40}
    for turn, (meta, comments, fixed) in enumerate(reviews, start=1):
        await s.record(TurnStart, turn=turn, meta={"flow": "review", "trigger": f"t{turn}",
                                                   "pr": pr, **meta})
        await s.record(UserMessage, turn=turn, content="Flow: review.")
        submit: dict[str, Any] = {"method": "submit_pending", "event": "COMMENT", "body": "B"}
        if fixed:
            submit["fixedThreads"] = fixed
        calls = [("pull_request_review_write", {"method": "create", "commitID": "c" * 40}),
                 *[("add_comment_to_pending_review", c) for c in comments],
                 ("pull_request_review_write", submit)]
        for i, (tool, args) in enumerate(calls):
            c = ToolCall(id=f"c{turn}-{i}", name=tool, arguments=json.dumps(args))
            await s.record(AssistantMessage, turn=turn, content=None, tool_calls=[c],
                           usage={"uncached_input": 100, "cache_read": 300, "output": 10,
                                  "cost_usd": 0.01})
            await s.record(ToolResult, turn=turn, call_id=c.id, name=tool, content="ok")
        await s.record(TurnEnd, turn=turn, reason="completed")
    await h.sessions.release(sid)


A = finding("app/a.py", 1, "critical", "SQL injection in find()")
B = finding("app/a.py", 2, "major", "Unchecked input")
C = finding("app/my file.py", 3, "minor", SUGGESTION)
D = finding("app/b.py", 5, "critical", "Secret logged")
E = finding("lib/e.py", 7, "major", "Race on the cache")
F = finding("app/f.py", 9, "critical", "Crash on empty input")

# By hand. acme/shop: A fixed, B dismissed (resolved by a person), C open minor (PR 1);
# D open critical (PR 2); F open critical on a merged PR (PR 5) -> 5 posted, 1 fixed (20 %),
# 1 dismissed (20 %), 3 open (60 %), 3 reviewed PRs. acme/api: E dismissed by 👎 (PR 3).
SHOP = {"posted": 5, "fixed": 1, "dismissed": 1, "open": 3, "suggestions": 1,
        "fixed_pct": 20.0, "dismissed_pct": 20.0, "open_pct": 60.0, "reviewed_prs": 3,
        "open_by_severity": {"critical": 2, "minor": 1}}
API = {"posted": 1, "fixed": 0, "dismissed": 1, "open": 0, "dismissed_pct": 100.0}
# Needs a maintainer: PR 2 (open critical), PR 3 (gave up), PR 4 (paused with /bot pause),
# PR 6 (its account's model key was rejected, a review owed). Not PR 1 (only a minor open),
# not PR 5 (merged).
ATTENTION = {("acme/shop", 2): ["critical"], ("acme/api", 3): ["failed"],
             ("acme/api", 4): ["paused"], ("acme/shop", 6): ["failed", "paused"]}


async def build_history(h) -> None:
    await pr_history(h, "acme/shop", 1, "Query fixes", [
        ({}, [A, B, C], []),
        (told({11: A, 12: B, 13: C}, threads={12: "resolved"}), [], [11]),
    ])
    await pr_history(h, "acme/shop", 2, "Logging", [({}, [D], [])])
    await pr_history(h, "acme/api", 3, "Cache", [
        ({}, [E], []), (told({21: E}, facts=("reactions:21:0:3:1",)), [], [])])
    await pr_history(h, "acme/shop", 5, "Merged one", [({}, [F], [])])
    store = WorkStore(await h.storage.domain(DOMAIN), "demo")
    now = datetime.now(UTC)

    def rec(**kw):
        return lambda _: PrRecord(head_sha="c" * 40, updated_at=now, **kw)
    await store.update_pr(PrRef("demo", "acme/shop", 1), rec(status="reviewed"))
    await store.update_pr(PrRef("demo", "acme/shop", 2), rec(status="reviewed"))
    await store.update_pr(PrRef("demo", "acme/api", 3), rec(
        status="gave_up", fail_count=5, last_error="HTTP 502",
        notices=[Notice(trigger="demo:auto:" + "c" * 40, what="the review",
                        error="GitHub answered 502", created_at=now, posted=True)]))
    await store.update_pr(PrRef("demo", "acme/api", 4), rec(
        status="reviewing", title="Paused one", paused_by="maintainer", paused_at=now))
    await store.update_pr(PrRef("demo", "acme/shop", 5), rec(
        status="reviewed", closed_seen_at=now, merged=True))
    await store.update_pr(PrRef("demo", "acme/shop", 6), rec(
        status="reviewing", title="Owed", fail_count=1, last_error="model key rejected",
        last_failed_at=now))

    def paused(a):
        a.paused_until = now + timedelta(hours=1)
        a.pause_reason = "the model provider rejected the key"
        return a
    await store.update_account(paused)
