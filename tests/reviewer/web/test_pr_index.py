"""The PR list's index (``web/pages.py``) updated incrementally equals one built from scratch,
the session catalog says which sessions changed between two of its lists, and a restart
serves the saved list (``web/pr_snapshot.py``) until the real one is built."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from dsh_github_reviewer.core.session_key import PrKey
from dsh_github_reviewer.web.facts import web_url
from dsh_github_reviewer.web.pages import PrIndex, PrRow
from dsh_github_reviewer.web.pr_snapshot import PrSnapshot
from dsh_github_reviewer.work.records import PrRecord
from dsh_harness.sessions.events import AssistantMessage, TitleSet, TurnEnd, TurnStart, Usage
from dsh_harness.testing import ScriptedModelServer
from dsh_harness.web.catalog import HISTORY, CatalogEntry, SessionCatalog
from tests.harness.agent_kit import make_harness
from tests.reviewer.web.test_pr_pages import client, make, pr_session

AT = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture
def model():
    with ScriptedModelServer() as s:
        yield s


def entry(account: str, repo: str, number: int, ts: float, *, persona: str | None = None,
          reviews: int = 1, cost: float = 0.25, day: str = "2026-05-01",
          noise: dict[str, Any] | None = None, title: str | None = None) -> CatalogEntry:
    sid = f"{account}:acme/{repo}#{number}" + (f":persona:{persona}" if persona else "")
    pr = {"account": account, "owner": "acme", "repo": repo, "number": number,
          "persona": persona, "url": f"https://github.com/acme/{repo}/pull/{number}",
          "title": title or f"PR {number}", "author": "alice", "state": "open",
          "reviews": reviews, "findings": 2 * reviews, "questions": number % 2,
          "last_review": {"at": f"2026-05-01T00:00:{int(ts) % 60:02d}+00:00"},
          "last_outcome": "posted", "noise": noise}
    usage = [100, 300, 20, cost]
    d = {"id": sid, "title": None, "group": [], "link": None, "turns": reviews,
         "open": False, "facts": {"pr": pr}, "meta": {}, "last": f"t{ts}", "last_ts": ts,
         "usage": usage, "days": {day: list(usage)}}
    return CatalogEntry(d, (1, 1), 1)


def noise_of(posted: int, fixed: int, day: str) -> dict[str, Any]:
    return {"posted": posted, "fixed": fixed, "dismissed": 0, "open": posted - fixed,
            "suggestions": 0, "open_by_severity": {"major": posted - fixed},
            "days": {day: [posted, fixed, 0, posted - fixed]}}


def record(title: str, status: str = "reviewed", **more: Any) -> PrRecord:
    return PrRecord(head_sha="a" * 40, status=status, updated_at=AT, title=title, **more)


def recs(items: dict[tuple, PrRecord]) -> dict[tuple, tuple[PrRecord, str]]:
    return {k: (v, "https://github.com") for k, v in items.items()}


def snapshot(index: PrIndex) -> tuple:
    return ([{k: v for k, v in dataclasses.asdict(r).items() if k != "saved"}
             for r in index.rows], index.repos, index.accounts)


def test_an_index_updated_incrementally_equals_a_full_rebuild():
    before = {e.id: e for e in [
        entry("a", f"r{i % 3}", i, 100 + i, noise=noise_of(i % 4, i % 2, "2026-05-01"))
        for i in range(1, 30)]}
    before.update({e.id: e for e in [entry("b", "r1", 7, 50), entry("a", "r0", 3, 140,
                                                                    persona="security")]})
    kept = {("a", "acme", "r2", 2): record("kept")}   # a session PR with a record
    orphans = {("a", "acme", "r0", 100): record("orphan"), ("a", "acme", "r0", 101):
               record("orphan 2"), ("b", "acme", "r9", 5): record("other account")}
    recs1 = recs({**kept, **orphans})

    index = PrIndex()
    first = sorted(before.values(), key=lambda e: -e.d["last_ts"])
    index.build(first)
    index.with_records(recs1)

    after = dict(before)
    after["a:acme/r1#4"] = entry("a", "r1", 4, 300, reviews=3, cost=0.5, day="2026-05-02",
                                 noise=noise_of(5, 1, "2026-05-02"), title="renamed")
    del after["a:acme/r2#5"]                                      # a session gone
    after["a:acme/r0#3:persona:style"] = entry("a", "r0", 3, 310, persona="style")
    after["a:acme/r0#100"] = entry("a", "r0", 100, 320)            # a record-only PR's session
    after["c:acme/r7#1"] = entry("c", "r7", 1, 330)               # a new account and repo
    changed = {"a:acme/r1#4", "a:acme/r2#5", "a:acme/r0#3:persona:style", "a:acme/r0#100",
               "c:acme/r7#1"}
    recs2 = recs({**kept, ("a", "acme", "r0", 100): orphans[("a", "acme", "r0", 100)],
                  ("a", "acme", "r0", 101): record("orphan 2", "gave_up"),
                  ("a", "acme", "r2", 2): record("kept", closed_seen_at=AT)})
    second = sorted(after.values(), key=lambda e: -e.d["last_ts"])
    index.build(second, changed, after.get)
    index.with_records(recs2)

    full = PrIndex()
    full.build(second)
    full.with_records(recs2)
    assert snapshot(index) == snapshot(full)
    assert {r.repo for r in index.rows} >= {"acme/r7"} and "acme/r9" not in index.repos
    assert index.accounts["a"]["prs"] == full.accounts["a"]["prs"] == 30
    by_key = {r.key: r for r in index.rows}
    assert by_key[("a", "acme", "r2", 2)].shown_state == "closed"
    assert by_key[("a", "acme", "r0", 100)].session_id == "a:acme/r0#100"

    # The same records, sessions changed again: a PR whose only session went is a record's
    # row again, a record-only PR gets a session, a session PR's record state is kept.
    third = dict(after)
    del third["a:acme/r0#100"]
    third["a:acme/r0#101"] = entry("a", "r0", 101, 400)
    third["a:acme/r2#2"] = entry("a", "r2", 2, 410, reviews=2)
    ids = {"a:acme/r0#100", "a:acme/r0#101", "a:acme/r2#2"}
    listing = sorted(third.values(), key=lambda e: -e.d["last_ts"])
    index.build(listing, ids, third.get)
    index.with_records(recs2)
    full = PrIndex()
    full.build(listing)
    full.with_records(recs2)
    assert snapshot(index) == snapshot(full)
    again = {r.key: r for r in index.rows}
    assert again[("a", "acme", "r0", 100)].session_id == ""
    assert again[("a", "acme", "r0", 101)].session_id == "a:acme/r0#101"
    assert again[("a", "acme", "r2", 2)].shown_state == "closed"
    assert by_key[("a", "acme", "r0", 100)].session_id == "a:acme/r0#100"
    assert by_key[("a", "acme", "r1", 4)].title == "renamed"
    assert ("a", "acme", "r2", 5) not in by_key


async def test_the_catalog_names_what_changed_between_two_of_its_lists(tmp_path):
    with ScriptedModelServer() as server:
        h = make_harness(tmp_path, server.base_url)
        for i in range(3):
            s = await h.sessions.create(f"t:{i}", {})
            await s.record(TitleSet, title=f"s{i}", pinned=True)
            await h.sessions.release(s.id)
        catalog = SessionCatalog(h)
        first = await catalog.entries()
        assert catalog.changes_since(first) == set()
        assert catalog.changes_since([]) is None, "a list it never made: unknown"

        s = await h.sessions.resume("t:1")
        await s.record(TurnStart, turn=1, meta={})
        await s.record(TurnEnd, turn=1, reason="completed",
                       usage=Usage(uncached_input=1, cache_read=0, output=1, cost_usd=0))
        await h.sessions.release("t:1")
        second = await catalog.refresh()
        assert second is not first and catalog.listing is second
        assert catalog.changes_since(first) == {"t:1"}
        h.sessions.store.path("t:2").unlink()
        third = await catalog.refresh()
        assert catalog.changes_since(first) == {"t:1", "t:2"}
        assert catalog.changes_since(second) == {"t:2"}
        assert catalog.entry("t:2") is None and catalog.entry("t:1").turns == 1
        assert third is catalog.listing
        for _ in range(HISTORY):   # a reader that fell too far behind rebuilds
            catalog._swap(list(third), {"t:0"})
        assert catalog.changes_since(first) is None
        await h.close()


def test_a_link_check_is_the_same_cached_or_not():
    for bad in ("javascript:alert(1)", "https://x.test/a b", "https://x.test/\u202egp",
                "https://x.test/\x7f", "//x.test", "https:x.test", "https://x.test/\u2028"):
        assert web_url(bad) is None and web_url(bad) is None, bad
    for good in ("https://github.com/a/b/pull/1", "http://ghe.local/x?y=1#z",
                 "https://例え.jp/プル"):
        assert web_url(good) == good


async def until(check, what: str) -> None:
    """Waits for ``check()`` (an event: a file written, a build behind done), bounded."""
    for _ in range(500):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


async def test_a_restart_serves_the_saved_list_at_once_then_the_real_one(tmp_path, model):
    saved = tmp_path / "home" / "web" / "prs.json"
    h = make(tmp_path, model)
    try:
        await pr_session(h, PrKey("demo", "acme", "shop", 7).session_id, title="First PR")
        async with client(h) as c:
            assert "First PR" in (await c.get("/prs")).text

            async def written() -> bool:
                return saved.exists()
            await until(written, "the PR list saved after its first build")
    finally:
        await h.close()
    assert saved.stat().st_mode & 0o777 == 0o600

    h = make(tmp_path, model)
    try:   # a PR reviewed while the web UI was down: the saved list does not have it yet
        await pr_session(h, PrKey("demo", "acme", "shop", 8).session_id, title="Second PR")
        async with client(h) as c:
            first = (await c.get("/prs")).text
            assert "First PR" in first and "Second PR" not in first, "served from the file"

            async def real() -> bool:
                return "Second PR" in (await c.get("/prs")).text
            await until(real, "the real list built behind the saved one")
            data = (await c.get("/api/github-reviewer/prs")).json()
            assert data["total"] == 2 and data["repositories"]["acme/shop"]["prs"] == 2
    finally:
        await h.close()


async def test_a_broken_saved_list_is_ignored_and_the_real_one_built(tmp_path, model):
    saved = tmp_path / "home" / "web" / "prs.json"
    saved.parent.mkdir(parents=True)
    saved.write_text('{"version": 1, "fields": ["key"], "rows": [[')
    h = make(tmp_path, model)
    try:
        await pr_session(h, PrKey("demo", "acme", "shop", 7).session_id, title="First PR")
        async with client(h) as c:
            r = await c.get("/prs")
            assert r.status_code == 200 and "First PR" in r.text
    finally:
        await h.close()


def test_a_saved_row_with_a_forged_link_loses_the_link(tmp_path):
    snap = PrSnapshot(tmp_path / "prs.json")
    index = PrIndex()
    index.build([entry("a", "r0", 1, 10)])
    index.with_records({})
    index.rows[0].url = "javascript:alert(1)"
    snap.write(snap.take(index, object()))
    got = snap.load(PrRow)
    assert got is not None and got["rows"][0].url is None
    assert got["rows"][0].key == ("a", "acme", "r0", 1) and got["repos"] == index.repos
    # A row's saved form follows its record state (the one field changed in place).
    index.rows[0].record_state = "closed"
    snap.write(snap.take(index, object()))
    assert snap.load(PrRow)["rows"][0].record_state == "closed"


async def test_the_list_charts_follow_the_totals_they_are_drawn_from(tmp_path, model):
    """/prs reuses its charts between requests until the totals change: a review recorded
    later (its cost on a new day) shows in the repository's chart once the list has it."""
    h = make(tmp_path, model)
    try:
        await pr_session(h, PrKey("demo", "acme", "shop", 7).session_id, title="First PR")
        async with client(h) as c:
            first = (await c.get("/prs")).text
            assert "acme/shop: cost and cache hits per day" in first
            assert "$0.750000" not in first
            key = PrKey("demo", "acme", "shop", 8)
            s = await h.sessions.create(key.session_id, {
                "owner": "acme", "repo": "shop", "number": 8,
                "url": "https://github.example/acme/shop/pull/8"})
            pr = {"title": "Second PR", "author": "alice", "state": "open", "head": "c" * 40}
            cost = Usage(uncached_input=100, cache_read=900, output=10, cost_usd=0.75)
            await s.record(TurnStart, turn=1, meta={"flow": "review", "trigger": "t", "pr": pr})
            await s.record(AssistantMessage, turn=1, content="Reviewed.", usage=cost)
            await s.record(TurnEnd, turn=1, reason="completed", usage=cost)
            await h.sessions.release(s.id)

            async def charted() -> bool:
                text = (await c.get("/prs")).text
                chart = text.split('aria-label="acme/shop: cost and cache hits per day"')
                return "Second PR" in text and len(chart) == 2 and "$0.750000" in chart[
                    1].split("</figure>")[0]
            await until(charted, "the new review's cost in the repository's chart")
    finally:
        await h.close()


def test_totals_match_a_rebuild_whatever_the_repository_names():
    """The totals look closely only at rows whose names can match a changed pair: a name
    with a "/" (forged facts) is still counted like a full rebuild counts it."""
    odd = entry("a", "x", 1, 10)
    odd.d["facts"]["pr"]["repo"] = "x/y"
    rows = {e.id: e for e in [odd, entry("a", "y", 2, 20), entry("a", "r", 3, 30)]}
    index = PrIndex()
    index.build(sorted(rows.values(), key=lambda e: -e.d["last_ts"]))
    index.with_records({})
    rows["a:acme/y#2"] = entry("a", "y", 2, 40, cost=1.0)
    listing = sorted(rows.values(), key=lambda e: -e.d["last_ts"])
    index.build(listing, {"a:acme/y#2", "a:acme/x#1"}, rows.get)
    index.with_records({})
    full = PrIndex()
    full.build(listing)
    full.with_records({})
    assert snapshot(index) == snapshot(full)
    assert index.repos["acme/x/y"]["prs"] == 1
