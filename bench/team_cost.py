"""Cost and prefix-cache hits of run 1 and run 2 (after a push) on one PR for:

* the three-persona team in CI mode (action.yml in the Actions simulator: fresh runner per
  job, sessions carried by the cache stand-in between the two runs),
* a single reviewer (the daemon's one session per PR; the figure main had before the team),
* a stateless team (the same action with nothing restored: every run starts new sessions).

Real `dsh github-reviewer ci` processes, github-mcp-server and sandbox GitHub; the scripted team
and reviewer report tokens like DeepSeek with the prefix-cache simulator; prices are the
deepseek-v4-flash defaults (USD per 1M: input 0.14, cache read 0.0028, output 0.28). Also
counts the inline comments each run posted (a team without memory repeats old findings).
Prints a table; asserts nothing.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.actions import ActionsSimulator, pull_request_event
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import (
    BOT_TOKEN,
    REPO,
    build_shop,
    model_server,
    push_fix,
)
from dsh_github_reviewer.testing.team_model import TeamModel
from dsh_harness.testing import ScriptedModelServer

ROOT = Path(__file__).resolve().parents[1]
PRICE = {"input": 0.14, "cache_read": 0.0028, "output": 0.28}


def figures(served, comments: int) -> dict:
    ok = [s for s in served if s.fault is None]
    prompt = sum(s.prompt_tokens for s in ok)
    hit = sum(s.cache_hit_tokens for s in ok)
    out = sum(s.completion_tokens for s in ok)
    cost = ((prompt - hit) * PRICE["input"] + hit * PRICE["cache_read"]
            + out * PRICE["output"]) / 1e6
    return {"requests": len(ok), "prompt": prompt, "hit": hit,
            "hit_pct": round(100 * hit / prompt, 1) if prompt else 0.0, "out": out,
            "cost": cost, "comments": comments}


def team(stateless: bool) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            ScriptedModelServer(policy=TeamModel()) as model:
        build_shop(sb)
        sim = ActionsSimulator(Path(tmp) / "a", ROOT, REPO, token=BOT_TOKEN,
                               api_url=sb.api_url, server_url=sb.web_url)
        for n, action in enumerate(("opened", "synchronize")):
            if n == 1:
                push_fix(sb)
                if stateless:  # a job that restores nothing
                    sim.cache.entries.clear()
            start = len(model.served)
            # fail-on never: the verdict ("cannot merge" with findings) must not read as a
            # failed run here; only a run that posted nothing does.
            run = sim.run("pull_request", pull_request_event(sb, REPO, 1, action),
                          inputs={"deepseek-api-key": "scripted", "fail-on": "never",
                                  "model-base-url": model.base_url})
            if run.exit_code != 0:
                sys.exit(f"team run failed:\n{run.output}")
            review = sb.state.reviews_of(REPO, 1)[-1]
            rows.append(figures(model.served[start:],
                                len(sb.state.comments_of_review(review.id))))
    return rows


async def single() -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            model_server() as model:
        build_shop(sb)
        dep = await Deployment(Path(tmp), sb, model).start()
        try:
            for n in range(2):
                if n == 1:
                    push_fix(sb)
                start = len(model.served)
                await dep.tick()
                review = sb.state.reviews_of(REPO, 1)[-1]
                rows.append(figures(model.served[start:],
                                    len(sb.state.comments_of_review(review.id))))
        finally:
            await dep.stop()
    return rows


def main() -> None:
    results = {"team of 3 + coordinator (CI, cached sessions)": team(False),
               "single reviewer (daemon session; before)": asyncio.run(single()),
               "stateless team (CI, nothing restored)": team(True)}
    head = (f"{'setup':<46} {'run':>3} {'reqs':>5} {'prompt':>7} {'cached':>7} {'hit%':>6} "
            f"{'out':>5} {'cost $':>10} {'comments':>8}")
    print(head)
    print("-" * len(head))
    for name, rows in results.items():
        for i, r in enumerate(rows, 1):
            print(f"{name if i == 1 else '':<46} {i:>3} {r['requests']:>5} {r['prompt']:>7} "
                  f"{r['hit']:>7} {r['hit_pct']:>6} {r['out']:>5} {r['cost']:>10.6f} "
                  f"{r['comments']:>8}")
        total = sum(r["cost"] for r in rows)
        print(f"{'':<46} {'sum':>3} {'':>5} {'':>7} {'':>7} {'':>6} {'':>5} {total:>10.6f}")
    print("\nRun 2 is after a push that fixes the SQL injection and adds verify=False. The team "
          "with memory reports only the new finding; the stateless team re-reports the old ones.")


if __name__ == "__main__":
    main()
