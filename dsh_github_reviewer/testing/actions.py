"""A GitHub Actions stand-in for the CI mode: runs ``action.yml`` the way a runner would.

Every run gets a fresh, empty runner directory (nothing survives a job but the cache), the
event file and the ``GITHUB_*`` variables Actions sets. The steps of the composite action are
read from ``action.yml`` and their ``${{ }}`` expressions evaluated; ``actions/cache/restore``
and ``actions/cache/save`` go to ``ActionsCache``, which has GitHub's semantics (a relative
``path`` is the workspace's; the cache version is a hash of the path as written, so an absolute
path that differs between runners never matches); ``run:`` steps run in bash with the
evaluated ``env`` and a ``GITHUB_STEP_SUMMARY`` file each; ``if: always()`` is honoured after a
failure.
Steps that set up the runner's Python or install the project are skipped: the test's virtual
environment already has both (its ``bin`` is put first on ``PATH``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
SKIPPED_USES = ("actions/setup-python@",)


@dataclass
class CacheEntry:
    key: str
    directory: Path
    order: int
    version: str = ""


def cache_version(path: str) -> str:
    """What actions/cache hashes: the ``path`` input as written (with the compression method,
    the same here), not the directory it resolves to."""
    return hashlib.sha256(f"{path}|zstd-without-long".encode()).hexdigest()


class ActionsCache:
    """``actions/cache`` semantics: the key is matched exactly first; on a miss each restore key
    is tried in order as a prefix, newest matching entry first. A key is never overwritten."""

    def __init__(self, root: Path):
        self.root = root
        self.entries: dict[str, CacheEntry] = {}
        self._order = 0
        self._lock = threading.Lock()

    def match(self, key: str, restore_keys: list[str], version: str = "") -> CacheEntry | None:
        exact = self.entries.get(key)
        if exact is not None and exact.version == version:
            return exact
        for prefix in restore_keys:
            found = [e for e in self.entries.values()
                     if e.key.startswith(prefix) and e.version == version]
            if found:
                return max(found, key=lambda e: e.order)
        return None

    def restore(self, path: Path, key: str, restore_keys: list[str],
                version: str = "") -> str | None:
        entry = self.match(key, restore_keys, version)
        if entry is None:
            return None
        if path.exists():
            shutil.rmtree(path)
        shutil.copytree(entry.directory, path)
        return entry.key

    def save(self, path: Path, key: str, version: str = "") -> bool:
        """False when the key exists (GitHub skips the save) or the path is missing (GitHub
        then warns: ``PATH_VALIDATION_WARNING``)."""
        with self._lock:
            if key in self.entries or not path.is_dir():
                return False
            self._order += 1
            target = self.root / f"entry-{self._order}"
            shutil.copytree(path, target)
            self.entries[key] = CacheEntry(key, target, self._order, version)
            return True


# What actions/cache/save prints (and annotates the run with) when its path does not exist.
PATH_VALIDATION_WARNING = ("Warning: Path Validation Error: Path(s) specified in the action for "
                           "caching do(es) not exist, hence no cache is being saved.")


def _lookup(context: dict[str, Any], dotted: str) -> Any:
    value: Any = context
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """The subset of Actions expressions action.yml uses: paths, 'literals', ``a && b``,
    ``a || b``, ``x != ''``/``x == 'y'`` and ``always()``."""
    expression = expression.strip()
    if expression == "always()":
        return True
    if " && " in expression:
        value: Any = True
        for part in expression.split(" && "):
            value = evaluate(part, context)
            if value in (None, "", 0, False):
                return value
        return value
    if " || " in expression:
        for part in expression.split(" || "):
            value = evaluate(part, context)
            if value not in (None, "", 0, False):
                return value
        return value
    m = re.fullmatch(r"(.+?)\s*(!=|==)\s*(.+)", expression)
    if m:
        left, right = evaluate(m.group(1), context), evaluate(m.group(3), context)
        return (left != right) if m.group(2) == "!=" else (left == right)
    if expression.startswith("'") and expression.endswith("'"):
        return expression[1:-1]
    return _lookup(context, expression)


def interpolate(text: str, context: dict[str, Any]) -> str:
    def one(m: re.Match[str]) -> str:
        value = evaluate(m.group(1), context)
        return "" if value is None else str(value)
    return _EXPR.sub(one, text)


@dataclass
class StepRun:
    name: str
    outcome: str  # success | failure | skipped
    exit_code: int = 0
    output: str = ""


@dataclass
class RunResult:
    run_id: int
    runner_dir: Path
    restored_key: str | None
    saved_key: str | None
    steps: list[StepRun] = field(default_factory=list)
    summary: str = ""

    @property
    def exit_code(self) -> int:
        return next((s.exit_code for s in self.steps if s.outcome == "failure"), 0)

    @property
    def output(self) -> str:
        return "".join(s.output for s in self.steps)


class ActionsSimulator:
    """Runs a composite ``action.yml`` once per simulated job against one repository."""

    def __init__(self, root: Path, action_dir: Path, repository: str, *, token: str,
                 api_url: str, server_url: str, skip_steps: tuple[str, ...] = (
                     "Install dsh-github-reviewer",)):
        self.root, self.action_dir, self.repository = root, action_dir, repository
        self.token, self.api_url, self.server_url = token, api_url, server_url
        self.skip_steps = skip_steps
        self.action = yaml.safe_load((action_dir / "action.yml").read_text(encoding="utf-8"))
        self.cache = ActionsCache(root / "cache")
        self.cache.root.mkdir(parents=True, exist_ok=True)
        self.next_run_id = 9000

    def _inputs(self, given: dict[str, str], context: dict[str, Any]) -> dict[str, str]:
        out = {}
        for name, spec in (self.action.get("inputs") or {}).items():
            default = str(spec.get("default", "")) if spec else ""
            out[name] = given.get(name, interpolate(default, context))
        unknown = set(given) - set(out)
        if unknown:
            raise ValueError(f"action.yml has no inputs {sorted(unknown)}")
        return out

    def run(self, event_name: str, payload: dict[str, Any], *,
            inputs: dict[str, str] | None = None, env: dict[str, str] | None = None,
            run_attempt: int = 1, run_id: int | None = None, actor: str | None = None,
            runner_root: Path | None = None, timeout_s: float = 300) -> RunResult:
        """One job. ``inputs`` are the action's ``with:``; ``env`` the workflow's ``env:``;
        ``run_id`` of an earlier run with a higher ``run_attempt`` is a re-run of that job;
        ``actor`` is who triggered it (default: the event's sender); ``runner_root`` puts the
        runner's directories elsewhere (another self-hosted runner)."""
        if run_id is None:
            self.next_run_id += 1
            run_id = self.next_run_id
        runner = (runner_root or self.root / "runners") / f"{run_id}-{run_attempt}"
        if runner.exists():
            raise RuntimeError(f"runner directory {runner} already exists")
        temp, workspace = runner / "temp", runner / "workspace"
        temp.mkdir(parents=True)
        workspace.mkdir()
        event_path = runner / "event.json"
        event_path.write_text(json.dumps(payload), encoding="utf-8")
        context: dict[str, Any] = {
            "github": {"repository": self.repository, "run_id": str(run_id),
                       "run_attempt": str(run_attempt), "event_name": event_name,
                       "event": payload, "token": self.token, "api_url": self.api_url,
                       "server_url": self.server_url, "workspace": str(workspace)},
            "runner": {"temp": str(temp), "os": "Linux"}, "steps": {}}
        context["inputs"] = self._inputs(inputs or {}, context)
        base_env = {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            # The test environment's own code (a worktree on PYTHONPATH), not only the install.
            **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
            "HOME": str(runner), "CI": "true", "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_REPOSITORY": self.repository, "GITHUB_RUN_ID": str(run_id),
            "GITHUB_RUN_ATTEMPT": str(run_attempt), "GITHUB_API_URL": self.api_url,
            "GITHUB_SERVER_URL": self.server_url, "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_ACTION_PATH": str(self.action_dir), "RUNNER_TEMP": str(temp),
            "GITHUB_ACTOR": actor if actor is not None
            else str(((payload.get("sender") or {}).get("login")) or ""),
            # The test's own import path (a checkout run without installing it) reaches the
            # steps like its virtual environment does.
            **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
            **(env or {})}
        result = RunResult(run_id, runner, None, None)
        failed = False
        for step in self.action["runs"]["steps"]:
            name = step.get("name") or step.get("uses") or step.get("run", "")[:40]
            condition = str(step.get("if", "")).strip()
            if failed and "always()" not in condition:
                result.steps.append(StepRun(name, "skipped"))
                continue
            if condition and not evaluate(condition, context):
                result.steps.append(StepRun(name, "skipped"))
                continue
            if name in self.skip_steps or str(step.get("uses", "")).startswith(SKIPPED_USES):
                result.steps.append(StepRun(name, "success", output="(provided by the test "
                                                                    "environment)\n"))
                continue
            summary = runner / f"summary-{len(result.steps)}.md"
            summary.touch()
            run = self._step(step, name, context, {**base_env,
                                                   "GITHUB_STEP_SUMMARY": str(summary)},
                             result, timeout_s)
            result.summary += summary.read_text(encoding="utf-8")
            result.steps.append(run)
            failed = failed or run.outcome == "failure"
        return result

    def _step(self, step: dict[str, Any], name: str, context: dict[str, Any],
              base_env: dict[str, str], result: RunResult, timeout_s: float) -> StepRun:
        uses = str(step.get("uses", ""))
        with_ = {k: interpolate(str(v), context) for k, v in (step.get("with") or {}).items()}
        if "path" in with_:
            version = cache_version(with_["path"])
            path = Path(base_env["GITHUB_WORKSPACE"]) / with_["path"]  # absolute stays absolute
        if uses.startswith("actions/cache/restore@"):
            keys = [k.strip() for k in with_.get("restore-keys", "").splitlines() if k.strip()]
            matched = self.cache.restore(path, with_["key"], keys, version)
            result.restored_key = matched
            if step.get("id"):
                context["steps"][step["id"]] = {"outputs": {
                    "cache-hit": str(matched == with_["key"]).lower(),
                    "cache-matched-key": matched or ""}}
            return StepRun(name, "success", output=f"cache restored from key: {matched}\n"
                           if matched else "cache not found\n")
        if uses.startswith("actions/cache/save@"):
            saved = self.cache.save(path, with_["key"], version)
            result.saved_key = with_["key"] if saved else None
            warning = "" if path.is_dir() else PATH_VALIDATION_WARNING + "\n"
            return StepRun(name, "success", output=f"{warning}cache saved: {saved}\n")
        if "run" not in step:
            raise ValueError(f"step {name!r}: the simulator does not know {uses!r}")
        step_env = dict(base_env)
        step_env.update({k: interpolate(str(v), context)
                         for k, v in (step.get("env") or {}).items()})
        outputs = Path(base_env["GITHUB_STEP_SUMMARY"]).with_suffix(".outputs")
        outputs.touch()
        step_env["GITHUB_OUTPUT"] = str(outputs)
        proc = subprocess.run(["bash", "-e", "-c", interpolate(step["run"], context)],
                              env=step_env, cwd=base_env["GITHUB_WORKSPACE"],
                              capture_output=True, text=True, timeout=timeout_s)
        if step.get("id"):
            # ``name=value`` lines a step appends to $GITHUB_OUTPUT become steps.<id>.outputs.
            pairs = (line.partition("=") for line in
                     outputs.read_text(encoding="utf-8").splitlines() if "=" in line)
            context["steps"][step["id"]] = {"outputs": {k: v for k, _, v in pairs}}
        return StepRun(name, "success" if proc.returncode == 0 else "failure",
                       proc.returncode, proc.stdout + proc.stderr)


# -- event payloads, as GitHub writes them to GITHUB_EVENT_PATH ---------------------------------

def pull_request_event(sb: Any, repository: str, number: int,
                       action: str = "synchronize") -> dict[str, Any]:
    pr = sb.state.pull(repository, number)
    return {"action": action, "number": number, "pull_request": sb.payloads.pull(pr, True),
            "repository": sb.payloads.repo(sb.state.repo(repository)),
            "sender": sb.payloads.user(pr.user)}


def issue_comment_event(sb: Any, repository: str, number: int, comment: Any) -> dict[str, Any]:
    pr = sb.state.pull(repository, number)
    pull = sb.payloads.pull(pr, False)
    issue = {k: pull[k] for k in ("url", "html_url", "number", "state", "title", "user", "body",
                                  "labels", "created_at", "updated_at", "author_association")}
    issue["pull_request"] = {"url": pull["url"], "html_url": pull["html_url"],
                             "diff_url": pull["diff_url"], "patch_url": pull["patch_url"]}
    return {"action": "created", "issue": issue, "comment": sb.payloads.issue_comment(comment),
            "repository": sb.payloads.repo(sb.state.repo(repository)),
            "sender": sb.payloads.user(comment.user)}
