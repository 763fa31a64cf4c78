"""Mutation testing of named modules with mutmut; prints module | mutants | score | survivors.

Each module runs on its own, in a scratch copy of the project under ``.mutation/<module>/`` (so
the working tree is never touched and each module gets its own ``[tool.mutmut]`` settings),
with only the fast unit tests that cover it: mutmut maps every test to the functions it runs
and re-runs, per mutant, only the tests that reach the mutated function.

Not part of CI: a module takes minutes. Run through ``scripts/mutation``, which adds ``nice``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dsh_github_reviewer", "dsh_harness")
# Fast unit tests per module (no sandbox servers, no browser, no subprocess kill loops). A
# module not listed here needs --tests.
COVERING_TESTS: dict[str, list[str]] = {
    "dsh_github_reviewer/github/guard_rules.py": [
        "tests/reviewer/github/test_guard_rules.py"],
    "dsh_github_reviewer/core/sanitizer.py": [
        "tests/reviewer/core/test_text_rules.py", "tests/reviewer/core/test_sanitizer.py"],
    "dsh_github_reviewer/core/commands.py": [
        "tests/reviewer/core/test_text_rules.py", "tests/reviewer/core/test_commands.py"],
    "dsh_github_reviewer/work/records.py": [
        "tests/reviewer/work/test_records.py", "tests/reviewer/work/test_store.py",
        "tests/reviewer/work/test_attempts.py"],
    "dsh_github_reviewer/work/inbox.py": [
        "tests/reviewer/work/test_inbox.py"],
    # The replica tests run on in-process leases here ([local]): their [postgres] twins need a
    # database server per mutant run, and the three that take seconds (they wait for slot
    # retries) would make every mutant of the dispatch loop cost as much.
    "dsh_github_reviewer/work/scheduler.py": [
        "tests/reviewer/work/test_scheduler.py", "tests/reviewer/work/test_leases.py",
        *(f"tests/reviewer/work/test_replicas.py::{name}[local]" for name in (
            "test_each_replica_adds_its_own_process_cap",
            "test_a_replica_without_a_free_turn_leaves_the_prs_to_others",
            "test_a_replica_with_a_free_turn_takes_prs_another_replica_let_go",
            "test_an_idle_replica_takes_let_go_prs_at_its_next_scan"))],
    "dsh_github_reviewer/reviewers/team/verdict.py": [
        "tests/reviewer/reviewers/test_team.py"],
    "dsh_github_reviewer/turn/diff_prep.py": [
        "tests/reviewer/turn/test_diff_prep.py"],
    "dsh_github_reviewer/sources/webhook/signature.py": [
        "tests/reviewer/sources/test_webhook_receiver.py"],
    "dsh_harness/storage/json_backend.py": [
        "tests/harness/storage/test_storage_contract.py",
        "tests/harness/storage/test_storage_backends.py"],
    "dsh_harness/storage/sqlite_backend.py": [
        "tests/harness/storage/test_storage_contract.py",
        "tests/harness/storage/test_storage_backends.py"],
}
# mutmut's exit-code classes (mutmut.stats.status_by_exit_code), folded into three.
DETECTED = {"killed", "timeout", "caught by type check", "segfault"}
UNCOUNTED = {"skipped"}  # "# pragma: no mutate" lines: shown beside the count, not scored


@dataclass
class Result:
    module: str
    total: int = 0
    detected: int = 0
    skipped: int = 0
    survivors: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return 100.0 * self.detected / self.total if self.total else 0.0


def resolve(module: str) -> str:
    """``core/sanitizer.py``, ``github/guard_rules.py`` or a path from the project root."""
    candidates = [module, *(f"{pkg}/{module}" for pkg in PACKAGES)]
    found = [c for c in candidates if (ROOT / c).is_file() and c.endswith(".py")]
    if len(found) != 1:
        where = "matches " + ", ".join(found) if found else "is not a .py file of the project"
        raise SystemExit(f"scripts/mutation: module {module!r} {where}")
    return found[0]


def prepare(workdir: Path, module: str, tests: list[str]) -> None:
    """A scratch copy of the project whose pyproject.toml tells mutmut what to do."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in (*PACKAGES, "tests"):
        shutil.copytree(ROOT / name, workdir / name, ignore=skip)
    for name in ("plugin.toml", "dsh.example.toml"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, workdir / name)
    settings = {
        "source_paths": list(PACKAGES),
        "only_mutate": [module],
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-q"],
        "pytest_add_cli_args_test_selection": tests,
        "use_git_change_detection": False,
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    if "[tool.mutmut]" in text:
        raise SystemExit("scripts/mutation: pyproject.toml has its own [tool.mutmut]; this script "
                         "writes one per module, so remove it")
    (workdir / "pyproject.toml").write_text(text + "\n".join(lines) + "\n", encoding="utf-8")


def statuses() -> dict[int | None, str]:
    from mutmut.stats import status_by_exit_code
    return status_by_exit_code  # type: ignore[return-value]


def collect(workdir: Path, module: str) -> Result:
    meta = workdir / "mutants" / f"{module}.meta"
    if not meta.exists():
        raise SystemExit(f"scripts/mutation: mutmut wrote no results for {module} "
                         f"(see {workdir / 'mutmut.log'})")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    by_code = statuses()
    result = Result(module)
    for name, code in sorted(codes.items()):
        status = by_code[code]
        if status in UNCOUNTED:
            result.skipped += 1
            continue
        result.total += 1
        if status in DETECTED:
            result.detected += 1
        elif status in ("survived", "no tests"):
            result.survivors.append(name)
        else:  # suspicious, not checked, interrupted: not a kill either
            result.survivors.append(f"{name} ({status})")
    return result


def run_module(module: str, tests: list[str], max_children: int, show: bool) -> Result:
    missing = [t for t in tests if not (ROOT / t.split("::")[0]).exists()]
    if missing:
        raise SystemExit(f"scripts/mutation: test files not found: {', '.join(missing)}")
    workdir = ROOT / ".mutation" / module.replace("/", "__").removesuffix(".py")
    prepare(workdir, module, tests)
    mutmut = Path(sys.executable).with_name("mutmut")
    log = workdir / "mutmut.log"
    print(f"== {module}: mutmut with {' '.join(tests)} (log: {log.relative_to(ROOT)})",
          flush=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with log.open("w") as out:
        proc = subprocess.run([str(mutmut), "run", "--max-children", str(max_children)],
                              cwd=workdir, stdout=out, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"scripts/mutation: mutmut failed on {module} "
                         f"(exit {proc.returncode}):\n{tail}")
    result = collect(workdir, module)
    if show:
        for name in result.survivors:
            diff = subprocess.run([str(mutmut), "show", name.split(" ")[0]], cwd=workdir,
                                  capture_output=True, text=True, env=env)
            changed = [line for line in diff.stdout.splitlines()
                       if line[:1] in "-+" and line[:3] not in ("---", "+++")]
            print(f"-- {short(name)}\n" + "\n".join(changed))
    return result


def short(name: str) -> str:
    """mutmut's ``pkg.mod.xǁClsǁmeth__mutmut_3`` -> ``Cls.meth#3``, ``x_func__mutmut_3`` ->
    ``func#3`` (the full name is in ``.mutation/<module>/mutants/``; ``--show`` prints diffs)."""
    func, _, number = name.partition(" ")[0].rpartition("__mutmut_")
    func = func.rsplit(".", 1)[-1]
    func = func[2:].replace("ǁ", ".") if func.startswith("xǁ") else func.removeprefix("x_")
    return f"{func}#{number}{name.partition(' ')[2] and ' ' + name.partition(' ')[2]}"


def table(results: list[Result]) -> str:
    rows = ["| module | mutants | score | survivors |", "|---|---|---|---|"]
    for r in results:
        names = ", ".join(short(n) for n in r.survivors)
        skipped = f" (+{r.skipped} skipped)" if r.skipped else ""
        rows.append(f"| `{r.module}` | {r.total}{skipped} | {r.score:.1f} % | {len(r.survivors)}"
                    f"{': ' + names if names else ''} |")
    return "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scripts/mutation", description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="+", metavar="MODULE",
                        help="e.g. core/sanitizer.py, github/guard_rules.py, "
                             "storage/json_backend.py")
    parser.add_argument("--tests", nargs="+", metavar="PATH",
                        help="the tests to use instead of the module's default unit tests")
    parser.add_argument("--max-children", type=int, default=2,
                        help="parallel mutant runs (default 2)")
    parser.add_argument("--show", action="store_true", help="print each survivor's diff")
    parser.add_argument("--fail-under", type=float, default=None, metavar="PCT",
                        help="exit 1 when a module scores below PCT")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    results = []
    for name in args.modules:
        module = resolve(name)
        tests = args.tests or COVERING_TESTS.get(module)
        if not tests:
            raise SystemExit(f"scripts/mutation: no default tests for {module}; pass --tests")
        results.append(run_module(module, tests, args.max_children, args.show))
    print(table(results))
    if args.fail_under is not None and any(r.score < args.fail_under for r in results):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
