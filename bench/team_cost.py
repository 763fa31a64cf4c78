"""Cost and prefix-cache hits of run 1 and run 2 (after a push) on one PR for:

* the three-persona team in CI mode (action.yml in the Actions simulator: fresh runner per
  job, sessions carried by the cache stand-in between the two runs),
* a single reviewer (the daemon's one session per PR; the figure main had before the team),
* a stateless team (the same action with nothing restored: every run starts new sessions).

Real `dsh github-reviewer ci` processes, github-mcp-server and sandbox GitHub; the scripted team
and reviewer report tokens like DeepSeek with the prefix-cache simulator; prices are the
deepseek-v4-flash defaults (USD per 1M: input 0.14, cache read 0.0028, output 0.28). Also
counts the inline comments each run posted (a team without memory repeats old findings).
Then ten consecutive runs of the team on one PR, a one-line push before each, with a
small compaction budget (``max-prompt-tokens``): how many compactions ran and the prefix-cache
hit of each session's first request per run, and what each compaction's summary request cost
(and would have cost as the session's whole prompt). Prints tables; asserts nothing.

    python bench/team_cost.py [--runs-only] [--budget 8000] [--lines 1000] [--runs 10]
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
from dsh_github_reviewer.testing.team_model import COORDINATOR_SYSTEM, PERSONA_SYSTEM, TeamModel
from dsh_harness.testing import PrefixCache, ScriptedModelServer, is_compaction_request
from dsh_harness.testing.prefix_cache import render_prompt

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


def build_big(sb, lines: int) -> None:
    """A ``lines``-line PR in four modules (bench/review_cost.py's), one real finding."""
    from review_cost import INSTRUCTIONS, pr_files

    st = sb.state
    st.create_repo(REPO, {"README.md": "# shop\n", "svc/__init__.py": "",
                          ".github/review_instructions.md": INSTRUCTIONS})
    sb.add_token("shop-review-bot", BOT_TOKEN)
    st.commit(REPO, "feature-1", pr_files(lines), message="Add the service")
    st.open_pull(REPO, "feature-1", title="The service", body="Adds the service.",
                 author="alice")


def one_line_push(sb, lines: int) -> None:
    from review_cost import pr_files

    store = pr_files(lines)["svc/store.py"]
    sb.state.commit(REPO, "feature-1", {"svc/store.py": store.replace(
        "return x * 3 + 1", "return x * 3 - 1", 1)}, message="Fix the sign")


def team(stateless: bool, lines: int | None = None) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            ScriptedModelServer(policy=TeamModel()) as model:
        if lines:
            build_big(sb, lines)
        else:
            build_shop(sb)
        sim = ActionsSimulator(Path(tmp) / "a", ROOT, REPO, token=BOT_TOKEN,
                               api_url=sb.api_url, server_url=sb.web_url)
        for n, action in enumerate(("opened", "synchronize")):
            if n == 1:
                if lines:
                    one_line_push(sb, lines)
                else:
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
            rows[-1]["sessions"] = by_session(model.served[start:])
    return rows


def session_of(served) -> str:
    """The team session a request belongs to, from its system prompt."""
    system = served.request["messages"][0]["content"]
    if is_compaction_request(served.request):
        return "(compaction summary)"
    m = PERSONA_SYSTEM.match(system)
    if m:
        return m.group(1)
    return "coordinator" if system.startswith(COORDINATOR_SYSTEM) else "(other)"


def by_session(served) -> dict[str, dict]:
    names: dict[str, list] = {}
    for s in served:
        if s.fault is None:
            names.setdefault(session_of(s), []).append(s)
    return {name: figures(rows, 0) for name, rows in names.items()}


async def single(lines: int | None = None) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            model_server() as model:
        if lines:
            build_big(sb, lines)
        else:
            build_shop(sb)
        dep = await Deployment(Path(tmp), sb, model).start()
        try:
            for n in range(2):
                if n == 1:
                    if lines:
                        one_line_push(sb, lines)
                    else:
                        push_fix(sb)
                start = len(model.served)
                await dep.tick()
                review = sb.state.reviews_of(REPO, 1)[-1]
                rows.append(figures(model.served[start:],
                                    len(sb.state.comments_of_review(review.id))))
        finally:
            await dep.stop()
    return rows


class CompactionProbe(ScriptedModelServer):
    """The scripted server, also keeping its prefix cache as each compaction request found
    it: what the other shape of that request (the session's whole prompt, then the
    instruction) would have hit is worked out from it afterwards."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.cache_before: dict[str, set[bytes]] = {}

    async def _chat(self, request):
        body = await request.json()
        if is_compaction_request(body):
            with self._lock:
                self.cache_before[repr(body["messages"])] = set(self.cache._prefixes)
        return await super()._chat(request)


def cost_of(prompt: int, hit: int, out: int) -> float:
    return ((prompt - hit) * PRICE["input"] + hit * PRICE["cache_read"]
            + out * PRICE["output"]) / 1e6


def whole_prompt_cost(model: CompactionProbe, served: list, i: int) -> float:
    """What compaction request ``served[i]`` would have cost as the session's whole prompt
    (head, the turns kept verbatim and the running turn) then the instruction: the session's
    next request is that prompt with the head replaced by the summary pair."""
    asked = served[i].request
    system = asked["messages"][0]
    after = next((x.request for x in served[i + 1:] if not is_compaction_request(x.request)
                  and x.request["messages"][0] == system), None)
    if after is None:  # a standalone request (main before this shape): no session's prompt
        return float("nan")
    whole = asked["messages"][:-1] + after["messages"][3:] + asked["messages"][-1:]
    cache = PrefixCache()
    cache._prefixes = set(model.cache_before[repr(asked["messages"])])
    prompt, hit = cache.account(render_prompt(whole, asked.get("tools")))
    return cost_of(prompt, hit, served[i].completion_tokens)


def runs(n: int, budget: int, lines: int) -> list[dict]:
    """``n`` team runs on a ``lines``-line PR, a one-line push before each after the first,
    with compaction above ``budget`` prompt tokens per session."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            CompactionProbe(policy=TeamModel()) as model:
        build_big(sb, lines)
        sim = ActionsSimulator(Path(tmp) / "a", ROOT, REPO, token=BOT_TOKEN,
                               api_url=sb.api_url, server_url=sb.web_url)
        for i in range(n):
            if i:
                sb.state.commit(REPO, "feature-1", {"svc/notes.py": f"NOTE = {i}\n"},
                                message=f"Note {i}")
            start = len(model.served)
            run = sim.run("pull_request", pull_request_event(sb, REPO, 1,
                                                             "opened" if not i else
                                                             "synchronize"),
                          inputs={"deepseek-api-key": "scripted", "fail-on": "never",
                                  "max-prompt-tokens": str(budget),
                                  "model-base-url": model.base_url})
            if run.exit_code != 0:
                sys.exit(f"team run {i + 1} failed:\n{run.output}")
            served = [x for x in model.served[start:] if x.fault is None]
            asked = [i for i, x in enumerate(served) if is_compaction_request(x.request)]
            firsts: dict[str, object] = {}
            for x in served:
                system = x.request["messages"][0]["content"]
                if not is_compaction_request(x.request):
                    firsts.setdefault(system[:60], x)
            hits = [100.0 * f.cache_hit_tokens / f.prompt_tokens  # type: ignore[attr-defined]
                    for f in firsts.values() if f.prompt_tokens]  # type: ignore[attr-defined]
            prompt = sum(f.prompt_tokens for f in firsts.values())  # type: ignore[attr-defined]
            hit = sum(f.cache_hit_tokens for f in firsts.values())  # type: ignore[attr-defined]
            rows.append({**figures(served, 0), "compactions": len(asked),
                         "summary": [figures([served[i]], 0) for i in asked],
                         "whole": [whole_prompt_cost(model, served, i) for i in asked],
                         "first_hit": min(hits) if hits else 0.0,
                         "first_all": 100.0 * hit / prompt if prompt else 0.0})
    return rows


def runs_table(rows: list[dict], budget: int, lines: int) -> None:
    print(f"\n{len(rows)} consecutive team runs on a {lines:,}-line PR, a one-line push before "
          f"each, compaction above {budget} prompt tokens per session")
    print(f"{'run':>3} {'reqs':>5} {'prompt':>7} {'hit%':>6} {'cost $':>10} {'compactions':>11} "
          f"{'first-request hit %: lowest session':>36} {'all sessions':>13}")
    for i, r in enumerate(rows, 1):
        print(f"{i:>3} {r['requests']:>5} {r['prompt']:>7} {r['hit_pct']:>6} {r['cost']:>10.6f} "
              f"{r['compactions']:>11} {r['first_hit']:>36.1f} {r['first_all']:>13.1f}")
    total = sum(r["compactions"] for r in rows)
    first = next((i for i, r in enumerate(rows) if r["compactions"]), None)
    after = [r["first_hit"] for r in rows[first + 1:]] if first is not None else []
    after_all = [r["first_all"] for r in rows[first + 1:]] if first is not None else []
    before = BEFORE_AFTER_COMPACTION.get(budget) if len(rows) == 10 and lines == 1000 else None
    print(f"compaction runs: {sum(1 for r in rows if r['compactions'])} (requests: {total}); "
          f"first-request hit after the first: lowest session "
          + (f"{before:.1f} % before -> " if before is not None else "")
          + f"{min(after) if after else float('nan'):.1f} %, all sessions "
          f"{min(after_all) if after_all else float('nan'):.1f} % (goals: at most one "
          "compaction run, >= 90 % after it)")
    compaction_table(rows, budget, lines)


def compaction_table(rows: list[dict], budget: int, lines: int) -> None:
    """Each compaction's summary request: today's shape (the head through the cut, a prefix of
    the session's last request, then the instruction), the other continuation (the whole
    prompt, then the instruction) and main's standalone request before them."""
    before = BEFORE_COMPACTION if budget == 8000 and lines == 1000 and len(rows) == 10 else None
    print("\nthe compaction's summary request (the session's head through the cut, then the "
          "instruction)")
    print(f"{'run':>3} {'prompt':>7} {'cached':>7} {'hit%':>6} {'cost $':>10} "
          f"{'as whole prompt $':>18} {'run cost $':>11}")
    for n, r in enumerate(rows, 1):
        for f, whole in zip(r["summary"], r["whole"], strict=True):
            print(f"{n:>3} {f['prompt']:>7} {f['hit']:>7} {f['hit_pct']:>6} {f['cost']:>10.6f} "
                  f"{whole:>18.6f} {r['cost']:>11.6f}")
    ran = [r for r in rows if r["compactions"]]
    if before and ran:
        now = ran[0]
        print(f"before (main 5a6c8f7: a standalone transcript request) -> now: summary request "
              f"{before['summary']:.6f} -> {now['summary'][0]['cost']:.6f} $, "
              f"{before['summary_prompt']} -> {now['summary'][0]['prompt']} prompt tokens "
              f"({before['summary_hit_pct']} -> {now['summary'][0]['hit_pct']} % cached); "
              f"compaction run {before['run']:.6f} -> {now['cost']:.6f} $ "
              f"(a run without one: ~{before['plain_run']:.6f} $)")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs-only", action="store_true", help="only the ten-run table")
    # 8,000: the coordinator's session reaches it within the ten runs (with 10,000 it no
    # longer does since its per-run message shrank), so the runs after a compaction are seen.
    parser.add_argument("--budget", type=int, default=8000, help="max-prompt-tokens")
    parser.add_argument("--lines", type=int, default=1000, help="the PR's size")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    if not args.runs_only:
        compare()
    runs_table(runs(args.runs, args.budget, args.lines), args.budget, args.lines)


# Today's main before this change (c5b95b8, same bench and scripted models): the coordinator
# spent a request on `create`, its message fenced every "No findings." report, and a
# compaction summarized all but the newest two turns. (Before issue 28 itself, main b1b1df3:
# run2/run1 0.319, team/single 5.907.)
BEFORE = {"team run2/run1": 0.000281 / 0.002947, "team/single run 2": 0.000281 / 0.000129}
# Run 2 of the 1,000-line team review on c5b95b8, per session: requests, uncached and cached
# input tokens, output tokens, cost in USD.
BEFORE_SESSIONS = {"quality": (1, 213, 5056, 3), "security": (1, 242, 5056, 3),
                   "performance": (1, 204, 5056, 3), "coordinator": (2, 639, 12288, 71)}
# The ten-run table on c5b95b8: the lowest session's first-request hit after the compaction
# run, per --budget (runs with that budget and --runs 10, --lines 1000).
BEFORE_AFTER_COMPACTION = {10000: 87.2, 8000: 85.5, 7000: 83.8}
# The compaction run (run 7 of ten, --budget 8000, --lines 1000) on 5a6c8f7, where the summary
# request was a conversation of its own (SUMMARY_SYSTEM, a text transcript of the head): the
# provider had never seen a byte of it.
BEFORE_COMPACTION = {"summary": 0.000607, "summary_prompt": 4313, "summary_hit_pct": 0.0,
                     "run": 0.001083, "plain_run": 0.000224}


def session_table(rows: dict[str, dict]) -> None:
    print(f"\nwhere run 2 of the team goes (1,000 lines), before -> now\n"
          f"{'session':<14} {'reqs':>9} {'uncached':>13} {'cached':>13} {'out':>9} "
          f"{'cost $':>21}")
    cost = lambda r, c, o: (r * PRICE["input"] + c * PRICE["cache_read"]  # noqa: E731
                            + o * PRICE["output"]) / 1e6
    for name in sorted(set(rows) | set(BEFORE_SESSIONS)):
        now = rows.get(name)
        n = (now["requests"], now["prompt"] - now["hit"], now["hit"], now["out"]) if now \
            else (0, 0, 0, 0)
        b = BEFORE_SESSIONS.get(name, (0, 0, 0, 0))
        print(f"{name:<14} {b[0]:>4}->{n[0]:<4} {b[1]:>6}->{n[1]:<6} {b[2]:>6}->{n[2]:<6} "
              f"{b[3]:>4}->{n[3]:<4} {cost(*b[1:]):.6f}->{cost(*n[1:]):.6f}")


def compare() -> None:
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
    big_team, big_single = team(False, 1_000), asyncio.run(single(1_000))
    print("\n1,000-line PR in 4 files, a one-line push before run 2")
    for name, rows in (("team (CI, cached sessions)", big_team),
                       ("single reviewer (daemon)", big_single)):
        for i, r in enumerate(rows, 1):
            print(f"{name if i == 1 else '':<46} {i:>3} {r['requests']:>5} {r['prompt']:>7} "
                  f"{r['hit']:>7} {r['hit_pct']:>6} {r['out']:>5} {r['cost']:>10.6f} "
                  f"{r['comments']:>8}")
    session_table(big_team[1]["sessions"])
    now = {"team run2/run1": big_team[1]["cost"] / big_team[0]["cost"],
           "team/single run 2": big_team[1]["cost"] / big_single[1]["cost"]}
    goals = {"team run2/run1": "<= 0.15", "team/single run 2": "<= 2"}
    print(f"\n{'ratio (1,000 lines)':<20} {'before':>8} {'now':>8}  goal")
    for k, v in now.items():
        print(f"{k:<20} {BEFORE[k]:>8.3f} {v:>8.3f}  {goals[k]}")


if __name__ == "__main__":
    main()
