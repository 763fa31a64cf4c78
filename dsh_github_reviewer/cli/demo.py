"""``dsh github-reviewer demo``: the whole loop offline, in under a minute.

A sandbox GitHub (on 127.0.0.N:80, because the real github-mcp-server binary dials port 80;
binding it needs root or CAP_NET_BIND_SERVICE, and without either the demo says so and exits 1)
holds a small repository and a PR with real findings; a scripted reviewer model serves the
OpenAI-compatible API with DeepSeek-style prefix caching. The real poller, runner, guarded
tools and github-mcp-server then do: first review (found by a poll) → a new push → re-review in
the same session → a /bot question → its answer. The push and the question reach the bot as the
sandbox's signed webhook deliveries to the real receiver, which records the work and wakes the
scheduler. Printed: what was posted, and per turn the tokens, cache hits and cost.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

from dsh_harness import Harness
from dsh_harness.testing import netns

from ..app import ReviewerApp, SetupError
from ..app.webhooks import start_receivers, stop_receivers
from ..core.session_key import PrKey
from ..github.mcp_host import McpError, bundled_binary
from ..testing import LoopbackPortDenied, SandboxGitHub
from ..testing.deployment import Deployment
from ..testing.scenario import REPO, build_shop, model_server, push_fix

DEMO_WAIT_S = 60.0


async def _until(what: str, done) -> None:
    """Wait for work the sandbox's delivery started (it runs on other threads)."""
    try:
        async with asyncio.timeout(DEMO_WAIT_S):
            while not done():  # noqa: ASYNC110 - the sandbox changes on its own thread
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise SetupError(f"the demo's {what} did not happen within {DEMO_WAIT_S:g} s") from None


def _posted(sb: SandboxGitHub) -> dict[str, Any]:
    st = sb.state
    reviews = [{"id": r.id, "state": r.state, "commit": r.commit_id[:12],
                "summary": r.body.split("\n\n<!--")[0],
                "comments": [{"path": c.path, "line": c.line, "body": c.body.split("\n")[0]}
                             for c in st.comments_of_review(r.id)]}
               for r in st.reviews_of(REPO, 1)]
    replies = [{"id": c.id, "by": c.user, "body": c.body.split("\n\n<!--")[0]}
               for c in st.issue_comments_of(REPO, 1)
               if c.user == "shop-review-bot" and "reply-to:" in c.body]
    return {"reviews": reviews, "replies": replies}


async def session_turns(harness: Harness, session_id: str) -> list[dict[str, Any]]:
    """Per turn of a session: flow, end reason, disjoint tokens, cache-hit share and cost."""
    log = await harness.sessions.read(session_id)
    flows = {e.turn: e.meta.get("flow", "?") for e in log.events if e.type == "turn_start"}
    rows = []
    for e in log.events:
        if e.type == "turn_end":
            u = e.usage
            prompt = u.uncached_input + u.cache_read
            rows.append({"turn": e.turn, "flow": flows.get(e.turn, "?"), "reason": e.reason,
                         "prompt_tokens": prompt, "cache_hit_tokens": u.cache_read,
                         "cache_hit_pct": round(100 * u.cache_read / prompt, 1) if prompt else 0,
                         "output_tokens": u.output, "cost_usd": round(u.cost_usd, 6)})
    return rows


def _own_argv() -> list[str]:
    """This command again: ``dsh …`` as a script path, or ``-m dsh_harness.cli …``."""
    script = sys.argv[0]
    if script.endswith(".py") and "dsh_harness" in script:
        return ["-m", "dsh_harness.cli", *sys.argv[1:]]
    return [script, *sys.argv[1:]]


def where_the_sandbox_runs() -> str:
    if netns.inside():
        return "a network namespace of its own (unprivileged user namespace, loopback only)"
    return "this machine's loopback, port 80 (root or CAP_NET_BIND_SERVICE)"


async def run_demo(as_json: bool = False) -> int:
    try:
        bundled_binary()  # without it every read fails and the "review" finds nothing
    except McpError as exc:
        raise SetupError(f"the demo needs the github-mcp-server binary: {exc}") from None
    try:
        sandbox = SandboxGitHub.on_loopback_80()
    except LoopbackPortDenied as exc:
        if netns.available() and not netns.inside():
            # An ordinary user: the same demo in a user and network namespace of its own,
            # where port 80 of its loopback needs no privilege (and nothing leaves it).
            print("demo: port 80 needs root here; running in a network namespace of its own "
                  "(an unprivileged user namespace, loopback only)", file=sys.stderr,
                  flush=True)
            argv = netns.isolated_argv([sys.executable, *_own_argv()])
            os.execvp(argv[0], argv)
        why = "" if netns.inside() else (
            "; unprivileged user namespaces are not available here either (no unshare, or "
            "the kernel refuses them), so the demo cannot use a network namespace of its own")
        raise SetupError(f"the demo cannot start its sandbox GitHub: {exc}{why}") from None
    with tempfile.TemporaryDirectory(prefix="dsh-demo-") as tmp, sandbox as sb, \
            model_server() as model:
        build_shop(sb)
        secret = secrets.token_hex(16)
        hook = f'enabled = true\nport = 0\nsecret = "{secret}"'
        dep = await Deployment(Path(tmp), sb, model, webhook=hook).start()
        app = ReviewerApp.of(dep.harness)
        steps: list[str] = []
        triggers: list[str] = []
        servers = []
        try:
            await dep.tick()
            steps.append("first review")
            triggers.append("poll")
            servers = await start_receivers(app, app.work.record_work())
            sb.add_hook(servers[0].url, secret, repo=REPO)
            push_fix(sb)
            await _until("re-review", lambda: len(sb.state.reviews_of(REPO, 1)) == 2)
            steps.append("re-review after a push")
            triggers.append("webhook delivery")
            sb.state.add_issue_comment(REPO, 1, "maintainer",
                                       "/bot Which of your findings are still open?")
            await _until("/bot answer", lambda: any(
                c.user == "shop-review-bot" and "reply-to:" in c.body
                for c in sb.state.issue_comments_of(REPO, 1)))
            steps.append("/bot question answered")
            triggers.append("webhook delivery")
            session_id = PrKey("demo", "acme", "shop", 1).session_id
            assert dep.harness is not None
            report = {"steps": steps, "triggers": triggers, "session": session_id,
                      "sandbox": {"url": sb.web_url, "runs_in": where_the_sandbox_runs()},
                      "posted": _posted(sb),
                      "deliveries": [{"event": d.event, "action": d.action, "status": d.status}
                                     for d in sb.webhooks.deliveries()],
                      "turns": await session_turns(dep.harness, session_id),
                      "github_requests": sb.stats()}
        finally:
            await stop_receivers(servers)
            await dep.stop()
    if as_json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    _print(report)
    return 0


def _print(report: dict[str, Any]) -> None:
    print("Offline demo: " + " -> ".join(f"{s} ({t})" for s, t in zip(
        report["steps"], report["triggers"], strict=True)))
    print(f"Sandbox GitHub: {report['sandbox']['url']} on {report['sandbox']['runs_in']}")
    print(f"Session: {report['session']}\n")
    for r in report["posted"]["reviews"]:
        print(f"Review {r['id']} ({r['state']}) on {r['commit']}: {r['summary']}")
        for c in r["comments"]:
            print(f"  {c['path']}:{c['line']}  {c['body']}")
    for c in report["posted"]["replies"]:
        print(f"\nReply to /bot:\n{c['body']}")
    print(f"\n{'turn':>4} {'flow':<7} {'prompt':>7} {'cached':>7} {'hit%':>6} {'output':>7} "
          f"{'cost $':>10}")
    for t in report["turns"]:
        print(f"{t['turn']:>4} {t['flow']:<7} {t['prompt_tokens']:>7} "
              f"{t['cache_hit_tokens']:>7} {t['cache_hit_pct']:>6} {t['output_tokens']:>7} "
              f"{t['cost_usd']:>10.6f}")
    print(f"\nGitHub requests: {report['github_requests']}")
