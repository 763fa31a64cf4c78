"""The eval runner's own cost per case, and what pipelining saves when some cases are slow.

Runs shipped cases through `run_config` with a scripted model that answers from the ground
truth (the `perfect` behaviour), at concurrency 4, twice:

1. **instant**: every model call answers at once. Wall per case is the reviewer loop itself
   (poll, records, worker, guard, github-mcp-server) plus the eval's own work (building each
   case in the sandbox GitHub, reading back what was posted, session usage), with scoring and
   the reports timed apart. CPU is this process's (github-mcp-server's children not counted).
2. **stragglers**: every 4th case's model calls each wait DELAY s (a slow model on a big PR).
   A runner in batches of 4 waits for each batch's slowest case: it cannot take less than the
   sum over batches of their slowest case's model time (printed); a pipelined runner starts a
   case as soon as one ends. For the figures before pipelining, run this script with
   PYTHONPATH at a checkout of the commit before it (the runner's API is the same): the docs
   quote both.

    .venv/bin/python bench/eval_overhead.py [N_CASES] [DELAY_S]     (DELAY_S 0: instant only)
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
from dsh_github_reviewer.eval.scripted_model import eval_model
from dsh_harness import Harness, parse_config

MODEL = "scripted/deepseek-v4-flash"
CONCURRENCY = 4


async def run(cases, delay: float) -> dict:
    slow = {c.id.lower() for i, c in enumerate(cases) if delay and i % CONCURRENCY == 0}
    model_s: dict[str, float] = {}
    with eval_model(cases, "perfect") as model, tempfile.TemporaryDirectory() as tmp:
        policy = model.policy

        def timed_policy(req):
            text = req.last_user_text().lower()
            case = next((c.id.lower() for c in cases if f"eval/{c.id.lower()}" in text), "")
            t = time.perf_counter()
            try:
                if case in slow:
                    time.sleep(delay)  # the scripted server answers each request in a thread
                return policy(req)
            finally:
                model_s[case] = model_s.get(case, 0.0) + time.perf_counter() - t

        model.policy = timed_policy
        h = Harness(parse_config(
            f'home = "home"\ndefault_model = "{MODEL}"\n[providers.scripted]\n'
            f'base_url = "{model.base_url}"\napi_key = "k"\n', "bench.toml", Path(tmp)))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        try:
            res = await run_config(h, EvalConfig(MODEL), cases, Options(concurrency=CONCURRENCY))
        finally:
            await h.close()
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
    t = time.perf_counter()
    by = {c.id: c for c in cases}
    summary = summarize([score_case(by[r.case_id], r) for r in res.runs], res.runs)
    report = build_report(cases, [res], started_at=datetime.now(UTC))
    markdown(report), html_page(report)
    scoring = time.perf_counter() - t
    per_case = [model_s.get(c.id.lower(), 0.0) for c in cases]
    batched = sum(max(per_case[i:i + CONCURRENCY]) for i in range(0, len(cases), CONCURRENCY))
    return {"wall": wall, "cpu": cpu, "model": sum(per_case), "scoring": scoring,
            "batched_model_bound": batched, "summary": summary}


async def main(n: int | None, delay: float) -> None:
    cases = load_cases()[:n] if n else load_cases()
    k = len(cases)
    fast = await run(cases, 0.0)
    s = fast["summary"]
    print(f"{k} cases (concurrency {CONCURRENCY}), scripted model answering from the ground "
          f"truth: recall {s['recall']}, precision {s['precision']}, {s['failures']} failures, "
          f"{s['model_calls']} model calls")
    print(f"{'instant model, per case':<52} {'seconds':>8}")
    for label, value in [
            ("wall, everything", fast["wall"] / k),
            ("  model time (scripted policy)", fast["model"] / k),
            ("  reviewer loop and the eval's own work", (fast["wall"] - fast["model"]) / k),
            ("scoring and the three reports (after the run)", fast["scoring"] / k),
            ("CPU of this process", fast["cpu"] / k)]:
        print(f"{label:<52} {value:>8.3f}")
    if not delay:
        return
    slow = await run(cases, delay)
    print(f"\nstragglers: every {CONCURRENCY}th case's model calls wait {delay:g} s "
          f"({k} cases)")
    print(f"{'':<44} {'wall s':>8}")
    print(f"{'slowest case per batch of 4, summed':<44} {slow['batched_model_bound']:>8.1f}")
    print(f"{'this runner, measured':<44} {slow['wall']:>8.1f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else None,
                     float(sys.argv[2]) if len(sys.argv) > 2 else 2.0))
