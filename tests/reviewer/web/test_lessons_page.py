"""Lessons on the web: the lessons page lists each repository's lessons with their
source (who, when, the finding, the comment), escapes what people wrote, and removes a lesson
only by a same-origin POST (ASGI transport)."""

from __future__ import annotations

from datetime import UTC, datetime

from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.work.lessons import LessonFinding, LessonStore
from dsh_github_reviewer.work.records import DOMAIN
from tests.reviewer.web.test_pr_pages import client, server  # noqa: F401  (fixture)
from tests.reviewer.web.test_status_page import TOKEN, make

HOSTILE = "<script>alert(1)</script> is fine in tests"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def test_lessons_page_lists_shows_the_source_and_removes(tmp_path, server):  # noqa: F811
    h = make(tmp_path, server, {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORIES": "acme/shop"})
    try:
        store = LessonStore(await h.storage.domain(DOMAIN), "demo")
        await store.teach("acme/shop", text=HOSTILE, source="vote", taught_by="maintainer",
                          association="MEMBER", at=T0, comment_id=77, number=1,
                          finding=LessonFinding(comment_id=70, number=1, path="shop/orders.py",
                                                line=15, text="`eval()` on input",
                                                url="https://github.com/x"))
        await store.teach("acme/shop", text="We log with print.", source="command",
                          taught_by="owner", association="OWNER", at=T0, comment_id=78,
                          number=2)
        async with client(h) as c:
            page = (await c.get("/github-reviewer/lessons")).text
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
            assert "shop/orders.py:15" in page and "vote by maintainer (MEMBER)" in page
            assert "/acme/shop/pull/1#discussion_r77" in page
            assert "/acme/shop/pull/2#issuecomment-78" in page

            form = {"account": "demo", "repo": "acme/shop", "id": "1"}
            bad = await c.post("/github-reviewer/lessons/remove", data=form,
                               headers={"origin": "https://evil.example",
                                        "sec-fetch-site": "cross-site"})
            assert bad.status_code == 403
            for headers in ({"origin": "null"}, {"origin": "http://evil.example"},
                            {"sec-fetch-site": "same-site", "origin": "http://127.0.0.1"}):
                refused = await c.post("/github-reviewer/lessons/remove", data=form,
                                       headers=headers)
                assert refused.status_code == 403, headers
            assert [x.id for x in await store.active("acme/shop")] == [1, 2]
            missing = await c.post("/github-reviewer/lessons/remove",
                                   data={**form, "id": "9"},
                                   headers={"origin": "http://127.0.0.1"})
            assert missing.status_code == 404
            ok = await c.post("/github-reviewer/lessons/remove", data=form,
                              headers={"origin": "http://127.0.0.1",
                                       "sec-fetch-site": "same-origin"})
            assert ok.status_code == 303
            assert [x.id for x in await store.active("acme/shop")] == [2]
            api = (await c.get("/api/github-reviewer/lessons")).json()["repositories"]
            removed = next(x for x in api[0]["lessons"] if x["id"] == 1)
            assert not removed["active"] and removed["removed_by"] == "(web UI)"
            page = (await c.get("/github-reviewer/lessons")).text
            assert "removed by (web UI)" in page
    finally:
        await h.close()


async def test_status_page_says_paused_once_and_counts_only_commands(tmp_path, server):  # noqa: F811
    from dsh_github_reviewer.work.records import Command, PrRecord
    from dsh_github_reviewer.work.store import WorkStore

    h = make(tmp_path, server, {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORIES": "acme/shop"})
    try:
        store = WorkStore(await h.storage.domain(DOMAIN), "demo")

        def cmd(cid: int, action: str) -> Command:
            return Command(comment_id=cid, kind="bot", source="review", author="m",
                           created_at=T0, action=action)
        await store.update_pr(PrRef.parse("demo:acme/shop#1"), lambda _: PrRecord(
            head_sha="a" * 40, status="reviewing", updated_at=T0, paused_by="maintainer",
            queued=[cmd(1, "teach"), cmd(2, "chat")]))
        async with client(h) as c:
            page = (await c.get("/github-reviewer")).text
            data = (await c.get("/api/github-reviewer/status")).json()
    finally:
        await h.close()
    assert page.count("automatic reviews paused by maintainer") == 1
    assert "1 /bot queued" in page
    (pr,) = data["accounts"][0]["prs"] if isinstance(data, dict) else data[0]["prs"]
    assert [q["action"] for q in pr["queued"]] == ["teach", "chat"]
