"""Web UI response times: the sessions index with 1,000 and 10,000 sessions, and the page of a
session with 5,000 events. "cold" is the first request of a fresh `dsh web` (every log read
once); "warm" the following ones (only file stamps compared). Prints a table.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx2

from dsh_harness import Harness, parse_config
from dsh_harness.sessions.events import (
    AssistantMessage,
    TitleSet,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
)
from dsh_harness.web.app import build_app

USAGE = Usage(uncached_input=1200, cache_read=9000, output=300, cost_usd=0.0004)


async def make_sessions(h: Harness, count: int, events_each: int = 6) -> None:
    for i in range(count):
        s = await h.sessions.create(f"bench:{i:05d}", {})
        await s.record(TitleSet, title=f"Session {i}", pinned=True)
        turn = 0
        while len(s.events) < events_each:
            turn += 1
            await s.record(TurnStart, turn=turn)
            await s.record(UserMessage, turn=turn, content=f"question {turn} " * 20)
            call = ToolCall(id=f"c{turn}", name="read", arguments='{"path": "a.py"}')
            await s.record(AssistantMessage, turn=turn, content="looking", tool_calls=[call],
                           usage=USAGE)
            await s.record(ToolResult, turn=turn, call_id=call.id, name="read",
                           content="line of code\n" * 40)
            await s.record(AssistantMessage, turn=turn, content="**answer** " * 30,
                           usage=USAGE)
            await s.record(TurnEnd, turn=turn, reason="completed", usage=USAGE + USAGE)
        await h.sessions.release(s.id)


async def timed(client: httpx2.AsyncClient, url: str, runs: int) -> tuple[float, float, int]:
    times = []
    size = 0
    for _ in range(runs):
        t = time.perf_counter()
        r = await client.get(url)
        times.append(time.perf_counter() - t)
        size = len(r.content)
        assert r.status_code in (200, 204), (url, r.status_code)
    return times[0] * 1000, statistics.median(times[1:]) * 1000, size


async def main() -> None:
    rows = []
    for count in (1_000, 10_000):
        with tempfile.TemporaryDirectory() as tmp:
            h = Harness(parse_config('home = "home"\n', "bench.toml", Path(tmp)),
                        load_entry_points=False)
            t = time.perf_counter()
            await make_sessions(h, count)
            if count == 10_000:
                await make_sessions_big(h)
            made = time.perf_counter() - t
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=build_app(h)),
                                          base_url="http://127.0.0.1") as c:
                rows.append((f"index /, {count:,} sessions", *await timed(c, "/", 6)))
                rows.append((f"index page 10, {count:,}", *await timed(c, "/?page=10", 6)))
                rows.append((f"filter ?q=, {count:,}", *await timed(c, "/?q=Session+99", 6)))
                if count == 10_000:
                    rows.append(("session, 5,000 events", *await timed(
                        c, "/sessions/bench%3Abig", 6)))
                    rows.append(("poll, no new events", *await timed(
                        c, "/fragments/events?id=bench:big&after=999999", 6)))
            await h.close()
            print(f"(made {count:,} sessions in {made:.1f} s)")
    print(f"\n{'request':<30} {'cold ms':>9} {'warm ms':>9} {'bytes':>9}")
    for name, cold, warm, size in rows:
        print(f"{name:<30} {cold:>9.1f} {warm:>9.1f} {size:>9,}")


async def make_sessions_big(h: Harness) -> None:
    s = await h.sessions.create("bench:big", {})
    turn = 0
    while len(s.events) < 5_000:
        turn += 1
        await s.record(TurnStart, turn=turn)
        await s.record(UserMessage, turn=turn, content="review please")
        call = ToolCall(id=f"c{turn}", name="read", arguments='{"path": "a.py"}')
        await s.record(AssistantMessage, turn=turn, content=None, tool_calls=[call],
                       usage=USAGE)
        await s.record(ToolResult, turn=turn, call_id=call.id, name="read",
                       content="x = 1\n" * 200)
        await s.record(AssistantMessage, turn=turn, content="Finding: *bug*", usage=USAGE)
        await s.record(TurnEnd, turn=turn, reason="completed", usage=USAGE + USAGE)
    await h.sessions.release(s.id)


if __name__ == "__main__":
    asyncio.run(main())
