"""The web catalog's incremental index and live logs: only new bytes are read."""

from __future__ import annotations

import json

from dsh_harness.sessions.events import (
    AssistantMessage,
    TitleSet,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
)
from dsh_harness.testing import ScriptedModelServer
from dsh_harness.web.catalog import SAVE_EVERY_S, SessionCatalog
from tests.harness.agent_kit import make_harness

USAGE = Usage(uncached_input=100, cache_read=300, output=20, cost_usd=0.001)


async def turn(h, sid: str, n: int, open_only: bool = False) -> None:
    s = await h.sessions.resume(sid) if await h.sessions.store.exists(sid) else \
        await h.sessions.create(sid, {})
    await s.record(TurnStart, turn=n, meta={"flow": "review"})
    await s.record(UserMessage, turn=n, content="q")
    await s.record(AssistantMessage, turn=n, content="a", usage=USAGE)
    if not open_only:
        await s.record(TurnEnd, turn=n, reason="completed", usage=USAGE)
    await h.sessions.release(sid)


async def test_index_persists_and_a_fresh_catalog_reads_no_log(tmp_path):
    with ScriptedModelServer() as server:
        h = make_harness(tmp_path, server.base_url)
        for i in range(5):
            await turn(h, f"t:{i}", 1)
        first = SessionCatalog(h)
        entries = await first.entries()
        assert [e.turns for e in entries] == [1] * 5
        assert entries[0].usage.cost_usd == USAGE.cost_usd
        assert (tmp_path / "home" / "web" / "index.json").exists()

        fresh = SessionCatalog(h)
        reads = []
        fresh._advance = lambda *a: reads.append(a)  # any log read would land here
        assert [e.id for e in await fresh.entries()] == [e.id for e in entries]
        assert reads == []

        await turn(h, "t:2", 2)
        again = SessionCatalog(h)
        got = {e.id: e for e in await again.refresh()}
        assert got["t:2"].turns == 2 and got["t:2"].d["per_turn"][1][2][3] == USAGE.cost_usd
        assert (await again.entries())[0].id == "t:2", "newest activity first"
        await h.close()


async def test_live_log_reads_only_appended_lines_and_reloads_a_shrunk_log(tmp_path):
    with ScriptedModelServer() as server:
        h = make_harness(tmp_path, server.base_url)
        await turn(h, "t:live", 1, open_only=True)
        catalog = SessionCatalog(h)
        live = await catalog.log("t:live")
        first_event = live.events[0]
        assert live.digest["open"] and len(live.events) == 3
        s = await h.sessions.resume("t:live")
        await s.record(TitleSet, title="new title", pinned=False)
        await s.record(TurnEnd, turn=1, reason="completed", usage=USAGE)
        await h.sessions.release("t:live")
        same = await catalog.log("t:live")
        assert same is live and same.events[0] is first_event, "followed, not re-read"
        path = tmp_path / "home" / "sessions" / "t%3Alive.jsonl"
        assert len(same.events) == path.read_bytes().count(b"\n") - 1
        assert not same.digest["open"] and same.digest["title"] == "new title"
        assert [e.type for e in same.after(3)][-2:] == ["title", "turn_end"]
        assert same.after(same.events[-1].seq) == []
        lines = path.read_bytes().split(b"\n")
        path.write_bytes(b"\n".join(lines[:2]) + b"\n")  # shrunk: read again from the start
        shrunk = await catalog.log("t:live")
        assert len(shrunk.events) == 1
        # A torn final line (a writer mid-append) waits for its newline.
        with path.open("ab") as f:
            f.write(json.dumps({"type": "title", "seq": 2}).encode()[:10])
        torn = await catalog.log("t:live")
        assert len(torn.events) == 1
        await h.close()


async def test_a_costly_index_file_is_rewritten_less_often_after_small_changes(tmp_path):
    """The index file is rewritten whole: after a small change it waits SAVE_BUDGET times what
    the last rewrite cost (10,000 sessions: ~80 ms, so not every 30 s), a big one saves now."""
    with ScriptedModelServer() as server:
        h = make_harness(tmp_path, server.base_url)
        for i in range(3):
            await turn(h, f"t:{i}", 1)
        catalog = SessionCatalog(h)
        await catalog.entries()
        path = tmp_path / "home" / "web" / "index.json"
        saved = path.read_bytes()

        catalog._save_cpu = 0.5               # as costly as a big home's rewrite
        catalog._saved_at -= SAVE_EVERY_S * 2  # the plain interval has passed
        await turn(h, "t:0", 2)
        await catalog.refresh()
        assert catalog.entry("t:0").turns == 2 and path.read_bytes() == saved

        catalog._save_cpu = 0.0               # a cheap rewrite: the plain interval holds
        await turn(h, "t:1", 2)
        await catalog.refresh()
        assert path.read_bytes() != saved
        await h.close()
