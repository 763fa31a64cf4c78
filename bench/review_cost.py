"""Cost of review 1, review 2 (after a push) and a /bot turn through the real loop, next to a
stateless baseline that starts a fresh session for every step; then what a re-review
costs after a one-line push to a ~1,000-line PR in 4 files, next to the code before the
prepared diff, and how review 2 scales with the PR's size (100, 1,000 and 5,000 lines).

Real poller, runner, guarded tools and github-mcp-server against the sandbox GitHub; the
scripted reviewer model reports tokens the way DeepSeek does, with its prefix-cache simulator.
Prices: the deployment defaults for deepseek-v4-flash. Prints tables; asserts nothing.

    python bench/review_cost.py [--old-python PATH]

``--old-python`` runs the PR-size scenarios once more under another interpreter with an older
checkout installed (e.g. main before issue 12) and prints its figures beside these. Without it
the "before" column quotes the issue's measured figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from dsh_github_reviewer.cli.demo import session_turns
from dsh_github_reviewer.core.session_key import PrKey
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import (
    BOT_TOKEN,
    INSTRUCTIONS,
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


ISSUE_RATIO = 0.88  # Review 2 / review 1 after a one-line push, ~1,000-line PR
# Issue 28's figures (output priced in), the code before it: r2/r1 at 100 and 1,000 lines.
ISSUE28 = {100: 0.380, 1_000: 0.228}
# deepseek-v4-flash, USD per 1M tokens: every figure below prices output too.
PRICE = {"input": 0.14, "cache_read": 0.0028, "output": 0.28}


def priced(row: dict) -> float:
    """A turn's cost with output priced in (the session's ``cost_usd`` may leave it out)."""
    return ((row["prompt_tokens"] - row["cache_hit_tokens"]) * PRICE["input"]
            + row["cache_hit_tokens"] * PRICE["cache_read"]
            + row["output_tokens"] * PRICE["output"]) / 1e6
MODULES = ["svc/api.py", "svc/store.py", "svc/jobs.py", "svc/util.py"]


def pr_files(lines: int) -> dict[str, str]:
    """Four modules of plain functions, ``lines`` lines in all, with one real finding."""
    out = {}
    for i, name in enumerate(MODULES):
        stem = name.split("/")[1][:-3]
        body = [f'"""The {stem} module."""', ""]
        k = 0
        while len(body) < lines // 4 - (4 if name == MODULES[-1] else 0):
            body += [f"def {stem}_{k}(x: int) -> int:", f"    return x * {k} + {i}", "", ""]
            k += 1
        out[name] = "\n".join(body[: lines // 4 - (4 if name == MODULES[-1] else 0)]) + "\n"
    out[MODULES[-1]] += "\n\ndef parse(expr: str):\n    return eval(expr)\n"
    return out


def prefix_breaks(served) -> int:
    """Requests of the PR's session whose cached prefix is shorter than the request before
    it (a changed byte early in the prompt: the provider re-reads the rest uncached). The
    simulator caches in 64-token blocks, so a shortfall of more than one block is a break."""
    breaks, before = 0, None
    for s in served:
        if s.fault is not None:
            continue
        if before is not None and s.cache_hit_tokens < before - 64:
            breaks += 1
        before = s.prompt_tokens
    return breaks


async def size_scenario(lines: int) -> dict:
    """Review 1 of a ``lines``-line PR, a one-line push, review 2."""
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            model_server() as model:
        st = sb.state
        st.create_repo(REPO, {"README.md": "# shop\n", "svc/__init__.py": "",
                              ".github/review_instructions.md": INSTRUCTIONS})
        st.set_association(REPO, "maintainer", "MEMBER")
        sb.add_token("shop-review-bot", BOT_TOKEN)
        files = pr_files(lines)
        st.commit(REPO, "feature-1", files, message="Add the service")
        st.open_pull(REPO, "feature-1", title="The service", body="Adds the service.",
                     author="alice")
        dep = await Deployment(Path(tmp), sb, model).start()
        try:
            await dep.tick()
            store = files["svc/store.py"]
            st.commit(REPO, "feature-1", {"svc/store.py": store.replace(
                "return x * 3 + 1", "return x * 3 - 1", 1)}, message="Fix the sign")
            await dep.tick()
            assert dep.harness is not None
            rows = await session_turns(dep.harness, SESSION)
        finally:
            await dep.stop()
        total = sum(len(t.splitlines()) for t in files.values())
        return {"lines": total, "review1": rows[0], "review2": rows[1],
                "breaks": prefix_breaks(model.served),
                "requests": len([s for s in model.served if s.fault is None])}


async def sizes() -> list[dict]:
    return [await size_scenario(n) for n in (100, 1_000, 5_000)]


GOALS = {100: 0.25, 1_000: 0.15}


def size_tables(new: list[dict], old: list[dict] | None) -> None:
    print("\nRe-review after a one-line push: review 2 / review 1 cost (output priced in)")
    head = (f"{'PR lines':>8} | {'review 1 $':>10} {'review 2 $':>10} {'r2 prompt':>9} "
            f"{'r2 uncached':>11} {'r2 out':>6} {'reqs':>4} {'breaks':>6} | "
            f"{'before r2/r1':>12} {'now r2/r1':>9} | goal")
    print(head)
    for i, r in enumerate(new):
        a, b = r["review1"], r["review2"]
        ratio = priced(b) / priced(a)
        if old:
            before = f"{priced(old[i]['review2']) / priced(old[i]['review1']):.3f}"
        else:
            near = next((v for k, v in ISSUE28.items() if abs(k - r["lines"]) < k // 10 + 10),
                        None)
            before = f"{near:.3f}*" if near is not None else "-"
        goal = next((f"<= {v:.2f}" for k, v in GOALS.items()
                     if abs(k - r["lines"]) < k // 10 + 10), "")
        print(f"{r['lines']:>8} | {priced(a):>10.6f} {priced(b):>10.6f} "
              f"{b['prompt_tokens']:>9} {b['prompt_tokens'] - b['cache_hit_tokens']:>11} "
              f"{b['output_tokens']:>6} {r['requests']:>4} {r['breaks']:>6} | "
              f"{before:>12} {ratio:>9.3f} | {goal}")
    if not old:
        print("* the figure measured before (quoted); --before-json or --old-python measure it.")
    else:
        print("before: the same scenarios on the code before (--before-json / --old-python).")
    print("reqs: model requests of both reviews; breaks: requests whose cached prefix is "
          "shorter than the request before it (goal 0).")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old-python", help="interpreter with the older checkout installed")
    parser.add_argument("--sizes-json", action="store_true",
                        help="print only the PR-size scenarios, as JSON (a 'before' run)")
    parser.add_argument("--before-json", help="the --sizes-json output of the code before")
    parser.add_argument("--sizes-only", action="store_true", help="skip the demo table")
    args = parser.parse_args()
    if args.sizes_json:  # the --old-python child
        print(json.dumps(asyncio.run(sizes()), default=str))
        return
    old = None
    if args.before_json:
        old = json.loads(Path(args.before_json).read_text().strip().splitlines()[-1])
    if args.old_python:
        done = subprocess.run([args.old_python, __file__, "--sizes-json"], check=True,
                              capture_output=True, text=True, cwd="/")
        old = json.loads(done.stdout.strip().splitlines()[-1])
    if not args.sizes_only:
        asyncio.run(demo_table())
    size_tables(asyncio.run(sizes()), old)


async def demo_table() -> None:
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
    main()
