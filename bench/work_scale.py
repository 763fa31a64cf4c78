"""Durable PR work at scale: today's figures beside the ones before per-PR records.

1. A tick recording N new PRs (N = 100 / 1,000 / 5,000): the inbox's one atomic write of N PR
   records plus the feed marks, and the closed-PR scan that follows a changed listing
   (sqlite, the default backend). Before: every new PR was a read-modify-write of the one
   account record holding every PR (measured at 100 on the old cursor code, loaded from git;
   1,000 quoted from the issue: 95 s CPU).
2. ``update_pr`` p50 with 10 and 10,000 PRs stored (new store vs. the old cursor, measured).
3. The latency from a ``/bot`` comment to its reply while 20 slow reviews (~2 s per model
   response) run, on the real loop (sandbox GitHub, scripted model, github-mcp-server). Before:
   the tick waited for all its reviews, so the /bot waited for them (issue: 53 s).

Usage: python bench/work_scale.py [--skip-latency]. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from dsh_github_reviewer.config import AccountConfig
from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.core.triggers import BotIdentity
from dsh_github_reviewer.github.feeds import FeedMarks
from dsh_github_reviewer.github.models import PullSummary
from dsh_github_reviewer.work.inbox import Inbox, Observations
from dsh_github_reviewer.work.records import PrRecord
from dsh_github_reviewer.work.store import WorkStore, domain_spec
from dsh_harness.storage import Domain
from dsh_harness.storage.sqlite_backend import SqliteBackend

ROOT = Path(__file__).resolve().parents[1]
OLD_COMMIT = "6872fc9"   # main just before per-PR records landed
NOW = datetime.now(UTC)


def pull(n: int) -> PullSummary:
    repo = {"name": "shop", "full_name": "acme/shop", "owner": {"login": "acme"}}
    return PullSummary.model_validate({
        "number": n, "title": f"PR {n}", "user": {"login": "alice"}, "state": "open",
        "html_url": f"https://example/pr/{n}", "updated_at": NOW.isoformat(),
        "head": {"ref": f"f{n}", "sha": f"{n:040x}", "repo": repo},
        "base": {"ref": "main", "sha": "b" * 40, "repo": repo}})


async def new_tick(n: int) -> tuple[float, float]:
    from dsh_github_reviewer.sources.poll import AccountPoller

    with tempfile.TemporaryDirectory() as tmp:
        domain = await Domain.open(domain_spec(), SqliteBackend(Path(tmp)))
        store = WorkStore(domain, "demo")
        inbox = Inbox(store, AccountConfig(name="demo", repositories=["acme/shop"]),
                      BotIdentity("shop-review-bot"))
        pulls = [pull(i) for i in range(1, n + 1)]
        marks = FeedMarks(issue_comments_since=NOW, review_comments_since=NOW)
        cpu, wall = time.process_time(), time.perf_counter()
        await inbox.record(Observations(repo="acme/shop", pulls=pulls, marks=marks, at=NOW,
                                        complete=True))
        # The closed-PR scan a changed listing triggers (AccountPoller._mark_closed).
        poller = AccountPoller.__new__(AccountPoller)
        poller.store = store
        poller.scheduler = type("S", (), {"wake": lambda *a: None})()
        poller.acct = type("A", (), {"key": "demo"})()
        await poller._mark_closed("acme/shop", set(range(1, n + 1)), NOW)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        assert len(await store.prs()) == n
        await domain.close()
        return cpu, wall


def old_cursor_module():
    """The pre-issue-11 cursor module, loaded from git as part of this package."""
    source = subprocess.run(["git", "-C", str(ROOT), "show",
                             f"{OLD_COMMIT}:dsh_github_reviewer/cursor.py"],
                            capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader("dsh_github_reviewer._old_cursor", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "dsh_github_reviewer"
    sys.modules[spec.name] = module
    exec(compile(source, "old cursor.py", "exec"), module.__dict__)
    return module


async def old_tick(old, n: int) -> tuple[float, float]:
    from dsh_harness import DomainSpec

    with tempfile.TemporaryDirectory() as tmp:
        domain = await Domain.open(DomainSpec(name=old.DOMAIN, version=1,
                                              tables={old.TABLE: old.AccountCursor}),
                                   SqliteBackend(Path(tmp)))
        store = old.CursorStore(domain, "demo")
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(1, n + 1):   # what the old poller wrote for each new PR it reviewed
            await store.update_pr(f"acme/shop#{i}", lambda e, i=i: old.PrEntry(
                head_sha=f"{i:040x}", status="reviewing", updated_at=NOW))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await domain.close()
        return cpu, wall


async def update_p50(prs: int, old=None, samples: int = 15) -> float:
    from dsh_harness import DomainSpec

    with tempfile.TemporaryDirectory() as tmp:
        backend = SqliteBackend(Path(tmp))
        if old is None:
            domain = await Domain.open(domain_spec(), backend)
            await domain.write_many([("prs", PrRef("demo", "acme/shop", i).format(),
                                      PrRecord(head_sha=f"{i:040x}", status="reviewed",
                                               updated_at=NOW, processed_comment_ids=[1, 2]))
                                     for i in range(1, prs + 1)])
            store = WorkStore(domain, "demo")

            async def one(i: int) -> None:
                def bump(e):
                    e.reviews_done += 1
                    return e
                await store.update_pr(PrRef("demo", "acme/shop", 1 + i % prs), bump)
        else:
            domain = await Domain.open(DomainSpec(name=old.DOMAIN, version=1,
                                                  tables={old.TABLE: old.AccountCursor}),
                                       backend)
            cursor = old.AccountCursor(prs={f"acme/shop#{i}": old.PrEntry(
                head_sha=f"{i:040x}", status="reviewed", updated_at=NOW,
                processed_comment_ids=[1, 2]) for i in range(1, prs + 1)})
            await domain.put(old.TABLE, "demo", cursor)
            store = old.CursorStore(domain, "demo")

            async def one(i: int) -> None:
                def bump(e):
                    e.reviews_done += 1
                    return e
                await store.update_pr(f"acme/shop#{1 + i % prs}", bump)
        times = []
        for i in range(samples):
            start = time.perf_counter()
            await one(i)
            times.append(time.perf_counter() - start)
        await domain.close()
        return statistics.median(times) * 1000


async def bot_latency() -> float:
    from dsh_github_reviewer.testing import SandboxGitHub
    from dsh_github_reviewer.testing.deployment import Deployment
    from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
    from dsh_github_reviewer.testing.scenario import FEATURE, REPO, build_shop
    from dsh_harness.testing import ScriptedModelServer

    slow = {"on": False}

    def policy(req):
        reply = reviewer_policy(req)
        if slow["on"] and req.last_user_text().startswith("Flow: review"):
            reply.chunk_delay_s = 1.0   # ~2 s per streamed model response
        return reply

    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub() as sb, \
            ScriptedModelServer(policy=policy) as model:
        build_shop(sb)
        dep = await Deployment(Path(tmp), sb, model).start()
        await dep.tick()
        for n in range(2, 22):
            sb.state.commit(REPO, f"feature-{n}", dict(FEATURE), message="more")
            sb.state.open_pull(REPO, f"feature-{n}", title=f"PR {n}", body="b", author="a")
        slow["on"] = True
        dep.work.start()
        # The 20 reviews start (four at a time, the default), then the /bot arrives.
        while len([s for s in model.served if "Flow: review" in str(s.request)]) < 6:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        cmd = sb.state.add_issue_comment(REPO, 1, "maintainer", "/bot quick question?")
        start = time.perf_counter()
        def answered() -> bool:
            return any(c.user == "shop-review-bot" and f"reply-to:{cmd.id}" in c.body
                       for c in sb.state.issue_comments_of(REPO, 1))
        while not answered():  # noqa: ASYNC110 - the sandbox changes on its own thread
            await asyncio.sleep(0.05)
        latency = time.perf_counter() - start
        running = sum(1 for n in range(2, 22) if not dep.reviews(n))
        await dep.work.stop(grace_s=0)
        await dep.stop(grace_s=0)
        print(f"(while the /bot was answered, {running} of the 20 reviews had not finished)")
        return latency


async def main(skip_latency: bool) -> None:
    old = old_cursor_module()
    print("| measure | before (old code / issue) | now |")
    print("|---|---|---|")
    for n in (100, 1_000, 5_000):
        cpu, wall = await new_tick(n)
        if n == 100:
            ocpu, owall = await old_tick(old, n)
            before = f"{ocpu:.2f} s CPU, {owall:.2f} s wall (measured)"
        elif n == 1_000:
            before = "95 s CPU (issue, measured on main)"
        else:
            before = "~25x the 1,000 figure (O(N^2)); not run"
        print(f"| tick recording {n:,} new PRs | {before} | {cpu:.2f} s CPU, {wall:.2f} s wall |")
    for prs in (10, 10_000):
        new = await update_p50(prs)
        was = await update_p50(prs, old, samples=5 if prs > 1000 else 15)
        print(f"| update_pr p50 at {prs:,} PRs | {was:.1f} ms (measured) | {new:.1f} ms |")
    if not skip_latency:
        latency = await bot_latency()
        print(f"| /bot -> reply while 20 slow reviews run | 53 s + (issue: the tick waits for "
              f"every review) | {latency:.1f} s |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-latency", action="store_true")
    asyncio.run(main(parser.parse_args().skip_latency))
