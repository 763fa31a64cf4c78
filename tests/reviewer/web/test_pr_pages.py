"""The reviewer's PR pages over logs shaped like the guard writes them (fast, ASGI transport);
the real loop's PR page is checked in Chromium by test_browser.py."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import httpx2
import pytest

import dsh_github_reviewer.plugin as reviewer_plugin
from dsh_github_reviewer.core.session_key import PrKey, PrRef
from dsh_github_reviewer.web.view import excerpt, parse_diff
from dsh_harness import Harness, parse_config
from dsh_harness.sessions.events import (
    AssistantMessage,
    TitleSet,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from dsh_harness.testing import ScriptedModelServer
from dsh_harness.web.app import build_app
from tests.harness.agent_kit import config_text
from tests.harness.web.test_security import XSS, TagAudit

SID = PrKey("demo", "acme", "shop", 7).session_id
DIFF = """<diff>
diff --git a/app/db.py b/app/db.py
--- a/app/db.py
+++ b/app/db.py
@@ -10,4 +10,6 @@ def find(db, name):
     cur = db.cursor()
-    q = "SELECT 1"
+    q = "SELECT * FROM t WHERE name = '" + name + "'"
+    cur.execute(q)
     return cur.fetchall()
 # end
</diff>"""


def make(tmp_path: Path, server, env: dict | None = None) -> Harness:
    text = config_text(server.base_url) + ('[providers.other]\nbase_url = "http://127.0.0.1:9"\n'
                                           'api_key_env = "DSH_TEST_SECRET"\n')
    return Harness(parse_config(text, "t.toml", tmp_path), load_entry_points=False,
                   env=env or {}, plugins=[("github-reviewer", reviewer_plugin)])


async def pr_session(h: Harness, sid: str = SID, title: str = "Fix the query",
                     comment: str = "SQL built by **concatenation**", summary: str = "Found 1",
                     question: str = "why?", answer: str = "Because.",
                     url: str = "https://github.example/acme/shop/pull/7") -> None:
    s = await h.sessions.create(sid, {"owner": "acme", "repo": "shop", "number": 7,
                                      "url": url})
    await s.record(TitleSet, title="Review acme/shop PR 7", pinned=True)
    pr = {"title": title, "author": "alice", "state": "open", "head": "a" * 40}
    await s.record(TurnStart, turn=1, meta={"flow": "review", "trigger": "t1", "pr": pr})
    await s.record(UserMessage, turn=1, content="Flow: review.\n\n" + DIFF)

    async def call(name, args, result, error=False):
        c = ToolCall(id=f"c{len(s.events)}", name=name, arguments=json.dumps(args))
        await s.record(AssistantMessage, turn=1, content=None, tool_calls=[c])
        await s.record(ToolResult, turn=1, call_id=c.id, name=name, content=result,
                       is_error=error)

    await call("pull_request_review_write", {"method": "create", "commitID": "b" * 40},
               "Pending review started.")
    await call("add_comment_to_pending_review", {"path": "app/db.py", "line": 12,
                                                 "side": "RIGHT", "subjectType": "LINE",
                                                 "severity": "major",
                                                 "body": comment}, "Added (1 pending).")
    await call("add_comment_to_pending_review", {"path": "nope.py", "line": 1,
                                                 "side": "RIGHT", "subjectType": "LINE",
                                                 "severity": "major",
                                                 "body": "refused"}, "not in the diff",
               error=True)
    await call("pull_request_review_write", {"method": "submit_pending", "event": "COMMENT",
                                             "body": summary}, "Submitted with 1 comment(s).")
    await s.record(AssistantMessage, turn=1, content="Review submitted.")
    await s.record(TurnEnd, turn=1, reason="completed")
    await s.record(TurnStart, turn=2, meta={"flow": "chat", "trigger": "demo:chat:991",
                                            "pr": pr})
    await s.record(UserMessage, turn=2, content=(
        "Flow: chat. bob asked with /bot on acme/shop#7 (head SHA x).\nAnswer...\n\n"
        f"<question>\n{question}\n</question>"))
    await s.record(AssistantMessage, turn=2, content=answer)
    await s.record(TurnEnd, turn=2, reason="completed")
    await s.record(TurnStart, turn=3, meta={"flow": "review", "trigger": "t2", "pr": pr})
    await s.record(AssistantMessage, turn=3, content="I decline.")
    await s.record(TurnEnd, turn=3, reason="completed")
    await h.sessions.release(sid)


async def pr_page(c: httpx2.AsyncClient, number: int) -> str:
    """The PR page's header (the reviewer's part above the raw turns)."""
    sid = PrKey("demo", "acme", "shop", number).session_id
    text = (await c.get("/sessions/" + sid.replace(":", "%3A"))).text
    return text.split('<section class="pr-facts">', 1)[1].split("</section>", 1)[0]


def client(h: Harness) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=build_app(h)),
                              base_url="http://127.0.0.1")


@pytest.fixture
def server():
    with ScriptedModelServer() as s:
        yield s


async def test_pr_facts_count_only_what_the_guard_accepted(tmp_path, server):
    h = make(tmp_path, server)
    await pr_session(h)
    async with client(h) as c:
        row = (await c.get("/api/sessions")).json()["sessions"][0]
        pr = row["facts"]["pr"]
        assert (pr["title"], pr["author"], pr["state"]) == ("Fix the query", "alice", "open")
        assert pr["last_review"]["findings"] == 1, "the refused comment does not count"
        assert pr["last_review"]["head"] == "b" * 40 and pr["reviews"] == 1
        assert pr["questions"] == 1
        assert not [k for k in pr if k.startswith("_")], "fold state stays internal"
        assert pr["last_outcome"] == "not posted (finished without submitting)"
        prs = (await c.get("/api/github-reviewer/prs")).json()
        assert prs["prs"][0]["title"] == "Fix the query" and prs["prs"][0]["turns"] == 3
        assert prs["repositories"]["acme/shop"]["prs"] == 1
        assert prs["accounts"]["demo"]["reviews"] == 1
        page = (await c.get("/sessions/" + SID.replace(":", "%3A"))).text
        assert "Review as posted" in page and "<strong>concatenation</strong>" in page
        assert 'class="add target"' in page, "the commented line is marked in the excerpt"
        assert "https://github.example/acme/shop/pull/7/files#diff-" in page
        assert "refused" not in page.split('<details class="raw"')[0]
        assert "not posted: finished without submitting a review" in page
        assert "Because." in page and "bob asked" in page
        assert "https://github.example/acme/shop/pull/7#issuecomment-991" in page
        assert (await c.get("/prs?q=alice")).text.count('class="title"') == 1
        assert (await c.get("/prs?q=nobody")).text.count('class="title"') == 0
    await h.close()


def test_diff_excerpt_ends_at_the_commented_line_on_either_side():
    diff = parse_diff(DIFF)
    right = excerpt(diff, "app/db.py", 12, "RIGHT", None)
    assert right[-1]["new"] == 12 and right[-1]["target"]
    assert any(d["text"].startswith("-") for d in right), "removed lines in the range stay"
    left = excerpt(diff, "app/db.py", 11, "LEFT", None)
    assert left[-1]["old"] == 11 and left[-1]["text"].startswith("-")
    ranged = excerpt(diff, "app/db.py", 13, "RIGHT", 12)
    assert [d["new"] for d in ranged if d["target"]] == [12, 13]
    assert excerpt(diff, "other.py", 1, "RIGHT", None) == []
    assert excerpt(diff, "app/db.py", 99, "RIGHT", None) == []


async def test_xss_corpus_over_pr_titles_bodies_comments_and_questions(tmp_path, server):
    h = make(tmp_path, server)
    for i, text in enumerate(XSS):
        await pr_session(h, PrKey("demo", "acme", "shop", i + 1).session_id, title=text,
                         comment=f"comment {text}", summary=f"summary {text}",
                         question=f"question {text}", answer=f"answer {text}")
    async with client(h) as c:
        urls = ["/prs", "/prs?q=script", "/"] + [
            "/sessions/" + PrKey("demo", "acme", "shop", i + 1).session_id.replace(":", "%3A")
            for i in range(len(XSS))]
        for url in urls:
            r = await c.get(url)
            assert r.status_code == 200, url
            audit = TagAudit()
            audit.feed(r.text)
            # The charts are the only SVG, drawn by the server.
            problems = [p for p in audit.problems if p != "<svg>"]
            scripts = {s.split("?v=")[0] for s in audit.scripts}
            assert problems == [] and scripts <= {"/static/app.js"}, (url, problems)
            assert r.text.count("<svg") == r.text.count('<figure class="chart"><svg'), url
    await h.close()


async def test_a_secret_in_a_posted_comment_is_redacted_on_the_pr_page(tmp_path, server):
    secret = "ghp_&<>\"'" + "s" * 30
    h = make(tmp_path, server, env={"DSH_TEST_SECRET": secret})
    await pr_session(h, comment=f"leaked {secret}", summary=f"sum {secret}",
                     question=f"q {secret}", title=f"t {secret}")
    async with client(h) as c:
        for url in ["/prs", "/api/github-reviewer/prs", "/sessions/" + SID.replace(":", "%3A"),
                    "/api/sessions"]:
            text = (await c.get(url)).text
            assert "s" * 30 not in text, url
    await h.close()


def test_only_a_web_url_in_the_submit_note_becomes_the_review_link():
    from dsh_github_reviewer.web.facts import review_url

    assert review_url("review https://github.com/a/b/pull/1#pullrequestreview-9") == \
        "https://github.com/a/b/pull/1#pullrequestreview-9"
    for note in [None, "", "rejected", "review javascript:alert(1)", "review data:x",
                 "review https://a.test/x onmouseover=1"]:
        assert review_url(note) is None, note


async def test_a_pr_closed_since_its_last_turn_shows_closed(tmp_path, server):
    """A PR's facts say 'open' as of its last turn; a closed or merged PR gets no new turn, so
    /prs asks the account's work records whether it was seen closed since."""

    from dsh_github_reviewer.work.records import DOMAIN
    from dsh_github_reviewer.work.store import WorkStore

    text = config_text(server.base_url) + (
        '[plugins.github-reviewer]\nplugin = "dsh-github-reviewer"\n'
        '[[plugins.github-reviewer.accounts]]\nname = "demo"\n'
        'personal_access_token = "ghp_' + "x" * 36 + '"\napi_url = "http://127.0.0.1:9"\n'
        'repositories = ["acme/shop"]\n')
    h = Harness(parse_config(text, "t.toml", tmp_path), load_entry_points=False,
                plugins=[("dsh-github-reviewer", reviewer_plugin)])
    try:
        for n in (7, 8, 9):
            await pr_session(h, PrKey("demo", "acme", "shop", n).session_id)
        await check_states(h, WorkStore(await h.storage.domain(DOMAIN), "demo"))
    finally:
        await h.close()


async def check_states(h, store) -> None:
    from datetime import UTC, datetime

    from dsh_github_reviewer.work.records import PrRecord

    now = datetime.now(UTC)

    async def states(c) -> dict[int, str]:
        prs = (await c.get("/api/github-reviewer/prs")).json()["prs"]
        return {p["number"]: p["state"] for p in prs}

    def record(closed):
        return lambda _: PrRecord(head_sha="a" * 40, status="reviewed", updated_at=now,
                                  closed_seen_at=closed)
    async with client(h) as c:
        assert await states(c) == {7: "open", 8: "open", 9: "open"}, "no record: last turn"
        await store.update_pr(PrRef("demo", "acme/shop", 7), record(None))
        await store.update_pr(PrRef("demo", "acme/shop", 8), record(now))
        assert await states(c) == {7: "open", 8: "closed", 9: "open"}, "9: never polled"
        await store.update_account(lambda a: setattr(a, "last_tick_at", now))
        assert await states(c) == {7: "open", 8: "closed", 9: "closed"}, "9: record pruned"
        page = (await c.get("/prs")).text
        assert page.count('class="badge state-closed"') == 2
        assert 'title="seen closed (or merged' in page
        # The PR page's header says what the list says: closed, merged, draft.
        assert 'class="badge state-closed"' in await pr_page(c, 8)
        assert 'class="badge state-open"' in await pr_page(c, 7)

        def seen(**kw):
            return lambda r: r.model_copy(update=kw)
        await store.update_pr(PrRef("demo", "acme/shop", 8), seen(merged=True))
        await store.update_pr(PrRef("demo", "acme/shop", 7), seen(draft=True))
        assert 'class="badge state-merged"' in await pr_page(c, 8)
        assert 'class="badge state-draft"' in await pr_page(c, 7)
        assert await states(c) == {7: "draft", 8: "merged", 9: "closed"}
        await store.update_pr(PrRef("demo", "acme/shop", 7), seen(draft=False))
        await store.update_pr(PrRef("demo", "acme/shop", 8), seen(merged=False))
        import dsh_github_reviewer.web.pages as web_pages

        size, web_pages.FRESH_ROWS = web_pages.FRESH_ROWS, 1  # many rows: the cached records
        try:
            await asyncio.sleep(web_pages.RECORDS_TTL_S + 0.1)
            await states(c)  # the stale copy is served while it is read again behind
            for _ in range(100):
                if await states(c) == {7: "open", 8: "closed", 9: "closed"}:
                    break
                await asyncio.sleep(0.05)
            assert await states(c) == {7: "open", 8: "closed", 9: "closed"}
        finally:
            web_pages.FRESH_ROWS = size


def account_harness(tmp_path, server) -> Harness:
    text = config_text(server.base_url) + (
        '[plugins.github-reviewer]\nplugin = "dsh-github-reviewer"\n'
        '[[plugins.github-reviewer.accounts]]\nname = "demo"\n'
        'personal_access_token = "ghp_' + "x" * 36 + '"\napi_url = "http://127.0.0.1:9"\n'
        'repositories = ["acme/shop"]\n')
    return Harness(parse_config(text, "t.toml", tmp_path), load_entry_points=False,
                   plugins=[("dsh-github-reviewer", reviewer_plugin)])


async def test_a_pr_without_a_session_is_listed_counted_and_linked(tmp_path, server):
    """The bot gave up on PR 9 before any turn (no session) and PR 10 was merged unreviewed:
    both are rows of /prs and the API, count in the totals, and the status page links every
    PR to a page that exists; merged shows as merged."""
    from datetime import UTC, datetime

    from dsh_github_reviewer.work.records import DOMAIN, Notice, PrRecord
    from dsh_github_reviewer.work.store import WorkStore

    h = account_harness(tmp_path, server)
    try:
        await pr_session(h, PrKey("demo", "acme", "shop", 7).session_id)
        await pr_session(h, PrKey("demo", "acme", "shop", 8, "coordinator").session_id)
        store = WorkStore(await h.storage.domain(DOMAIN), "demo")
        now = datetime.now(UTC)

        def rec(**kw):
            return lambda _: PrRecord(head_sha="a" * 40, updated_at=now, **kw)
        await store.update_pr(PrRef("demo", "acme/shop", 9), rec(
            status="gave_up", title="Broken PR", fail_count=5, last_error="HTTP 502",
            notices=[Notice(trigger="demo:auto:" + "a" * 40, what="the review",
                            error="GitHub answered 502", created_at=now, posted=True)]))
        await store.update_pr(PrRef("demo", "acme/shop", 10), rec(
            status="reviewed", title="Merged fast", closed_seen_at=now, merged=True))
        await store.update_pr(PrRef("demo", "acme/shop", 7), rec(
            status="reviewed", title="Fix the query", closed_seen_at=now, merged=True))
        async with client(h) as c:
            data = (await c.get("/api/github-reviewer/prs")).json()
            prs = {p["number"]: p for p in data["prs"]}
            assert set(prs) == {7, 8, 9, 10} and data["total"] == 4
            assert prs[9]["session"] == "" and prs[9]["title"] == "Broken PR"
            assert prs[9]["last_outcome"] == "gave up on the review: GitHub answered 502"
            assert prs[9]["url"] == "https://github.com/acme/shop/pull/9"
            assert prs[10]["state"] == "merged" and prs[7]["state"] == "merged"
            assert data["repositories"]["acme/shop"]["prs"] == 4
            assert data["accounts"]["demo"]["prs"] == 4
            page = (await c.get("/prs")).text
            assert "acme/shop#9 Broken PR" in page and "no session" in page
            assert '<td class="num" data-label="Cache hit">-</td>' in page, "no tokens: no rate"
            assert 'class="badge state-merged"' in page
            # Search matches states and outcomes too.
            for q, numbers in (("merged", {"7", "10"}), ("gave up", {"9"}),
                               ("shop merged fast", {"10"})):
                found = re.findall(r'acme/shop#(\d+) ', (await c.get("/prs", params={
                    "q": q})).text)
                assert set(found) == numbers, (q, found)
            # Paged: the totals stay those of every PR.
            one = (await c.get("/api/github-reviewer/prs?per_page=1&page=2")).json()
            assert (one["total"], one["pages"], len(one["prs"])) == (4, 4, 1)
            assert one["repositories"]["acme/shop"]["prs"] == 4
            assert (await c.get("/api/github-reviewer/prs?page=x")).status_code == 400
            status = (await c.get("/github-reviewer")).text
            # Statuses in words: never a raw gave_up; a merged PR says merged.
            assert 'data-label="Status">gave up' in status and "gave_up" not in status
            assert 'data-label="Status">merged' in status
            links = re.findall(r'<a class="title" href="([^"]+)">acme/shop#(\d+)</a>', status)
            assert {n for _, n in links} == {"7", "9", "10"}, links
            for href, _ in links:
                target = await c.get(href.replace("&amp;", "&"))
                assert target.status_code == 200, href
            assert "/sessions/github%3Ademo%3Aacme%3Ashop%3Apr%3A7" in status
    finally:
        await h.close()


async def test_the_records_copy_validates_only_what_changed(tmp_path, server):
    """The list's copy of the work records is refreshed every 2 s; at 10,000
    PRs validating them all each time cost most of a CPU. Only changed texts are parsed, and
    an unchanged store leaves the copy (and the list's aggregates) as they were."""
    from datetime import UTC, datetime

    from dsh_github_reviewer.web.pages import RecordCache
    from dsh_github_reviewer.work.records import DOMAIN, PrRecord
    from dsh_github_reviewer.work.store import WorkStore

    h = account_harness(tmp_path, server)
    try:
        domain = await h.storage.domain(DOMAIN)
        store = WorkStore(domain, "demo")
        now = datetime.now(UTC)
        for n in (1, 2, 3):
            await store.update_pr(PrRef("demo", "acme/shop", n), lambda _, n=n: PrRecord(
                head_sha="a" * 40, status="reviewed", updated_at=now, title=f"PR {n}"))
        parsed: list[str] = []
        real = domain.parse
        domain.parse = lambda table, key, text: parsed.append(key) or real(table, key, text)
        cache = RecordCache()
        await cache._read(h)
        first = cache.records
        assert len(parsed) == 3 and len(first) == 3
        await cache._read(h)
        assert cache.records is first and len(parsed) == 3, "nothing changed: nothing parsed"
        await store.update_pr(PrRef("demo", "acme/shop", 2),
                              lambda r: r.model_copy(update={"title": "Renamed"}))
        await cache._read(h)
        assert len(parsed) == 4 and cache.records is not first
        assert cache.records[("demo", "acme", "shop", 2)][0].title == "Renamed"
        assert cache.records[("demo", "acme", "shop", 1)][0] is first[("demo", "acme", "shop",
                                                                        1)][0]
    finally:
        await h.close()
