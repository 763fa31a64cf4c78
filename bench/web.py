"""Web UI response times (issue 15 §4). Prints two tables, each beside the figure the issue
measured on the code before this change (quoted, not re-measured).

1. The sessions index over 1,000 and 10,000 sessions: "first build" is the very first request
   of a `dsh web` on a home without a web index (every log read once); "cold" the first request
   of a fresh process once the index file exists; "warm" the median of the following ones.
2. 50 concurrent viewers of a growing live session for 30 s, against a real `dsh web` process
   while this process appends to the session as `dsh run` would: each viewer loads the page,
   polls `/fragments/events?after=` every 2 s like app.js, and reloads the page every 10 s.

3. The reviewer's PR list over 10,000 PRs (a PR session and a work record each, plus 100 PRs
   known only from a record): `/prs` warm, `/api/github-reviewer/prs` (paged) warm, and the
   first request of a fresh process over a home without a web index (cold start). Issue 31
   item 2 adds the CPU a `/prs` request costs the process (all its threads, the refreshes the
   request starts behind included): back to back, and one request every 2.2 s as a browser
   that reloads (so every request finds the work records' copy stale and refreshed); and the
   time from a restart over the saved index to the first real page (not "building"); and
   the per-request CPU while one PR session grows before each request (a review being
   recorded), the append's own CPU taken out.
   `--compare <dir>` runs table 3 also on the code in <dir> (a checkout of the code before a
   change) in a subprocess and prints both.

Usage: nice python bench/web.py [--quick] [--prs-only]
       (--quick: 1,000 sessions only, 10 s of viewers; --prs-only: only table 3)
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
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
BEFORE = {"index, 10,000 sessions": ("5,400 (cold)", "156"),
          "poll p95": "not measured", "page p95": "2,700-6,000",
          # issue 21 item 25, measured on the code before it
          "/prs warm": "2,600", "/api/github-reviewer/prs": "1,900 (6.2 MB)",
          "cold": "11,600 (blocked)",
          # issue 31 item 2, measured with this script on the code before it (2 loaded CPUs)
          "b2b": "30", "paced": "94", "restart": "4,882", "restart cpu": "2,000"}


async def make_sessions(h: Harness, count: int, events_each: int = 6) -> None:
    for i in range(count):
        s = await h.sessions.create(f"bench:{i:05d}", {})
        await s.record(TitleSet, title=f"Session {i}", pinned=True)
        turn = 0
        while len(s.events) < events_each:
            turn += 1
            await record_turn(s, turn)
        await h.sessions.release(s.id)


async def record_turn(s, turn: int, close: bool = True) -> None:
    await s.record(TurnStart, turn=turn)
    await s.record(UserMessage, turn=turn, content=f"question {turn} " * 20)
    call = ToolCall(id=f"c{turn}", name="read", arguments='{"path": "a.py"}')
    await s.record(AssistantMessage, turn=turn, content="looking", tool_calls=[call], usage=USAGE)
    await s.record(ToolResult, turn=turn, call_id=call.id, name="read",
                   content="line of code\n" * 40)
    await s.record(AssistantMessage, turn=turn, content="**answer** " * 30, usage=USAGE)
    if close:
        await s.record(TurnEnd, turn=turn, reason="completed", usage=USAGE + USAGE)


def harness(tmp: str) -> Harness:
    return Harness(parse_config('home = "home"\n', "bench.toml", Path(tmp)),
                   load_entry_points=False)


async def timed(url: str, h: Harness, runs: int) -> tuple[float, float]:
    """(first request ms, median of the others ms) on a fresh app."""
    app = build_app(h)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app),
                                  base_url="http://127.0.0.1") as c:
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            r = await c.get(url)
            times.append(time.perf_counter() - t)
            assert r.status_code == 200, (url, r.status_code)
    return times[0] * 1000, statistics.median(times[1:]) * 1000


async def index_rows(count: int) -> list[tuple[str, str, str, str]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        h = harness(tmp)
        t = time.perf_counter()
        await make_sessions(h, count)
        print(f"(made {count:,} sessions in {time.perf_counter() - t:.1f} s)", flush=True)
        first, _ = await timed("/", h, 2)
        cold, warm = await timed("/", h, 11)
        _, page10 = await timed("/?page=10", h, 6)
        _, filt = await timed("/?q=Session+99", h, 6)
        await h.close()
    old = BEFORE.get(f"index, {count:,} sessions", ("-", "-"))
    rows.append((f"index /, {count:,} sessions: first build", "-", f"{first:,.0f}", ""))
    rows.append((f"index /, {count:,}: cold (index file)", old[0], f"{cold:,.0f}", "<= 500"))
    rows.append((f"index /, {count:,}: warm", old[1], f"{warm:,.1f}", "<= 20"))
    rows.append((f"index ?page=10, {count:,}: warm", "-", f"{page10:,.1f}", ""))
    rows.append((f"filter ?q=, {count:,}: warm", "-", f"{filt:,.1f}", ""))
    return rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def viewer(base: str, sid: str, until: float, polls: list, pages: list) -> None:
    async with httpx2.AsyncClient(base_url=base, timeout=60) as c:
        last_page = 0.0
        last_seq = 0
        while time.monotonic() < until:
            now = time.monotonic()
            if now - last_page >= 10:
                t = time.perf_counter()
                r = await c.get(f"/sessions/{sid.replace(':', '%3A')}")
                pages.append(time.perf_counter() - t)
                assert r.status_code == 200
                last_seq = int(r.content.split(b'data-last-seq="')[1].split(b'"')[0])
                last_page = now
            t = time.perf_counter()
            r = await c.get(f"/fragments/events?id={sid}&after={last_seq}")
            polls.append(time.perf_counter() - t)
            if r.status_code == 200:
                last_seq = int(r.headers["X-Last-Seq"])
            await asyncio.sleep(2)


async def live_rows(seconds: float, viewers: int = 50) -> list[tuple[str, str, str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        h = harness(tmp)
        s = await h.sessions.create("bench:live", {})
        await s.record(TitleSet, title="live", pinned=True)
        for turn in range(1, 400):  # ~2,400 events before the viewers arrive
            await record_turn(s, turn)
        port = free_port()
        config = Path(tmp) / "dsh.toml"
        config.write_text(f'home = "home"\n[web]\nport = {port}\n')
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dsh_harness.cli", "--config", str(config), "web", cwd=tmp,
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    await asyncio.sleep(0.1)
            polls: list[float] = []
            pages: list[float] = []
            until = time.monotonic() + seconds

            async def writer() -> None:
                turn = 400
                while time.monotonic() < until:
                    await record_turn(s, turn, close=False)
                    await s.record(TurnEnd, turn=turn, reason="completed", usage=USAGE)
                    turn += 1
                    await asyncio.sleep(0.5)

            await asyncio.gather(writer(), *(viewer(f"http://127.0.0.1:{port}", "bench:live",
                                                    until, polls, pages)
                                             for _ in range(viewers)))
        finally:
            proc.terminate()
            await proc.wait()
            await h.close()
    events = len(s.events)
    p95 = lambda xs: statistics.quantiles(xs, n=20)[-1] * 1000 if len(xs) > 1 else 0.0  # noqa
    print(f"(live session grew to {events:,} events; {len(polls):,} polls, "
          f"{len(pages):,} page loads; page load p50 {statistics.median(pages) * 1000:,.0f} ms, "
          f"poll p50 {statistics.median(polls) * 1000:,.0f} ms)")
    return [(f"{viewers} viewers, poll p95", BEFORE["poll p95"], f"{p95(polls):,.0f}", ""),
            (f"{viewers} viewers, page load p95", BEFORE["page p95"], f"{p95(pages):,.0f}", ""),
            (f"  of which the first {viewers} at once", "-", f"{p95(pages[:viewers]):,.0f}", ""),
            ("  of which the later ones", "-", f"{p95(pages[viewers:]):,.0f}", "")]


async def make_prs(h: Harness, count: int, orphans: int) -> None:
    """PR sessions shaped like the reviewer writes them, and a work record per PR."""
    from dsh_github_reviewer.core.session_key import PrKey, PrRef
    from dsh_github_reviewer.work.records import DOMAIN, PRS, PrRecord

    now = datetime.now(UTC)
    for i in range(count):
        repo = f"repo{i % 40}"
        key = PrKey("bench", "acme", repo, i + 1)
        s = await h.sessions.create(key.session_id, {
            "owner": "acme", "repo": repo, "number": i + 1,
            "url": f"https://github.com/acme/{repo}/pull/{i + 1}"})
        await s.record(TitleSet, title=f"Review acme/{repo} PR {i + 1}", pinned=True)
        pr = {"title": f"Change number {i}", "author": "alice", "state": "open",
              "head": f"{i:040x}"}
        await s.record(TurnStart, turn=1, meta={"flow": "review", "trigger": f"t{i}", "pr": pr})
        await s.record(UserMessage, turn=1, content="Flow: review. " * 20)
        await s.record(AssistantMessage, turn=1, content="Reviewed.", usage=USAGE)
        await s.record(TurnEnd, turn=1, reason="completed", usage=USAGE)
        await h.sessions.release(s.id)
    domain = await h.storage.domain(DOMAIN)
    ops = [(PRS, PrRef("bench", f"acme/repo{i % 40}", i + 1).format(),
            PrRecord(head_sha=f"{i:040x}", status="reviewed", updated_at=now,
                     title=f"Change number {i}"))
           for i in range(count + orphans)]
    for start in range(0, len(ops), 2_000):
        await domain.write_many(ops[start:start + 2_000])


async def review_again(h: Harness, i: int, turn: int) -> None:
    """Another review turn in PR ``i``'s session, as the reviewer records it."""
    from dsh_github_reviewer.core.session_key import PrKey

    sid = PrKey("bench", "acme", f"repo{i % 40}", i + 1).session_id
    s = await h.sessions.resume(sid)
    pr = {"title": f"Change number {i} again", "author": "alice", "state": "open",
          "head": f"{i + 1:040x}"}
    await s.record(TurnStart, turn=turn, meta={"flow": "review", "trigger": f"r{i}", "pr": pr})
    await s.record(UserMessage, turn=turn, content="Flow: review. " * 20)
    await s.record(AssistantMessage, turn=turn, content="Reviewed.", usage=USAGE)
    await s.record(TurnEnd, turn=turn, reason="completed", usage=USAGE)
    await h.sessions.release(s.id)


def pr_harness(tmp: str) -> Harness:
    import dsh_github_reviewer.plugin as reviewer_plugin

    text = ('home = "home"\n[plugins.github-reviewer]\nplugin = "dsh-github-reviewer"\n'
            '[[plugins.github-reviewer.accounts]]\nname = "bench"\n'
            'personal_access_token = "ghp_' + "x" * 36 + '"\n'
            'api_url = "http://127.0.0.1:9"\nrepositories = ["acme/repo0"]\n')
    return Harness(parse_config(text, "bench.toml", Path(tmp)), load_entry_points=False,
                   plugins=[("dsh-github-reviewer", reviewer_plugin)])


async def pr_list_rows(count: int = 10_000) -> list[tuple[str, str, str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        h = pr_harness(tmp)
        t = time.perf_counter()
        await make_prs(h, count, 100)
        print(f"(made {count:,} PR sessions and {count + 100:,} records in "
              f"{time.perf_counter() - t:.1f} s)", flush=True)
        app = build_app(h)
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app),
                                      base_url="http://127.0.0.1", timeout=600) as c:
            t = time.perf_counter()
            first = await c.get("/prs")
            cold = (time.perf_counter() - t) * 1000
            while first.status_code == 503:  # the index is being built behind
                await asyncio.sleep(0.2)
                first = await c.get("/prs")
            ready = (time.perf_counter() - t) * 1000
            assert first.status_code == 200, first.status_code
            times, api, size = [], [], 0
            for _ in range(6):
                t = time.perf_counter()
                assert (await c.get("/prs")).status_code == 200
                times.append(time.perf_counter() - t)
                t = time.perf_counter()
                r = await c.get("/api/github-reviewer/prs")
                api.append(time.perf_counter() - t)
                size = len(r.content)
                assert r.status_code == 200
            cpu = time.process_time()
            for _ in range(30):   # background refreshes they start are counted in
                assert (await c.get("/prs", params={"page": 3})).status_code == 200
            back_to_back = (time.process_time() - cpu) / 30 * 1000
            cpu = time.process_time()
            rounds = 5
            for _ in range(rounds):
                await asyncio.sleep(2.2)   # a reload every 2.2 s: the records copy is stale
                assert (await c.get("/prs")).status_code == 200
            await asyncio.sleep(2.2)   # the refresh the last request started, counted too
            paced = (time.process_time() - cpu - 0.0) / rounds * 1000
            # The same while `dsh run` reviews: one PR session grows before each request (the
            # append's own CPU is taken out), so scans find a change and the list is updated.
            cpu, appends = time.process_time(), 0.0
            for n in range(rounds):
                t = time.process_time()
                await review_again(h, n, 2)
                appends += time.process_time() - t
                await asyncio.sleep(2.2)
                assert (await c.get("/prs")).status_code == 200
            await asyncio.sleep(2.2)
            changing = (time.process_time() - cpu - appends) / rounds * 1000
            print("(the last PR reviewed again is "
                  + ("" if f"Change number {rounds - 1} again" in (await c.get("/prs")).text
                     else "not yet ") + "listed 2.2 s after)", flush=True)
        await h.close()   # the web index is saved; a new process starts over it
        restart, restart_cpu = await first_page_after_restart(tmp)
    warm, api_ms = statistics.median(times[1:]) * 1000, statistics.median(api[1:]) * 1000
    return [(f"/prs, {count:,} PRs: first request (cold)", BEFORE["cold"], f"{cold:,.0f}", ""),
            ("  until the list is served", "-", f"{ready:,.0f}", ""),
            (f"/prs, {count:,} PRs: warm", BEFORE["/prs warm"], f"{warm:,.0f}", "<= 300"),
            (f"API prs, {count:,} PRs: warm", BEFORE["/api/github-reviewer/prs"],
             f"{api_ms:,.0f} ({size / 1e3:,.0f} kB)", ""),
            ("/prs CPU per request, back to back", BEFORE["b2b"],
             f"{back_to_back:,.0f}", "<= 50"),
            ("/prs CPU per request, one per 2.2 s", BEFORE["paced"], f"{paced:,.0f}",
             "<= 50"),
            ("  ... while one PR session grows each time", "-", f"{changing:,.0f}", "<= 50"),
            ("restart over the saved index: first page", BEFORE["restart"],
             f"{restart:,.0f}", "<= 2,000"),
            ("  CPU it took (all threads)", BEFORE["restart cpu"], f"{restart_cpu:,.0f}", "")]


async def first_page_after_restart(tmp: str) -> tuple[float, float]:
    """A new process over the home (its saved web index, its records): ms until ``/prs``
    answers with the list instead of the "building" page, and the CPU ms it took."""
    h = pr_harness(tmp)
    try:
        app = build_app(h)
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app),
                                      base_url="http://127.0.0.1", timeout=600) as c:
            t, cpu = time.perf_counter(), time.process_time()
            while (await c.get("/prs")).status_code == 503:   # noqa: ASYNC110 (a client)
                await asyncio.sleep(0.1)
            return (time.perf_counter() - t) * 1000, (time.process_time() - cpu) * 1000
    finally:
        await h.close()


async def main() -> None:
    quick = "--quick" in sys.argv
    rows = []
    if "--compare" in sys.argv:
        return compare(sys.argv[sys.argv.index("--compare") + 1], quick)
    if "--prs-only" in sys.argv:
        rows += await pr_list_rows(1_000 if quick else 10_000)
        return report(rows)
    for count in ((1_000,) if quick else (1_000, 10_000)):
        if "--live-only" not in sys.argv:
            rows += await index_rows(count)
    rows += await pr_list_rows(1_000 if quick else 10_000)
    rows += await live_rows(10 if quick else 30)
    report(rows)


def compare(old_tree: str, quick: bool) -> None:
    """Table 3 on the code in ``old_tree`` and on this code, each in its own process."""
    here = str(Path(__file__).resolve().parents[1])
    args = [sys.executable, __file__, "--prs-only", *(["--quick"] if quick else [])]
    outs = {}
    for label, tree in (("before", old_tree), ("now", here)):
        env = {**os.environ, "PYTHONPATH": tree}
        proc = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
        # report()'s fixed columns: name 42, before 20, now 10, goal 8.
        outs[label] = {line[:42].strip(): (line[43:63].strip(), line[64:74].strip(),
                                           line[75:].strip())
                       for line in proc.stdout.splitlines()
                       if len(line) > 64 and not line[:1].isdigit()
                       and not line.startswith(("request", "("))}
    print(f"{'request (ms)':<42} {'before (measured)':>20} {'now':>10} {'goal':>8}")
    for name, (_, now, goal) in outs["now"].items():
        old = outs["before"].get(name, ("", "-", ""))[1]
        print(f"{name:<42} {old:>20} {now:>10} {goal:>8}")


def report(rows: list[tuple[str, str, str, str]]) -> None:
    print(f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs; 'before' = the "
          "issue's measurement of the previous code")
    print(f"{'request (ms)':<42} {'before':>20} {'now':>10} {'goal':>8}")
    for name, old, new, goal in rows:
        print(f"{name:<42} {old:>20} {new:>10} {goal:>8}")


if __name__ == "__main__":
    asyncio.run(main())
