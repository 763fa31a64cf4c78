"""``dsh github-reviewer eval``: check the cases, estimate, confirm, run, report."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fnmatch
import json
import os
import re
import signal
import socket
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dsh_harness import DeploymentConfig, Harness

from ..config import TeamSettings
from ..core.clock import utcnow
from ..reviewers.team.personas import BUILT_IN
from .cases import Case, CaseError, load_cases, load_cases_leniently
from .report import build_report, html_page, judge_notes, markdown
from .run import ConfigResult, EvalConfig, EvalError, Options, check_model, run_config
from .score import CaseRun
from .validate import check_cases, corpus_stats

# Rough shape of one review turn, for the estimate only: the system prompt and tool schemas, and
# the model calls a small PR takes (read, create, comments, submit), most of them cache hits.
SYSTEM_TOKENS = 6_000
CALLS_PER_REVIEW = 5
OUTPUT_PER_REVIEW = 800


def verify_values(text: str) -> list[str]:
    """``--verify off,on``: the second look's settings to run, in order (each once)."""
    out: list[str] = []
    for word in (w.strip().lower() for w in text.split(",")):
        if word not in ("off", "on"):
            raise EvalError(f"--verify takes off, on or off,on, not {word!r}")
        if word not in out:
            out.append(word)
    return out


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


def matching(cases: list[Case], only: list[str]) -> list[Case]:
    if not only:
        return cases
    return [c for c in cases if any(fnmatch.fnmatchcase(c.id, g) for g in only)]


def select(cases: list[Case], only: list[str], limit: int | None) -> list[Case]:
    """The cases ``--only`` keeps; with ``--limit N``, a sample stratified like the whole: the
    clean share kept (rounded, at least one of each kind when both exist and N > 1), and each
    kind taken in turn from each language; returned in the corpus order."""
    cases = matching(cases, only)
    if limit is None or limit >= len(cases):
        return cases
    limit = max(0, limit)
    clean = [c for c in cases if c.clean]
    dirty = [c for c in cases if not c.clean]
    n_clean = round(limit * len(clean) / len(cases)) if cases else 0
    if limit > 1 and clean and dirty:
        n_clean = min(max(n_clean, 1), limit - 1)
    n_clean = min(n_clean, len(clean))
    n_dirty = min(limit - n_clean, len(dirty))
    n_clean = min(limit - n_dirty, len(clean))
    picked = _by_language(cases, n_clean, n_dirty)
    order = {c.id: i for i, c in enumerate(cases)}
    return sorted(picked, key=lambda c: order[c.id])


def _by_language(cases: list[Case], n_clean: int, n_dirty: int) -> list[Case]:
    """Cases taken in turn from each language (in name order), each turn of the kind (clean or
    not) with more still to take, until ``n_clean`` clean and ``n_dirty`` other ones."""
    lanes: dict[str, dict[bool, list[Case]]] = {}
    for c in cases:
        lanes.setdefault(c.language, {True: [], False: []})[c.clean].append(c)
    left = {True: n_clean, False: n_dirty}
    picked: list[Case] = []
    covered: set[str] = set()
    while left[True] + left[False] > 0:
        took = False
        for lang in sorted(lanes):
            if left[True] + left[False] == 0:
                break
            have = [k for k in (False, True) if lanes[lang][k]]
            kinds = sorted((k for k in have if left[k] > 0), key=lambda k: -left[k])
            if kinds:
                kind = kinds[0]
            elif have and lang not in covered and (
                    left[not have[0]] > 1 or any(c.clean is not have[0] for c in picked)):
                # Every language once before the shares: this one has only the kind whose
                # share is used up, so it takes one place of the other kind — never the last
                # place of a kind not yet picked (at least one of each kind).
                kind = have[0]
                left[not kind] -= 1
                left[kind] += 1
            else:
                continue
            picked.append(lanes[lang][kind].pop(0))
            left[kind] -= 1
            covered.add(lang)
            took = True
        if not took:
            break
    return picked


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


def _read(path: Path, option: str = "--instructions") -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:  # said with the option, not as a bare "[Errno 2] ..."
        raise EvalError(f"{option} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise EvalError(f"{option} {path}: not UTF-8 text") from None


def _confirm(lines: list[str], yes: bool) -> bool:
    for line in lines:
        print(line, file=sys.stderr)
    if yes:
        return True
    if not sys.stdin.isatty():
        print("dsh: eval: not started; pass --yes to run without a terminal to confirm",
              file=sys.stderr)
        return False
    return input("Start? [y/N] ").strip().lower() in ("y", "yes")


HEARTBEAT_S = 15.0


class Running:
    """``<home>/eval/running.json`` while a run is under way: the web UI's eval page shows it.
    It names this process (host, pid) and is rewritten at least every ``HEARTBEAT_S``, so a
    run that was killed (no chance to remove it) is recognised as gone, not "running"."""

    def __init__(self, home: Path | None, started: datetime, labels: list[str], cases: int,
                 repeats: int = 1):
        self.path = home / "eval" / "running.json" if home is not None else None
        self.state: dict[str, Any] = {
            "started_at": started.isoformat(timespec="seconds"), "configs": labels,
            "cases": cases, "repeats": repeats, "config": None, "done": 0, "spent_usd": 0.0,
            "done_all": 0, "total": cases * len(labels) * repeats,
            "pid": os.getpid(), "host": socket.gethostname(), "heartbeat_s": HEARTBEAT_S}
        self._beat: asyncio.Task[None] | None = None

    def update(self, cfg: EvalConfig | None = None, done: int | None = None,
               spent: float | None = None, done_all: int | None = None) -> None:
        """``done``: cases ended of the current configuration (of ``cases``); ``done_all``:
        case runs ended in all (of ``total``: cases × configurations × repeats)."""
        if cfg is not None:
            self.state["config"] = cfg.label
        if done is not None:
            self.state["done"] = done
        if done_all is not None:
            self.state["done_all"] = done_all
        if spent is not None:
            self.state["spent_usd"] = round(spent, 6)
        self.write()

    def write(self) -> None:
        if self.path is None:
            return
        self.state["updated_at"] = utcnow().isoformat(timespec="seconds")
        _home_dir(self.path.parent)
        tmp = self.path.with_suffix(".tmp")
        _owner_only(tmp, json.dumps(self.state))
        tmp.replace(self.path)

    def start_heartbeat(self) -> None:
        async def beat() -> None:
            while True:
                await asyncio.sleep(HEARTBEAT_S)
                try:
                    self.write()
                except OSError:  # a full disk: the page may call it stale; the run goes on
                    pass
        if self.path is not None:
            self._beat = asyncio.create_task(beat(), name="eval-heartbeat")

    def done(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
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


def _out_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EvalError(f"--out {out}: {exc.strerror or exc}") from None


def _write(report: dict[str, Any], out: Path | None, home: Path | None) -> list[Path]:
    written = []
    stamp = report["started_at"].replace(":", "").replace("+0000", "Z")
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if home is not None:  # what the web UI's eval page shows
        d = home / "eval"
        _home_dir(d)
        _owner_only(d / f"report-{stamp}.json", text)
        tmp = d / "latest.json.tmp"
        _owner_only(tmp, text)
        tmp.replace(d / "latest.json")
        written.append(d / "latest.json")
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / "report.json").write_text(text, encoding="utf-8")
            (out / "report.md").write_text(markdown(report), encoding="utf-8")
            (out / "report.html").write_text(html_page(report), encoding="utf-8")
        except OSError as exc:  # the report is still in the home and printed below
            print(f"dsh: eval: --out {out}: {exc.strerror or exc}; the report is in the home "
                  "and printed", file=sys.stderr)
        else:
            written.append(out / "report.html")
    return written


def _check(args: argparse.Namespace) -> int:
    """``--check-cases``: every problem of every case (unreadable ones too), exit 1 if any."""
    try:
        cases, unreadable = load_cases_leniently(Path(args.cases) if args.cases else None)
    except CaseError as exc:
        print(f"dsh: eval: {exc}", file=sys.stderr)
        return 2
    if args.only:
        unreadable = {k: v for k, v in unreadable.items()
                      if any(fnmatch.fnmatchcase(k, g) for g in args.only)}
    cases = select(cases, args.only, args.limit)
    if not cases and not unreadable:
        print(f"dsh: eval: no case matches --only {' '.join(args.only)}", file=sys.stderr)
        return 2
    problems = [f"{k}: cannot be read: {v}" for k, v in sorted(unreadable.items())]
    problems += check_cases(cases)
    for p in problems:
        print(p)
    stats = corpus_stats(cases)
    bad = set(unreadable) | {p.split(":")[0] for p in check_cases(cases)}
    total = len(cases) + len(unreadable)
    print(json.dumps(stats, indent=2) if args.json else
          f"{total - len(bad)} of {total} cases valid; {stats['clean']} clean, "
          f"{stats['re_review']} with a second push, {stats['defects']} defects; "
          f"languages {stats['languages']}")
    return 1 if problems else 0


def _eta(elapsed: float, done: int, total: int) -> str:
    if not done or done >= total:
        return ""
    left = elapsed / done * (total - done)
    return f", ~{int(left // 60)}m{int(left % 60):02d}s left"


async def cmd_eval(harness: Harness, args: argparse.Namespace) -> int:
    command = getattr(args, "eval_command", None)
    if command == "mine":
        from .mine import cmd_mine

        return await asyncio.to_thread(cmd_mine, args)
    if command == "import-swe-prbench":
        from .swe_prbench import cmd_import

        return await asyncio.to_thread(cmd_import, args)
    if args.check_cases:
        return _check(args)
    try:
        cases = select(load_cases(Path(args.cases) if args.cases else None), args.only,
                       args.limit)
    except CaseError as exc:
        print(f"dsh: eval: {exc} (--check-cases lists every problem)", file=sys.stderr)
        return 2
    problems = check_cases(cases)
    if problems:
        print("dsh: eval: invalid cases (see --check-cases):\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 2
    if not cases:
        print("dsh: eval: no case matches --only/--limit", file=sys.stderr)
        return 2
    repeats = max(1, args.repeat)
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
        if getattr(args, "verify", None):
            configs = [replace(c, extra=(*c.extra, ("verify", v))) for c in configs
                       for v in verify_values(args.verify)]
        if args.out:  # before anything is spent: a report that cannot be written is lost
            _out_dir(Path(args.out))
        for option, m in [*(("--model", m) for m in models),
                          *([("--judge", args.judge)] if args.judge else [])]:
            check_model(harness.config, m, option)
            problem = harness.llm.problem(m)
            if problem:
                raise EvalError(f"{option} {m}: {problem}")
    except (EvalError, OSError, UnicodeDecodeError) as exc:
        print(f"dsh: eval: {exc}", file=sys.stderr)
        return 2
    estimates = [estimate(harness, cases, c) for c in configs]
    lines = [f"eval: {len(cases)} cases × {len(configs)} configuration(s)"
             + (f" × {repeats} runs" if repeats > 1 else "")]
    lines += [f"  {e['config']}: {e['reviews'] * repeats} reviews, "
              f"~{e['prompt_tokens'] * repeats:,} prompt + "
              f"{e['output_tokens'] * repeats:,} output tokens, ~"
              + f"${e['usd'] * repeats:.4f}"
              for e in estimates]
    share = None
    if args.max_cost_usd is not None:
        # Each configuration gets the same budget, so a cap leaves them comparable (the first
        # cannot spend what the second needed).
        share = args.max_cost_usd / len(configs)
        lines.append(f"  --max-cost-usd {args.max_cost_usd:g}: ${share:.4f} per configuration")
    if not _confirm(lines, args.yes):
        return 1
    home = harness.home if harness.loaded.found else None
    started = utcnow()
    running = Running(home, started, [c.label for c in configs], len(cases), repeats)
    stop = asyncio.Event()
    total = len(cases) * len(configs) * repeats
    clock = time.monotonic()
    done = 0
    spent_by: dict[str, float] = {c.label: 0.0 for c in configs}

    def on_case(cfg: EvalConfig, run: CaseRun, n: int, of: int, spent: float) -> None:
        nonlocal done
        done += 1
        running.update(cfg, n, spent=sum(spent_by.values()) + spent, done_all=done)
        state = ("failed: " + run.error[:80]) if run.error else f"{len(run.findings)} findings"
        print(f"[{cfg.label}] {n}/{of} cases, {run.case_id}: {state}; {done}/{total} in all, "
              f"${sum(spent_by.values()) + spent:.4f} spent"
              + _eta(time.monotonic() - clock, done, total), file=sys.stderr, flush=True)

    loop = asyncio.get_running_loop()

    def interrupted() -> None:
        if not stop.is_set():
            print("eval: stopping after the cases in flight (Ctrl-C again to abort)",
                  file=sys.stderr, flush=True)
            stop.set()
            # A second Ctrl-C is the default one: it aborts.
            loop.remove_signal_handler(signal.SIGINT)

    try:
        loop.add_signal_handler(signal.SIGINT, interrupted)
    except (NotImplementedError, RuntimeError):  # not the main thread (tests)
        pass
    results: dict[str, ConfigResult] = {}
    judge = None
    running.update()
    running.start_heartbeat()
    try:
        for rep in range(1, repeats + 1):
            for cfg in configs:
                if stop.is_set():
                    break
                left = None if share is None else max(0.0, share - spent_by[cfg.label])
                opts = Options(concurrency=max(1, args.concurrency), instructions=instructions,
                               max_cost_usd=left, stop=stop, repeat=rep,
                               progress=lambda line: print(line, file=sys.stderr, flush=True),
                               on_case=on_case)
                running.update(cfg, 0)
                res = await run_config(harness, cfg, cases, opts)
                spent_by[cfg.label] += sum(r.cost_usd for r in res.runs)
                merged = results.setdefault(cfg.label, ConfigResult(cfg))
                merged.runs += res.runs
                merged.wall_s = round(merged.wall_s + res.wall_s, 3)
                if res.stopped and not stop.is_set():
                    merged.stopped = (f"run {rep}: {res.stopped}" if repeats > 1
                                      else res.stopped)
        # Judged while Ctrl-C still stops gracefully: an interrupt here keeps the reviews
        # already paid for (a report without the judge's columns), it does not lose them.
        if args.judge and not stop.is_set():
            judge = await _judged(harness.config, args.judge, cases, results, stop)
    except EvalError as exc:
        print(f"dsh: eval: {exc}", file=sys.stderr)
        return 2
    finally:
        running.done()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    # Only the cases that ran (a stopped run is partial).
    ran = {r.case_id for res in results.values() for r in res.runs}
    report = build_report([c for c in cases if c.id in ran], list(results.values()),
                          started_at=started, estimate={e["config"]: e for e in estimates},
                          judge=judge,
                          stopped=("Ctrl-C" if stop.is_set() else None))
    for note in judge_notes(report):
        print(f"eval: {note}", file=sys.stderr)
    for path in _write(report, Path(args.out) if args.out else None, home):
        print(f"eval: wrote {path}", file=sys.stderr)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else markdown(report))
    if stop.is_set():
        print("eval: stopped by Ctrl-C; the report is partial", file=sys.stderr)
        return 130
    if any(r.stopped for r in results.values()):
        print("eval: the cost cap stopped a configuration; the report is partial",
              file=sys.stderr)
        return 1
    return 0


async def _judged(base: DeploymentConfig, ref: str, cases: list[Case],
                  results: dict[str, ConfigResult], stop: asyncio.Event
                  ) -> dict[str, dict[str, Any]] | None:
    """The judge's verdicts, or None when Ctrl-C (``stop``) comes first."""
    from .judge import judge_results

    print(f"eval: asking the judge {ref} (Ctrl-C skips it)", file=sys.stderr, flush=True)
    task = asyncio.ensure_future(judge_results(base, ref, cases, list(results.values())))
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return None if task.cancelled() else task.result()
