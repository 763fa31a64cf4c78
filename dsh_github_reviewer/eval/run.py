"""Run eval cases through the real loop, one configuration at a time.

Each configuration gets its own sandbox GitHub and a scratch home (deleted afterwards; the
user's home is never opened). Every case becomes a repository ``eval/<case id>`` whose base is
the case's base tree; its first push is opened as PR #1 by ``contributor``. The deployment is
the one ``dsh run`` drives (records, worker, runner or review team, guard, the real
github-mcp-server, the configured provider), reading the sandbox over HTTP, its scheduler
running throughout and its webhook receiver taking the sandbox's deliveries (as a deployment
with webhooks does; a poll only as a fallback for a lost delivery). Cases are **pipelined**:
up to ``concurrency`` are in flight, and a case starts as soon as one ends (no batch waits for
its slowest case). A case: open the PR, wait until its review is posted (or failed), push the
second push, wait again; then the findings are read back from what the bot posted and the PR
is closed. Before a case starts the configuration's spend is checked against
``max_cost_usd`` and ``stop`` (Ctrl-C): either stops new cases, and the ones in flight finish.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dsh_harness import DeploymentConfig, DshError, Harness, LoadedConfig

from ..app import ReviewerApp
from ..app.webhooks import start_receivers, stop_receivers
from ..config import ReviewerConfig
from ..core.clock import utcnow
from ..core.session_key import PrKey, PrRef
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
HOOK_SECRET = "eval-sandbox-hook"  # between the scratch sandbox and its receiver, on loopback
REVIEWER_PLUGIN = "dsh-github-reviewer"


class EvalError(DshError):
    """The eval cannot run as asked (bad model name, no sandbox port, …)."""


# Further configuration axes (e.g. ``verify``: on/off): name -> how a value changes the
# account's ``review`` settings. An axis registered here can be put on an EvalConfig as
# ``extra=(("verify", "on"),)``; it shows in the label and in the report's ``axes``.
AXES: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {}


def _verify_axis(review: dict[str, Any], value: str) -> dict[str, Any]:
    """``verify``: the second look (``review.verify``) off or on."""
    if value not in ("off", "on"):
        raise EvalError(f"verify is off or on, not {value!r}")
    return {**review, "verify": value == "on"}


AXES["verify"] = _verify_axis


@dataclass(frozen=True)
class EvalConfig:
    """One configuration under test: a model, alone or as a review team, and any further
    axis values (``AXES``)."""

    model: str
    team: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        label = f"{self.model} team({','.join(self.team)})" if self.team else self.model
        return " ".join([label, *(f"{k}={v}" for k, v in self.extra)])

    @property
    def axes(self) -> dict[str, Any]:
        return {"model": self.model, "team": list(self.team), **dict(self.extra)}

    def review(self, review: dict[str, Any]) -> dict[str, Any]:
        """The account's ``review`` settings with this configuration's axis values applied."""
        for key, value in self.extra:
            if key not in AXES:
                raise EvalError(f"configuration axis {key!r} is not known "
                                f"(known: {', '.join(sorted(AXES)) or 'none'})")
            review = AXES[key](review, value)
        return review


@dataclass
class Options:
    concurrency: int = 4
    instructions: str = ""
    # This configuration's budget (the command gives each configuration an equal share).
    max_cost_usd: float | None = None
    progress: Callable[[str], None] = lambda line: None
    # Called after every case: (configuration, its run, cases done, cases in all, USD spent).
    on_case: Callable[[EvalConfig, CaseRun, int, int, float], None] = lambda *a: None
    # Set (Ctrl-C): start no new case; the cases in flight finish.
    stop: asyncio.Event | None = None
    repeat: int = 1  # stamped on the runs (``--repeat N``)


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


def check_model(base: DeploymentConfig, ref: str, option: str = "--model") -> None:
    provider, _, model = ref.partition("/")
    if not model or provider not in base.providers:
        known = ", ".join(sorted(base.providers)) or "none"
        raise EvalError(f"{option} {ref!r}: want <provider>/<model> with a provider configured "
                        f"in [providers] (configured: {known})")


def scratch_config(base: DeploymentConfig, review: dict[str, Any], home: Path,
                   sb: SandboxGitHub, cfg: EvalConfig, repos: list[str],
                   opts: Options) -> LoadedConfig:
    """The user's providers, a fresh home and one account on the sandbox; nothing else of
    the user's deployment (no storage routes, no web UI, no other accounts)."""
    # The model under test alone (no fallback candidates); the cases have no instructions file
    # and two reviews at most, so neither require_instructions nor a review cap may stop them.
    review = cfg.review({**review, "models": [], "require_instructions": False,
                         "max_reviews_per_pr": 0,
                         "team": {**review.get("team", {}), "personas": list(cfg.team)}})
    if opts.instructions:
        review["default_instructions"] = opts.instructions
    account = {"name": ACCOUNT, "personal_access_token": TOKEN, "api_url": sb.api_url,
               "web_url": sb.web_url, "repositories": repos, "poll_interval_s": 1.0,
               "max_concurrent_reviews": max(1, opts.concurrency), "review": review}
    # A webhook receiver on a free loopback port: the sandbox delivers each push and PR to it,
    # so a case's review starts without polling every case's repository (the reconciliation
    # poll is left to the runner, as a fallback).
    webhook = {"enabled": True, "host": "127.0.0.1", "port": 0, "secret": HOOK_SECRET,
               "reconcile_interval_s": 3600}
    config = DeploymentConfig.model_validate({
        "home": home, "default_model": cfg.model, "providers": base.providers,
        "disable_plugins": base.disable_plugins,
        "plugins": {"github-reviewer": {"plugin": REVIEWER_PLUGIN, "accounts": [account],
                                        "webhook": webhook}}})
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


class _Poller:
    """One poll of the account at a time; a caller waits for a poll that started after it
    asked (the push it made is then seen), and concurrent askers share it."""

    def __init__(self, dep: Deployment):
        self.dep = dep
        self.lock = asyncio.Lock()
        self.started = 0

    async def poll(self) -> None:
        wanted = self.started + 1
        async with self.lock:
            if self.started >= wanted:
                return  # a poll that started after the ask ran while this one waited
            self.started += 1
            await self.dep.pollers[ACCOUNT].tick()


SETTLE_POLL_S = 0.1
REPOLL_S = 2.0
# The PR's work is idle and owes nothing, yet its review is neither posted nor failed (a state
# the bot parks a PR in, e.g. a draft): after this long the case is collected as it stands
# (the collection names the recorded reason) instead of waiting for ever.
IDLE_S = 300.0


async def _settled(dep: Deployment, poller: _Poller, case: Case, sha: str) -> None:
    """Until the review of head ``sha`` is posted or has failed, and the PR's work is idle.
    The push reaches the bot as a webhook delivery; if its record has not appeared after
    ``REPOLL_S``, a poll looks (a lost delivery)."""
    key = PrRef(ACCOUNT, _repo(case), 1)
    store = await dep.store(ACCOUNT)
    assert dep.work is not None
    lane = dep.work.scheduler.lanes.get(ACCOUNT)
    waited = idle = 0.0
    while True:
        rec = await store.pr(key)
        busy = lane is not None and key in lane.running
        if rec is not None and rec.head_sha == sha and not busy and not rec.fixes and (
                rec.reviewed_head_sha == sha or rec.last_failed_sha == sha
                or rec.status == "gave_up"):
            return
        waiting = rec is not None and rec.not_before is not None and rec.not_before > utcnow()
        idle = idle + SETTLE_POLL_S if rec is not None and rec.head_sha == sha and not busy \
            and not waiting else 0.0
        if idle >= IDLE_S:
            return
        await asyncio.sleep(SETTLE_POLL_S)
        waited += SETTLE_POLL_S
        if rec is None or rec.head_sha != sha:
            if waited >= REPOLL_S:  # the listing has not seen the push yet: look again
                waited = 0.0
                await poller.poll()


async def run_config(harness: Harness, cfg: EvalConfig, cases: list[Case], opts: Options
                     ) -> ConfigResult:
    """Every case under ``cfg`` (until the budget or ``stop`` says no more)."""
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
        servers: list = []
        try:
            assert dep.work is not None and dep.harness is not None
            servers = await start_receivers(ReviewerApp.of(dep.harness),
                                            dep.work.record_work())
            sb.add_hook(servers[0].url, HOOK_SECRET, ping=False)
            dep.work.scheduler.start()  # PR work runs as soon as a delivery records it
            poller = _Poller(dep)
            await poller.poll()  # once: the account's first look (its own login, no PRs yet)
            spent = 0.0
            queue = list(cases)
            slots = asyncio.Semaphore(max(1, opts.concurrency))

            def why_stop() -> str | None:
                if opts.stop is not None and opts.stop.is_set():
                    return "stopped (Ctrl-C)"
                if opts.max_cost_usd is not None and spent >= opts.max_cost_usd:
                    return f"--max-cost-usd share ${opts.max_cost_usd:g} reached (${spent:.4f})"
                return None

            async def one(case: Case) -> None:
                nonlocal spent
                st.advance(1)  # the push is newer than what the last listing saw
                shas = [_push(sb, case, 1)]
                st.open_pull(_repo(case), BRANCH, title=case.title, body=case.body,
                             author=AUTHOR)
                await _settled(dep, poller, case, shas[0])
                if len(case.push) > 1:
                    st.advance(1)
                    shas.append(_push(sb, case, 2))
                    await _settled(dep, poller, case, shas[1])
                run = await _collect(dep, case, shas)
                run.repeat = opts.repeat
                # Nothing more happens to it (no retry of a failed review after its backoff).
                st.close_pull(_repo(case), 1)
                result.runs.append(run)
                spent += run.cost_usd
                opts.on_case(cfg, run, len(result.runs), len(cases), spent)

            async def slot(case: Case) -> None:
                try:
                    await one(case)
                finally:
                    slots.release()

            tasks: list[asyncio.Task[None]] = []
            try:
                while queue:
                    await slots.acquire()
                    reason = why_stop()
                    if reason:
                        slots.release()
                        result.stopped = (f"{reason} after {len(cases) - len(queue)} of "
                                          f"{len(cases)} cases started")
                        opts.progress(f"[{cfg.label}] {result.stopped}; finishing the cases "
                                      "in flight")
                        break
                    tasks.append(asyncio.create_task(slot(queue.pop(0))))
                await asyncio.gather(*tasks)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await stop_receivers(servers)
            await dep.stop()
    order = {c.id: i for i, c in enumerate(cases)}
    result.runs.sort(key=lambda r: order[r.case_id])
    result.wall_s = round(time.monotonic() - started, 3)
    return result
