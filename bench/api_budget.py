"""GitHub requests per idle poll tick: the repository-feed pattern vs. per-PR polling.

One repository with 1, 10 and 100 open PRs, all already reviewed (the cursor is seeded at
their heads), polled by the real AccountPoller against the sandbox GitHub. "counted" are the
requests that use the rate limit (not 304). The per-PR pattern of the original design — one
PR listing plus two comment listings per PR — is measured with the same client. Prints a table.
"""

from __future__ import annotations

import asyncio
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import REPO, build_shop, model_server
from dsh_github_reviewer.work.records import PrRecord


async def feed_pattern(prs: int) -> tuple[int, int, int, int]:
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub() as sb, model_server() as model:
        build_shop(sb, prs=prs)
        dep = await Deployment(Path(tmp), sb, model).start()
        now = datetime.now(UTC)

        store = await dep.store()
        for n in range(1, prs + 1):
            pr = sb.state.pull(REPO, n)
            await store.update_pr(PrRef("demo", REPO, n), lambda _, pr=pr: PrRecord(
                head_sha=pr.head_sha, status="reviewed", updated_at=now,
                reviewed_head_sha=pr.head_sha))
        await dep.tick()             # first tick: fills the ETag cache
        sb.reset_log()
        await dep.restart()          # a fresh process: cold ETag cache
        await dep.tick()
        cold = sb.stats()
        sb.reset_log()
        await dep.tick()
        warm = sb.stats()
        await dep.stop()
        assert model.served == [], "an idle tick must not run the model"
        return (cold["total"], cold["total"] - cold["not_modified"], warm["total"],
                warm["total"] - warm["not_modified"])


async def per_pr_pattern(prs: int) -> tuple[int, int, int, int]:
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub() as sb, model_server() as model:
        build_shop(sb, prs=prs)
        dep = await Deployment(Path(tmp), sb, model).start()
        client = dep.pollers["demo"].client
        owner, repo = REPO.split("/")
        rows = []
        for _ in range(2):
            sb.reset_log()
            pulls, _ = await client.list_open_pulls(owner, repo)
            for pr in pulls:
                await client.paginate(f"repos/{owner}/{repo}/issues/{pr.number}/comments")
                await client.paginate(f"repos/{owner}/{repo}/pulls/{pr.number}/comments")
            s = sb.stats()
            rows += [s["total"], s["total"] - s["not_modified"]]
        await dep.stop()
        return tuple(rows)  # type: ignore[return-value]


async def main() -> None:
    print(f"{'open PRs':>8} | {'feeds cold':>10} {'counted':>8} | {'feeds warm':>10} "
          f"{'counted':>8} | {'per-PR cold':>11} {'counted':>8} | {'per-PR warm':>11} "
          f"{'counted':>8}")
    for prs in (1, 10, 100):
        f = await feed_pattern(prs)
        p = await per_pr_pattern(prs)
        print(f"{prs:>8} | {f[0]:>10} {f[1]:>8} | {f[2]:>10} {f[3]:>8} | {p[0]:>11} {p[1]:>8} | "
              f"{p[2]:>11} {p[3]:>8}")
    print("\ncold = first tick of a new process (no ETags yet); warm = the next idle tick. "
          "counted = requests that use the rate limit (GitHub does not count 304s).")


if __name__ == "__main__":
    asyncio.run(main())
