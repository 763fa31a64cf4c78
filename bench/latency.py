"""Time from a GitHub event to the bot's work: webhook deliveries vs. polling, and how many
deliveries per second the receiver records with 1,000 open PRs.

Latency (real github-mcp-server, sandbox GitHub on 127.0.0.N:80, scripted model): the time from
the sandbox state change (PR opened, `/bot` comment) to the review's first model request, and to
the `/bot` reply being on GitHub.
* webhook: measured — the sandbox delivers to the running reviewer's receiver; polling is set
  to an hour so only the delivery can trigger the work.
* polling: computed, not waited for. The processing part is measured by running one poll tick
  right after the event (the tick a poller would run); a poller at interval T notices an event
  after T/2 on average and T at worst, so polling = T/2 + processing (mean) and T + processing
  (worst), at the default T = 120 s. This is the figure of main before the webhook existed.

Throughput: 1,000 open PRs in the sandbox, each with a reviewed record; the reviewer's real
receiver and sink on loopback; deliveries replayed from the sandbox's own (signed
`pull_request.synchronize` and `/bot` comments, fresh delivery ids) by 8 client threads; a
bounded run of 2,000 deliveries. Each one costs what happens before the answer: signature,
parsing, one GitHub read of the PR (sandbox), the atomic record write, the delivery-id write.
The scheduler and pollers are not started, so the model never runs.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx2

from dsh_github_reviewer.app import ReviewerApp
from dsh_github_reviewer.app.webhooks import start_receivers, stop_receivers
from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.sources.webhook.signature import sign
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import FEATURE, REPO, build_shop
from dsh_github_reviewer.work.records import PrRecord
from dsh_harness.testing import ScriptedModelServer

SECRET = "bench-secret"
DEFAULT_POLL_S = 120.0
ROUNDS = 3
DELIVERIES = 2000
CLIENTS = 8


class Stamped:
    """The scripted reviewer model, noting when each request arrived."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.server = ScriptedModelServer(policy=self.policy)

    def policy(self, req):
        self.times.append(time.monotonic())
        return reviewer_policy(req)

    def first_after(self, t0: float) -> float | None:
        return next((t for t in self.times if t >= t0), None)


def hook_block(port: int = 0, reconcile_s: float = 3600) -> str:
    return (f'enabled = true\nhost = "127.0.0.1"\nport = {port}\nsecret = "{SECRET}"\n'
            f"reconcile_interval_s = {reconcile_s}")


async def wait_for(predicate, limit_s: float = 120) -> float:
    async with asyncio.timeout(limit_s):
        while not predicate():  # noqa: ASYNC110 - other threads change the state
            await asyncio.sleep(0.005)
    return time.monotonic()


def replies(sb: SandboxGitHub, number: int) -> int:
    return sum(1 for c in sb.state.issue_comments_of(REPO, number)
               if c.user == "shop-review-bot" and "reply-to:" in c.body)


def acknowledged(sb: SandboxGitHub, comment_id: int) -> bool:
    return "shop-review-bot" in sb.state.reactions.get(comment_id, {}).get("eyes", set())


async def one_round(sb: SandboxGitHub, model: Stamped, dep: Deployment, n: int,
                    trigger) -> tuple[float, float, float]:
    """(event -> first review request, event -> /bot reply, /bot -> its 👀) for new PR
    number ``n``."""
    st = sb.state
    st.commit(REPO, f"feature-{n}", dict(FEATURE), message="Add order search")
    t0 = time.monotonic()
    st.open_pull(REPO, f"feature-{n}", title=f"Order search {n}", body="b", author="alice")
    await trigger()
    await wait_for(lambda: model.first_after(t0) is not None)
    review_first = model.first_after(t0) - t0
    await wait_for(lambda: len(st.reviews_of(REPO, n)) == 1)
    await asyncio.sleep(0.3)  # let the review's own deliveries settle
    t1 = time.monotonic()
    asked = st.add_issue_comment(REPO, n, "maintainer", "/bot is the search safe now?")
    seen: list[float] = []

    def answered() -> bool:   # notes the first moment the 👀 is there, too
        if not seen and acknowledged(sb, asked.id):
            seen.append(time.monotonic())
        return replies(sb, n) == 1 and bool(seen)
    watcher = asyncio.create_task(wait_for(answered))
    await trigger()
    done = await watcher
    return review_first, done - t1, seen[0] - t1


async def latency() -> dict[str, list[tuple[float, float, float]]]:
    out: dict[str, list[tuple[float, float, float]]] = {}
    for mode in ("webhook", "poll tick"):
        model = Stamped()
        with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
                model.server:
            build_shop(sb, prs=0)
            if mode == "webhook":
                dep = Deployment(Path(tmp), sb, model.server, poll_interval_s=3600,
                                 webhook=hook_block())
                await dep.start()
                await dep.harness.startup()
                (server,) = ReviewerApp.of(dep.harness).webhooks
                await wait_for(lambda: sb.requests("GET", "/repos/acme/shop/pulls"))
                sb.add_hook(server.url, SECRET, repo=REPO)

                async def trigger() -> None:
                    return None
            else:
                dep = Deployment(Path(tmp), sb, model.server, poll_interval_s=DEFAULT_POLL_S)
                await dep.start()
                await dep.tick()

                async def trigger(dep: Deployment = dep) -> None:
                    await dep.tick()
            rows = [await one_round(sb, model, dep, n, trigger) for n in range(1, ROUNDS + 1)]
            if mode == "webhook":
                await dep.harness.shutdown()
            await dep.stop()
            out[mode] = rows
    return out


def post_all(url: str, bodies: list[tuple[str, bytes]], results: list[int]) -> None:
    with httpx2.Client(timeout=30) as client:
        for event, body in bodies:
            r = client.post(url, content=body, headers={
                "X-GitHub-Event": event, "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": sign(SECRET, body),
                "Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/bench"})
            results.append(r.status_code)


async def throughput(prs: int = 1000) -> tuple[float, int, list[int]]:
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub() as sb, \
            ScriptedModelServer(policy=reviewer_policy) as model:
        build_shop(sb, prs=0)
        sb.add_hook("http://127.0.0.1:9/unused", SECRET, repo=REPO, ping=False)
        sb.webhooks.drop_next(10 * prs)  # only the bodies are wanted
        st = sb.state
        for n in range(1, prs + 1):
            st.commit(REPO, f"feature-{n}", {"shop/x.py": f"x = {n}\n"})
            st.open_pull(REPO, f"feature-{n}", title=f"PR {n}", body="b", author="alice")
        first = {n: st.pull(REPO, n).head_sha for n in range(1, prs + 1)}
        for n in range(1, prs + 1):
            st.add_issue_comment(REPO, n, "maintainer", f"/bot question {n}")
            st.commit(REPO, f"feature-{n}", {"shop/x.py": f"x = {n + 1}\n"})
        await asyncio.to_thread(sb.webhooks.wait_idle, 120)
        bodies = [(d.event, d.body) for d in sb.webhooks.deliveries()
                  if d.action in ("synchronize", "created")]
        dep = Deployment(Path(tmp), sb, model, webhook=hook_block())
        await dep.start()
        app = ReviewerApp.of(dep.harness)
        store = await dep.store()
        now = datetime.now(UTC)
        for n in range(1, prs + 1):  # every PR reviewed at its first head; then a push each
            head = first[n]
            await store.update_pr(PrRef("demo", REPO, n), lambda _, h=head: PrRecord(
                head_sha=h, status="reviewed", updated_at=now, reviewed_head_sha=h))
        servers = await start_receivers(app, app.work.record_work())
        work = [bodies[i % len(bodies)] for i in range(DELIVERIES)]
        chunks = [work[i::CLIENTS] for i in range(CLIENTS)]
        results: list[int] = []
        threads = [threading.Thread(target=post_all, args=(servers[0].url, c, results))
                   for c in chunks]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        await asyncio.to_thread(lambda: [t.join() for t in threads])
        elapsed = time.monotonic() - t0
        await stop_receivers(servers)
        records = await store.prs()
        assert sum(r.status == "reviewing" for r in records.values()) == prs, "heads not recorded"
        assert sum(len(r.queued) for r in records.values()) == prs, "commands not recorded"
        await dep.stop()
        assert model.served == [], "the throughput run must not reach the model"
        sizes = sorted(len(b) for _, b in bodies)
        return DELIVERIES / elapsed, sizes[len(sizes) // 2], results


def fmt(x: float) -> str:
    return f"{x:8.2f} s"


async def main() -> None:
    lat = await latency()
    hook = lat["webhook"]
    tick = lat["poll tick"]
    med = statistics.median
    h_review, h_bot = med(r for r, _, _ in hook), med(b for _, b, _ in hook)
    p_review, p_bot = med(r for r, _, _ in tick), med(b for _, b, _ in tick)
    h_ack, p_ack = med(a for _, _, a in hook), med(a for _, _, a in tick)
    print(f"Latency, median of {ROUNDS} rounds (event in the sandbox -> ...)\n")
    print(f"{'':36} | {'first review request':>20} | {'/bot reply posted':>18}")
    print("-" * 80)
    print(f"{'polling, T=120 s, mean (computed)':36} | {fmt(DEFAULT_POLL_S / 2 + p_review):>20}"
          f" | {fmt(DEFAULT_POLL_S / 2 + p_bot):>18}")
    print(f"{'polling, T=120 s, worst (computed)':36} | {fmt(DEFAULT_POLL_S + p_review):>20} | "
          f"{fmt(DEFAULT_POLL_S + p_bot):>18}")
    print(f"{'  processing of one tick (measured)':36} | {fmt(p_review):>20} | "
          f"{fmt(p_bot):>18}")
    print(f"{'webhook (measured)':36} | {fmt(h_review):>20} | {fmt(h_bot):>18}")
    print(f"\n/bot acknowledged with 👀 (before: never): webhook {fmt(h_ack)}; polling "
          f"T/2 + {fmt(p_ack)} processing")
    rate, size, results = await throughput()
    ok = sum(1 for s in results if s == 200)
    print(f"\nReceiver throughput, 1,000 open PRs, {DELIVERIES} deliveries by {CLIENTS} loopback "
          f"clients (median body {size / 1024:.0f} KiB): {rate:,.0f} deliveries/s, "
          f"{ok}/{len(results)} answered 200")
    print("\npolling = main before the webhook; 'computed' = T/2 (mean) or T (worst) waiting for "
          "the next tick plus the measured processing of that tick.")


if __name__ == "__main__":
    asyncio.run(main())
