"""The eval runner's own cost per case, excluding model time (issue 23; goal: under 1 s/case, so
a 40-case run is bound by the model alone).

Runs the shipped corpus through `run_config` with a scripted model that answers at once from
the ground truth (the `perfect` behaviour), at concurrency 4, and splits the wall time into:
the reviewer loop itself (`Deployment.tick`: poll, records, worker, guard, github-mcp-server;
the scripted model's own time inside it is measured separately and subtracted), and the eval's
own work around it (building each case in the sandbox GitHub, reading back what was posted,
session usage, scoring, report). CPU is this process's (the sandbox, the harness, the eval;
github-mcp-server's child processes are not counted). Prints a table.

    .venv/bin/python bench/eval_overhead.py [N_CASES]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from dsh_github_reviewer.eval import load_cases, score_case, summarize
from dsh_github_reviewer.eval.report import build_report, html_page, markdown
from dsh_github_reviewer.eval.run import EvalConfig, Options, run_config
from dsh_github_reviewer.testing import deployment
from dsh_github_reviewer.testing.eval_model import eval_model
from dsh_harness import Harness, parse_config

MODEL = "scripted/deepseek-v4-flash"


async def main(n: int | None) -> None:
    cases = load_cases()[:n] if n else load_cases()
    in_tick = [0.0]
    real_tick = deployment.Deployment.tick

    async def timed_tick(self, account="demo"):
        t = time.perf_counter()
        try:
            return await real_tick(self, account)
        finally:
            in_tick[0] += time.perf_counter() - t

    deployment.Deployment.tick = timed_tick
    model_s = [0.0]
    with eval_model(cases, "perfect") as model, tempfile.TemporaryDirectory() as tmp:
        policy = model.policy

        def timed_policy(req):
            t = time.perf_counter()
            try:
                return policy(req)
            finally:
                model_s[0] += time.perf_counter() - t

        model.policy = timed_policy
        h = Harness(parse_config(
            f'home = "home"\ndefault_model = "{MODEL}"\n[providers.scripted]\n'
            f'base_url = "{model.base_url}"\napi_key = "k"\n', "bench.toml", Path(tmp)))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        try:
            res = await run_config(h, EvalConfig(MODEL), cases, Options(concurrency=4))
            by = {c.id: c for c in cases}
            summary = summarize([score_case(by[r.case_id], r) for r in res.runs], res.runs)
            report = build_report(cases, [res], started_at=datetime.now(UTC))
            markdown(report), html_page(report)
        finally:
            await h.close()
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
    k = len(cases)
    loop = in_tick[0] - model_s[0]
    own = wall - in_tick[0]
    print(f"{k} cases (concurrency 4), scripted model answering from the ground truth: "
          f"recall {summary['recall']}, precision {summary['precision']}, "
          f"{summary['failures']} failures, {summary['model_calls']} model calls, fixes recognised "
          f"{summary['re_review']['fixes_recognised']}/{summary['re_review']['fixes']}")
    print(f"{'per case':<44} {'seconds':>8}")
    for label, value in [
            ("wall, everything", wall / k),
            ("  model time (scripted policy)", model_s[0] / k),
            ("  reviewer loop without the model (tick)", loop / k),
            ("  eval's own: build, read back, score, report", own / k),
            ("CPU of this process", cpu / k)]:
        print(f"{label:<44} {value:>8.3f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else None))
