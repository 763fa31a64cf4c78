"""Cost of review 1, review 2 (after a push) and a /bot turn through the real loop, next to a
stateless baseline that starts a fresh session for every step.

Real poller, runner, guarded tools and github-mcp-server against the sandbox GitHub; the
scripted reviewer model reports tokens the way DeepSeek does, with its prefix-cache simulator.
Prices: the deployment defaults for deepseek-v4-flash. Prints a table; asserts nothing.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from dsh_github_reviewer.demo import session_turns
from dsh_github_reviewer.session_key import PrKey
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import (
    REPO,
    build_shop,
    model_server,
    push_fix,
)

SESSION = PrKey("demo", "acme", "shop", 1).session_id
STEPS = ["review 1", "review 2 (push)", "/bot"]


async def scenario(stateless: bool) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            model_server() as model:
        build_shop(sb)
        dep = await Deployment(Path(tmp), sb, model).start()
        rows = []

        async def step(action) -> None:
            if stateless:
                # A bot without memory: every step starts a new conversation.
                await dep.stop()
                shutil.rmtree(Path(tmp) / "home" / "sessions", ignore_errors=True)
                await dep.start()
            action()
            await dep.tick()
            assert dep.harness is not None
            rows.append((await session_turns(dep.harness, SESSION))[-1])

        await step(lambda: None)
        await step(lambda: push_fix(sb))
        await step(lambda: sb.state.add_issue_comment(REPO, 1, "maintainer",
                                                      "/bot Which findings are still open?"))
        await dep.stop()
        return rows


async def main() -> None:
    session, stateless = await scenario(False), await scenario(True)
    print(f"{'step':<16} | {'session prompt':>14} {'cached':>7} {'hit%':>6} {'out':>5} "
          f"{'cost $':>9} | {'stateless prompt':>16} {'cached':>7} {'hit%':>6} {'out':>5} "
          f"{'cost $':>9}")
    totals = [0.0, 0.0]
    for name, a, b in zip(STEPS, session, stateless, strict=True):
        totals[0] += a["cost_usd"]
        totals[1] += b["cost_usd"]
        print(f"{name:<16} | {a['prompt_tokens']:>14} {a['cache_hit_tokens']:>7} "
              f"{a['cache_hit_pct']:>6} {a['output_tokens']:>5} {a['cost_usd']:>9.6f} | "
              f"{b['prompt_tokens']:>16} {b['cache_hit_tokens']:>7} {b['cache_hit_pct']:>6} "
              f"{b['output_tokens']:>5} {b['cost_usd']:>9.6f}")
    print(f"{'total':<16} | {'':>14} {'':>7} {'':>6} {'':>5} {totals[0]:>9.6f} | "
          f"{'':>16} {'':>7} {'':>6} {'':>5} {totals[1]:>9.6f}")
    print("\nThe stateless bot re-reports old findings on review 2 and cannot answer /bot from "
          "memory; the session pays cache prices for the replayed history.")


if __name__ == "__main__":
    asyncio.run(main())
