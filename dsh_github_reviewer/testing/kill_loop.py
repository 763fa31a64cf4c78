"""The SIGKILL loop: ``dsh run`` killed at random moments while pushes, ``/bot`` and
``/review`` arrive between restarts, then the durability invariants checked on the sandbox
GitHub and the stored records. Used by ``tests/e2e/test_kill_loop.py`` (a short loop) and
``scripts/sigkill_loop.py`` (the long one, >= 30 kills)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.triggers import SUMMARY_MARKER, Trigger, review_marker
from .deployment import Deployment
from .sandbox import SandboxGitHub
from .scenario import BOT_LOGIN, FEATURE, REPO, build_shop

PRS = 3


@dataclass
class LoopReport:
    kills: int = 0
    pushes: int = 0
    bots: list[int] = field(default_factory=list)
    review_cmds: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)   # commands of people not allowed
    problems: list[str] = field(default_factory=list)
    prs: int = PRS  # open PRs the loop works on (1..prs)
    reviews: int = 0
    replies: int = 0
    terminated: int = 0  # database connections terminated under the replicas (replica_loop)
    deliveries: dict[int, int] = field(default_factory=dict)  # webhook port -> answered


def _dsh(config: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", "--config", str(config),
                             "run", *args], cwd=config.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _event(rng: random.Random, sb: SandboxGitHub, report: LoopReport, step: int) -> None:
    number = rng.randint(1, report.prs)
    kind = rng.choice(["push", "bot", "bot", "review", "none", "stranger"])
    st = sb.state
    if kind == "push":
        st.commit(REPO, f"feature-{number}",
                  {"shop/cart.py": FEATURE["shop/cart.py"] + f"# step {step}\n"},
                  message=f"step {step}")
        report.pushes += 1
    elif kind == "bot":
        report.bots.append(st.add_issue_comment(REPO, number, "maintainer",
                                                f"/bot question {step}?").id)
    elif kind == "review":
        report.review_cmds.append(st.add_issue_comment(REPO, number, "maintainer",
                                                       "/review").id)
    elif kind == "stranger":
        report.refused.append(st.add_issue_comment(REPO, number, "stranger", "/review").id)


def run_loop(tmp: Path, sb: SandboxGitHub, model, kills: int, seed: int = 11,
             max_pause_s: float = 2.5) -> LoopReport:
    """Kill ``dsh run`` ``kills`` times, then let it finish; returns what it checked."""
    rng = random.Random(seed)
    build_shop(sb, prs=PRS)
    config = Deployment(tmp, sb, model, poll_interval_s=1.0).write_config()
    report = LoopReport()
    # The bot is running before the first event: comments older than its first poll are
    # history it never answers (by design), which would read as lost triggers here.
    subprocess.run([sys.executable, "-m", "dsh_harness.cli", "--config", str(config), "run",
                    "--once"], cwd=config.parent, capture_output=True, timeout=600, check=True)
    for step in range(kills):
        _event(rng, sb, report, step)
        proc = _dsh(config)
        time.sleep(rng.uniform(0.2, max_pause_s))
        if rng.random() < 0.5:
            _event(rng, sb, report, step + 1000)   # something arrives while it runs, too
            time.sleep(rng.uniform(0.0, 0.5))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        report.kills += 1
    for _ in range(2):   # then it runs undisturbed until nothing is due
        done = subprocess.run([sys.executable, "-m", "dsh_harness.cli", "--config",
                               str(config), "run", "--once"], cwd=config.parent,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            report.problems.append(f"dsh run --once failed: {done.stderr[-500:]}")
    asyncio.run(_check(tmp, sb, model, report))
    return report


async def _check(tmp: Path, sb: SandboxGitHub, model, report: LoopReport,
                 **toml_kw) -> None:
    st = sb.state
    problems = report.problems
    # The bot's posts only (by author), as the bot itself counts them.
    all_reviews = [r for n in range(1, report.prs + 1) for r in st.reviews_of(REPO, n)
                   if r.user == BOT_LOGIN]
    report.reviews = len(all_reviews)
    if any(r.state == "PENDING" for r in st.reviews):
        problems.append("a pending review was left on GitHub")
    comments = [c for n in range(1, report.prs + 1) for c in st.issue_comments_of(REPO, n)
                if c.user != BOT_LOGIN or SUMMARY_MARKER not in c.body]
    for cid in report.bots:
        answers = [c for c in comments
                   if c.user == BOT_LOGIN and f"reply-to:{cid} -->" in c.body]
        report.replies += len(answers)
        if len(answers) != 1:
            problems.append(f"/bot {cid} answered {len(answers)} times")
    for cid in report.review_cmds:
        marked = [r for r in all_reviews
                  if review_marker(Trigger.cmd("demo", cid)) in (r.body or "")]
        if len(marked) > 1:
            problems.append(f"/review {cid} answered {len(marked)} times")
        asked = next(c for c in comments if c.id == cid)
        # Answered by its own review, or covered by a review of the PR that came after it.
        later = [r for r in st.reviews_of(REPO, asked.number)
                 if r.submitted_at is not None and r.submitted_at >= asked.created_at]
        if not marked and not later:
            problems.append(f"/review {cid} was never answered")
    _check_reactions(sb, report)
    for n in range(1, report.prs + 1):
        summaries = [c for c in st.issue_comments_of(REPO, n)
                     if c.user == BOT_LOGIN and SUMMARY_MARKER in c.body]
        if len(summaries) != 1:
            problems.append(f"PR {n}: {len(summaries)} summary comments")
    for r in all_reviews:
        body = r.body or ""
        if "demo:auto:" in body:
            sha = body.split("demo:auto:", 1)[1].split(" ", 1)[0]
            if sha != r.commit_id:
                problems.append(f"review {r.id} is marked for head {sha} but made on "
                                f"{r.commit_id}")
            twins = [x for x in all_reviews if f"demo:auto:{sha} -->" in (x.body or "")]
            if len(twins) > 1:
                problems.append(f"head {sha[:12]} was reviewed automatically {len(twins)} times")
    dep = await Deployment(tmp, sb, model, **{"poll_interval_s": 1.0, **toml_kw}).start()
    try:
        for n in range(1, report.prs + 1):
            head = st.pull(REPO, n).head_sha
            rec = await dep.entry(n)
            if rec is None or rec.status != "reviewed" or rec.reviewed_head_sha != head:
                problems.append(f"PR {n}: record {rec and rec.status} "
                                f"{rec and rec.reviewed_head_sha} for head {head}")
            if not [r for r in st.reviews_of(REPO, n) if r.commit_id == head]:
                problems.append(f"PR {n}: head {head[:12]} has no review of its own")
            if rec is not None and rec.queued:
                problems.append(f"PR {n}: {len(rec.queued)} /bot still queued")
    finally:
        await dep.stop()


def _check_reactions(sb: SandboxGitHub, report: LoopReport) -> None:
    """👀 on every recorded command, 😕 on every refused one, each added exactly once (one
    201 from GitHub) and nothing else."""
    bot = "shop-review-bot"
    for cid, want in [*((c, "eyes") for c in report.bots + report.review_cmds),
                      *((c, "confused") for c in report.refused)]:
        have = {content for content, who in sb.state.reactions.get(cid, {}).items()
                if bot in who}
        created = [e for e in sb.log if e.method == "POST" and e.status == 201
                   and e.path.endswith(f"/comments/{cid}/reactions")]
        if have != {want}:
            report.problems.append(f"comment {cid}: reactions {sorted(have)}, want {want}")
        if len(created) != 1:
            report.problems.append(f"comment {cid}: {want} added {len(created)} times")
