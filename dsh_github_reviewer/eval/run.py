"""Run eval cases through the real loop, one configuration at a time.

Each configuration gets its own sandbox GitHub and a scratch home (deleted afterwards; the
user's home is never opened). Every case becomes a repository ``eval/<case id>`` whose base is
the case's base tree; its first push is opened as PR #1 by ``contributor``. The deployment is
the one ``dsh run --once`` drives (records, worker, runner or review team, guard, the real
github-mcp-server, the configured provider), reading the sandbox over HTTP. Cases go in batches
of ``concurrency``: open the batch's PRs, one tick (poll + every due review), push the second
pushes, another tick; then the findings are read back from what the bot posted (the inline
comments of its reviews) and the batch's cost is added up, so ``max_cost_usd`` stops between
batches with what was measured so far.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dsh_harness import DeploymentConfig, DshError, Harness, LoadedConfig

from ..config import ReviewerConfig
from ..core.session_key import PrKey
from ..testing import LoopbackPortDenied, SandboxGitHub
from ..testing.deployment import Deployment
from .cases import Case
from .score import CaseRun, Finding

OWNER = "eval"
ACCOUNT = "eval"
BOT = "dsh-eval-bot"
AUTHOR = "contributor"
BRANCH = "change"
TOKEN = "ghp_" + "e7a1" * 9
REVIEWER_PLUGIN = "dsh-github-reviewer"


class EvalError(DshError):
    """The eval cannot run as asked (bad model name, no sandbox port, …)."""


@dataclass(frozen=True)
class EvalConfig:
    """One configuration under test: a model, alone or as a review team."""

    model: str
    team: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.model} team({','.join(self.team)})" if self.team else self.model


@dataclass
class Options:
    concurrency: int = 4
    instructions: str = ""
    max_cost_usd: float | None = None
    progress: Callable[[str], None] = lambda line: None
    # Called after every batch: (configuration, cases done, cases in all, USD spent so far).
    on_batch: Callable[[EvalConfig, int, int, float], None] = lambda *a: None


@dataclass
class ConfigResult:
    config: EvalConfig
    runs: list[CaseRun] = field(default_factory=list)
    stopped: str | None = None  # why cases were left out (cost cap)
    wall_s: float = 0.0


def user_review_settings(harness: Harness) -> dict[str, Any]:
    """The ``review`` table of the user's first reviewer account (their tuning applies), or {}."""
    for _, cfg in harness.plugin_instances(REVIEWER_PLUGIN):
        config = cfg if isinstance(cfg, ReviewerConfig) else ReviewerConfig.model_validate(cfg)
        if config.accounts:
            return config.accounts[0].review.model_dump(mode="python")
    return {}


def check_model(base: DeploymentConfig, ref: str) -> None:
    provider, _, model = ref.partition("/")
    if not model or provider not in base.providers:
        known = ", ".join(sorted(base.providers)) or "none"
        raise EvalError(f"--model {ref!r}: want <provider>/<model> with a provider configured "
                        f"in [providers] (configured: {known})")


def scratch_config(base: DeploymentConfig, review: dict[str, Any], home: Path,
                   sb: SandboxGitHub, cfg: EvalConfig, repos: list[str],
                   opts: Options) -> LoadedConfig:
    """The user's providers, a fresh home and one account on the sandbox; nothing else of
    the user's deployment (no storage routes, no web UI, no other accounts)."""
    # The model under test alone (no fallback candidates); the cases have no instructions file
    # and two reviews at most, so neither require_instructions nor a review cap may stop them.
    review = {**review, "models": [], "require_instructions": False, "max_reviews_per_pr": 0,
              "team": {**review.get("team", {}), "personas": list(cfg.team)}}
    if opts.instructions:
        review["default_instructions"] = opts.instructions
    account = {"name": ACCOUNT, "personal_access_token": TOKEN, "api_url": sb.api_url,
               "web_url": sb.web_url, "repositories": repos, "poll_interval_s": 1.0,
               "max_concurrent_reviews": max(1, opts.concurrency), "review": review}
    config = DeploymentConfig.model_validate({
        "home": home, "default_model": cfg.model, "providers": base.providers,
        "disable_plugins": base.disable_plugins,
        "plugins": {"github-reviewer": {"plugin": REVIEWER_PLUGIN, "accounts": [account]}}})
    return LoadedConfig(source="(eval scratch config)", base_dir=home.parent, config=config)


def _repo(case: Case) -> str:
    return f"{OWNER}/{case.id}"


def _push(sb: SandboxGitHub, case: Case, n: int) -> str:
    p = case.push[n - 1]
    files: dict[str, str | None] = {path: None for path in p.delete}
    files.update(p.files)
    return sb.state.commit(_repo(case), BRANCH, files, message=p.message)


async def _usage(harness: Harness, case: Case) -> dict[str, Any]:
    """Tokens, cost, model calls and wall time of every session of the case's PR (the
    reviewer's, or the coordinator's and each persona's)."""
    prefix = PrKey(ACCOUNT, OWNER, case.id, 1).session_id
    out = {"cost_usd": 0.0, "prompt_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
           "model_calls": 0}
    spans: dict[int, list[datetime]] = {}
    for sid in await harness.sessions.store.list_ids():
        if sid != prefix and not sid.startswith(prefix + ":"):
            continue
        log = await harness.sessions.read(sid)
        for e in log.events:
            if e.type == "turn_end":
                u = e.usage
                out["cost_usd"] += u.cost_usd
                out["prompt_tokens"] += u.uncached_input + u.cache_read
                out["cached_tokens"] += u.cache_read
                out["output_tokens"] += u.output
            elif e.type == "step_start":
                out["model_calls"] += 1
            if e.type in ("turn_start", "turn_end"):
                spans.setdefault(e.turn, []).append(e.at)
    # Turns of one review overlap across persona sessions: each review's wall is its span.
    out["wall_s"] = round(sum((max(v) - min(v)).total_seconds() for v in spans.values()), 3)
    return out


async def _collect(dep: Deployment, case: Case, shas: list[str]) -> CaseRun:
    st = dep.sb.state
    push_of = {sha: i for i, sha in enumerate(shas, 1)}
    findings: list[Finding] = []
    reviewed: set[int] = set()
    for r in st.reviews_of(_repo(case), 1):
        if r.user != BOT or r.state == "PENDING" or r.commit_id not in push_of:
            continue
        reviewed.add(push_of[r.commit_id])
        for c in st.comments_of_review(r.id):
            if c.line is None or c.in_reply_to is not None:
                continue
            findings.append(Finding(push=push_of[r.commit_id], path=c.path, line=c.line,
                                    start_line=c.start_line, body=c.body, comment_id=c.id))
    missing = [i for i in range(1, len(shas) + 1) if i not in reviewed]
    error = None
    if missing:
        entry = await dep.entry(1, ACCOUNT, _repo(case))
        why = (entry.last_error if entry is not None and entry.last_error
               else "the bot posted no review")
        error = f"push {', '.join(map(str, missing))}: {why}"
    assert dep.harness is not None
    usage = await _usage(dep.harness, case)
    return CaseRun(case_id=case.id, findings=findings, reviewed=sorted(reviewed),
                   resolved=sorted(root for root, login in st.resolved_threads.items()
                                   if login == BOT), error=error, **usage)


async def run_config(harness: Harness, cfg: EvalConfig, cases: list[Case], opts: Options,
                     spent: float = 0.0) -> ConfigResult:
    """Every case under ``cfg``; ``spent`` is what earlier configurations cost (for the cap)."""
    check_model(harness.config, cfg.model)
    review = user_review_settings(harness)
    try:
        sandbox = SandboxGitHub.on_loopback_80()
    except LoopbackPortDenied as exc:
        raise EvalError(f"the eval cannot start its sandbox GitHub: {exc}") from None
    result = ConfigResult(cfg)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dsh-eval-") as tmp, sandbox as sb:
        st = sb.state
        sb.add_token(BOT, TOKEN)
        st.add_user(AUTHOR)
        for case in cases:
            st.create_repo(_repo(case), dict(case.base))
        loaded = scratch_config(harness.config, review, Path(tmp) / "home", sb, cfg,
                                [_repo(c) for c in cases], opts)
        dep = await Deployment(Path(tmp), sb, None, loaded=loaded).start()
        try:
            size = max(1, opts.concurrency)
            for at in range(0, len(cases), size):
                batch = cases[at:at + size]
                if opts.max_cost_usd is not None and spent >= opts.max_cost_usd:
                    result.stopped = (f"--max-cost-usd {opts.max_cost_usd:g} reached after "
                                      f"{at} of {len(cases)} cases (${spent:.4f})")
                    opts.progress(f"[{cfg.label}] {result.stopped}; stopping")
                    break
                shas: dict[str, list[str]] = {}
                for case in batch:
                    shas[case.id] = [_push(sb, case, 1)]
                    st.open_pull(_repo(case), BRANCH, title=case.title, body=case.body,
                                 author=AUTHOR)
                await dep.tick(ACCOUNT)
                second = [c for c in batch if len(c.push) > 1]
                if second:
                    st.advance(1)  # the push is newer than what the last listing saw
                    for case in second:
                        shas[case.id].append(_push(sb, case, 2))
                    await dep.tick(ACCOUNT)
                for case in batch:
                    run = await _collect(dep, case, shas[case.id])
                    result.runs.append(run)
                    spent += run.cost_usd
                opts.on_batch(cfg, len(result.runs), len(cases), spent)
                opts.progress(f"[{cfg.label}] {len(result.runs)}/{len(cases)} cases, "
                              f"${spent:.4f} spent"
                              + (f", {sum(r.error is not None for r in result.runs)} failed"
                                 if any(r.error for r in result.runs) else ""))
        finally:
            await dep.stop()
    result.wall_s = round(time.monotonic() - started, 3)
    return result
