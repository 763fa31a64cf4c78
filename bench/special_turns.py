"""What the special review turns cost next to the first review: a retarget (the same head on
another base branch) and a retry after a turn that ended without a submit.

Real poller, runner, guarded tools and github-mcp-server against the sandbox GitHub; the
scripted reviewer model reports tokens the way DeepSeek does, with its prefix-cache simulator.
Prices: the deployment defaults for deepseek-v4-flash. Prints a table; asserts nothing.

    python bench/special_turns.py

To compare with an older checkout, run the same script with that checkout first on the path:
``PYTHONPATH=/path/to/old/checkout python bench/special_turns.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dsh_github_reviewer.cli.demo import session_turns
from dsh_github_reviewer.core.session_key import PrKey
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import REPO, build_shop
from dsh_harness.testing import Reply, ScriptedModelServer

SESSION = PrKey("demo", "acme", "shop", 1).session_id


class Clock:
    def __init__(self, sb: SandboxGitHub):
        self.sb, self.offset = sb, timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def skip(self, seconds: float = 3600) -> None:
        self.offset += timedelta(seconds=seconds)
        self.sb.state.advance(seconds)


async def run(kind: str) -> list[dict]:
    stopped: list[bool] = []

    def policy(req):
        if kind == "retry" and not stopped and req.last_user_text().startswith("Flow: review"):
            stopped.append(True)
            return Reply(content="I ran out of ideas.")   # a completed turn, no submit
        return reviewer_policy(req)

    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            ScriptedModelServer(policy=policy) as model:
        build_shop(sb)
        clock = Clock(sb)
        dep = await Deployment(Path(tmp), sb, model, clock=clock).start()
        try:
            await dep.tick()
            if kind == "retarget":
                sb.state.commit(REPO, "release", {"RELEASE.md": "1.0\n"})
                sb.state.change_base(REPO, 1, "release")
            clock.skip()
            await dep.tick()
            assert dep.harness is not None
            return (await session_turns(dep.harness, SESSION))[:2]
        finally:
            await dep.stop()


def main() -> None:
    print(f"{'scenario':<10} {'turn':<6} {'prompt':>8} {'cache hit':>10} {'uncached':>9} "
          f"{'cost USD':>10} {'x first':>8}")
    for kind in ("retarget", "retry"):
        rows = asyncio.run(run(kind))
        first = rows[0]["cost_usd"] or 1e-12
        for label, r in zip(("first", kind), rows, strict=False):
            uncached = r["prompt_tokens"] - r["cache_hit_tokens"]
            print(f"{kind:<10} {label:<6} {r['prompt_tokens']:>8} {r['cache_hit_pct']:>9}% "
                  f"{uncached:>9} {r['cost_usd']:>10.6f} {r['cost_usd'] / first:>8.2f}")


if __name__ == "__main__":
    main()
