"""``dsh github-reviewer eval``: check the cases, estimate, confirm, run, report."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dsh_harness import Harness

from ..config import TeamSettings
from ..core.clock import utcnow
from ..reviewers.team.personas import BUILT_IN
from .cases import Case, CaseError, load_cases
from .report import build_report, html_page, markdown
from .run import EvalConfig, EvalError, Options, check_model, run_config
from .validate import check_cases, corpus_stats

# Rough shape of one review turn, for the estimate only: the system prompt and tool schemas, and
# the model calls a small PR takes (read, create, comments, submit), most of them cache hits.
SYSTEM_TOKENS = 6_000
CALLS_PER_REVIEW = 5
OUTPUT_PER_REVIEW = 800


def check_team(team: tuple[str, ...], instructions: str) -> None:
    """The personas a --team names exist: built in, or a section of --instructions."""
    if not team:
        raise EvalError("--team: name at least one persona, e.g. quality,security")
    try:
        TeamSettings(personas=list(team))
    except ValidationError as exc:
        raise EvalError("--team: " + "; ".join(e["msg"] for e in exc.errors())) from None
    for name in team:
        section = re.compile(rf"^##\s*Persona:\s*{re.escape(name)}\s*$", re.I | re.M)
        if name not in BUILT_IN and not section.search(instructions):
            raise EvalError(f"--team: persona {name!r} is not built in ({', '.join(BUILT_IN)}) "
                            f"and --instructions has no '## Persona: {name}' section")


def select(cases: list[Case], only: list[str], limit: int | None) -> list[Case]:
    """The cases ``--only`` keeps; with ``--limit N``, N of them taken in turn from each
    language (so a quick sample is not all of one language), in the corpus order."""
    if only:
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c.id, g) for g in only)]
    if limit is None:
        return cases
    by_language: dict[str, list[Case]] = {}
    for c in cases:
        by_language.setdefault(c.language, []).append(c)
    picked: list[Case] = []
    queues = [list(q) for q in by_language.values()]
    while len(picked) < limit and any(queues):
        for q in queues:
            if q and len(picked) < limit:
                picked.append(q.pop(0))
    order = {c.id: i for i, c in enumerate(cases)}
    return sorted(picked, key=lambda c: order[c.id])


def estimate(harness: Harness, cases: list[Case], cfg: EvalConfig) -> dict[str, Any]:
    """Tokens and USD from the corpus size (the changed files' text, per review)."""
    prompt = 0
    reviews = 0
    for c in cases:
        for n in range(1, len(c.push) + 1):
            head, base_tree = c.tree(n), c.tree(0)
            changed = sum(len(t) for p, t in head.items() if base_tree.get(p) != t)
            prompt += CALLS_PER_REVIEW * (SYSTEM_TOKENS + 2 * changed // 4)
            reviews += 1
    factor = len(cfg.team) + 1 if cfg.team else 1  # each persona and the coordinator
    prompt, output = prompt * factor, reviews * OUTPUT_PER_REVIEW * factor
    provider, _, model = cfg.model.partition("/")
    spec = harness.llm.spec(provider, model)  # the prices the run will be charged at
    cached = prompt * (CALLS_PER_REVIEW - 1) // CALLS_PER_REVIEW
    usd = round(((prompt - cached) * spec.input + cached * spec.cache_read
                 + output * spec.output) / 1e6, 4)
    return {"config": cfg.label, "reviews": reviews, "prompt_tokens": prompt,
            "output_tokens": output, "usd": usd}


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _confirm(lines: list[str], yes: bool) -> bool:
    for line in lines:
        print(line, file=sys.stderr)
    if yes:
        return True
    if not sys.stdin.isatty():
        print("eval: not started; pass --yes to run without a terminal to confirm",
              file=sys.stderr)
        return False
    return input("Start? [y/N] ").strip().lower() in ("y", "yes")


class Running:
    """``<home>/eval/running.json`` while a run is under way: the web UI's eval page shows it."""

    def __init__(self, home: Path | None, started: datetime, labels: list[str], cases: int):
        self.path = home / "eval" / "running.json" if home is not None else None
        self.state: dict[str, Any] = {
            "started_at": started.isoformat(timespec="seconds"), "configs": labels,
            "cases": cases, "config": None, "done": 0, "spent_usd": 0.0}

    def update(self, cfg: EvalConfig, done: int, total: int, spent: float) -> None:
        if self.path is None:
            return
        self.state.update(config=cfg.label, done=done, spent_usd=round(spent, 6),
                          updated_at=utcnow().isoformat(timespec="seconds"))
        _home_dir(self.path.parent)
        tmp = self.path.with_suffix(".tmp")
        _owner_only(tmp, json.dumps(self.state))
        tmp.replace(self.path)

    def done(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def _home_dir(d: Path) -> None:
    """``<home>/eval``, owner-only like everything else dsh writes in a home (0700)."""
    d.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    d.mkdir(exist_ok=True, mode=0o700)


def _owner_only(path: Path, text: str) -> None:
    """Write ``text`` to a 0600 file, whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _write(report: dict[str, Any], out: Path | None, home: Path | None) -> list[Path]:
    written = []
    stamp = report["started_at"].replace(":", "").replace("+0000", "Z")
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(text, encoding="utf-8")
        (out / "report.md").write_text(markdown(report), encoding="utf-8")
        (out / "report.html").write_text(html_page(report), encoding="utf-8")
        written.append(out / "report.html")
    if home is not None:  # what the web UI's eval page shows
        d = home / "eval"
        _home_dir(d)
        _owner_only(d / f"report-{stamp}.json", text)
        tmp = d / "latest.json.tmp"
        _owner_only(tmp, text)
        tmp.replace(d / "latest.json")
        written.append(d / "latest.json")
    return written


async def cmd_eval(harness: Harness, args: argparse.Namespace) -> int:
    try:
        cases = select(load_cases(Path(args.cases) if args.cases else None), args.only,
                       args.limit)
    except CaseError as exc:
        print(f"eval: {exc}", file=sys.stderr)
        return 2
    problems = check_cases(cases)
    if args.check_cases:
        for p in problems:
            print(p)
        stats = corpus_stats(cases)
        print(json.dumps(stats, indent=2) if args.json else
              f"{len(cases) - len({p.split(':')[0] for p in problems})} of {len(cases)} cases "
              f"valid; {stats['clean']} clean, {stats['re_review']} with a second push, "
              f"{stats['defects']} defects; languages {stats['languages']}")
        return 1 if problems else 0
    if problems:
        print("eval: invalid cases (see --check-cases):\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 2
    if not cases:
        print("eval: no case matches --only/--limit", file=sys.stderr)
        return 2
    models = args.model or [harness.config.default_model]
    configs = [EvalConfig(m) for m in models]
    instructions = ""
    try:
        if args.instructions:
            instructions = _read(Path(args.instructions))
        if args.team is not None:
            team = tuple(p.strip().lower() for p in args.team.split(",") if p.strip())
            check_team(team, instructions)
            configs += [EvalConfig(m, team) for m in models]
        for m in [*models, *([args.judge] if args.judge else [])]:
            check_model(harness.config, m)
            problem = harness.llm.problem(m)
            if problem:
                raise EvalError(f"--model {m}: {problem}")
    except (EvalError, OSError, UnicodeDecodeError) as exc:
        print(f"eval: {exc}", file=sys.stderr)
        return 2
    estimates = [estimate(harness, cases, c) for c in configs]
    lines = [f"eval: {len(cases)} cases × {len(configs)} configuration(s)"]
    lines += [f"  {e['config']}: {e['reviews']} reviews, ~{e['prompt_tokens']:,} prompt + "
              f"{e['output_tokens']:,} output tokens, ~"
              + f"${e['usd']:.4f}"
              for e in estimates]
    if not _confirm(lines, args.yes):
        return 1
    home = harness.home if harness.loaded.found else None
    started = utcnow()
    running = Running(home, started, [c.label for c in configs], len(cases))
    opts = Options(concurrency=max(1, args.concurrency), instructions=instructions,
                   max_cost_usd=args.max_cost_usd,
                   progress=lambda line: print(line, file=sys.stderr, flush=True),
                   on_batch=running.update)
    results = []
    spent = 0.0
    try:
        for cfg in configs:
            running.update(cfg, 0, len(cases), spent)
            res = await run_config(harness, cfg, cases, opts, spent)
            spent += sum(r.cost_usd for r in res.runs)
            results.append(res)
    except EvalError as exc:
        print(f"eval: {exc}", file=sys.stderr)
        return 2
    finally:
        running.done()
    judge = None
    if args.judge:
        from .judge import judge_results

        judge = await judge_results(harness.config, args.judge, cases, results)
    report = build_report(cases, results, started_at=started,
                          estimate={e["config"]: e for e in estimates}, judge=judge)
    for path in _write(report, Path(args.out) if args.out else None, home):
        print(f"eval: wrote {path}", file=sys.stderr)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else markdown(report))
    return 0
