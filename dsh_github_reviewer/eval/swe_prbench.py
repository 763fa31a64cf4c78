"""``eval import-swe-prbench``: SWE-PRBench's diff-only contexts as eval cases.

SWE-PRBench (350 real pull requests, issues flagged by their human reviewers as ground truth)
publishes its dataset separately (CC BY 4.0; not shipped here). Its documented layout::

    <root>/prs.jsonl                           one PR record per line
    <root>/contexts/config_A/<task_id>.json    the diff-only context of each PR
    <root>/annotations/<task_id>_human.json    the human reviewers' comments

The field names inside those files are not documented where this was written, so these are
**assumed** (and several spellings accepted); a record without a usable diff or comment is
skipped with the reason printed, never guessed at:

* PR record: ``task_id`` (or ``instance_id``, ``id``), ``repo``, ``pr_number`` (or ``number``),
  ``title``, ``body`` (or ``description``);
* context: the unified diff under ``diff`` (or ``diff_patch``, ``patch``, ``unified_diff``), or
  ``files``: a list of ``{path|filename, patch|diff}``;
* annotation: a list, or an object holding it under ``comments`` (or ``human_comments``,
  ``issues``); each with ``path`` (or ``file``, ``file_path``, ``filename``), ``line`` (or
  ``end_line``, ``line_number``, ``new_line``; new-side numbers), optional ``start_line``,
  ``body`` (or ``comment``, ``text``, ``description``), optional ``category``/``severity``
  (kept when they are this corpus's names).

Diff-only means no whole files: each file's base and head are rebuilt from the hunks, every line
outside them left blank so the line numbers are the real ones (the unchanged stretches between
hunks are the same length on both sides, so the diff the reviewer sees is the hunks, nothing
more). A comment becomes a defect where it was made; one on lines the PR did not add (a context
line) cannot be a defect here and is skipped, as are files in a second programming language.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .case_toml import dumps_case
from .cases import CATEGORIES, SEVERITIES, Case
from .validate import COMPANIONS as DATA_LANGUAGES
from .validate import EXTENSIONS, check_case, hunks

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class SwePrBenchError(ValueError):
    pass


def _first(d: dict[str, Any], *keys: str) -> Any:
    return next((d[k] for k in keys if k in d and d[k] not in (None, "")), None)


def _language(path: str) -> str | None:
    suffix = Path(path).suffix
    return next((lang for lang, exts in EXTENSIONS.items() if suffix in exts), None)


def split_diff(diff: str) -> dict[str, str]:
    """path (new side) -> its part of a unified diff (``diff --git`` or ``---/+++`` headers)."""
    out: dict[str, list[str]] = {}
    path = None
    old = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            old = line[4:].removeprefix("a/")
            continue
        if line.startswith("+++ "):
            new = line[4:].removeprefix("b/")
            path = old if new == "/dev/null" else new
            out.setdefault(path, [])
            continue
        if path is not None and (line.startswith(("@@", "+", "-", " ")) or line == ""):
            out[path].append(line)
    return {p: "\n".join(v) for p, v in out.items()}


def rebuild(patch: str) -> tuple[str, str]:
    """(base, head) of one file from its hunks, blank outside them, real line numbers."""
    old: dict[int, str] = {}
    new: dict[int, str] = {}
    o = n = 0
    for line in patch.splitlines():
        m = _HUNK.match(line)
        if m:
            o, n = int(m.group(1)), int(m.group(3))
            o = max(o, 1) if m.group(2) != "0" else o + 1
            n = max(n, 1) if m.group(4) != "0" else n + 1
            continue
        if line.startswith("\\"):
            continue
        tag, text = (line[:1], line[1:]) if line else (" ", "")
        if tag == "-":
            old[o] = text
            o += 1
        elif tag == "+":
            new[n] = text
            n += 1
        else:
            old[o], new[n] = text, text
            o += 1
            n += 1

    def text_of(lines: dict[int, str]) -> str:
        if not lines:
            return ""
        return "".join(lines.get(i, "") + "\n" for i in range(1, max(lines) + 1))
    return text_of(old), text_of(new)


def _records(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return data if isinstance(data, list) else [data]


def _root(path: Path) -> Path:
    for candidate in (path, path / "dataset"):
        if (candidate / "prs.jsonl").is_file() or (candidate / "prs.json").is_file():
            return candidate
    raise SwePrBenchError(f"{path}: no prs.jsonl here or in {path / 'dataset'} (the SWE-PRBench "
                       "layout: prs.jsonl, contexts/config_A/, annotations/)")


def _diff_of(context: dict[str, Any]) -> str | None:
    diff = _first(context, "diff", "diff_patch", "patch", "unified_diff")
    if isinstance(diff, str):
        return diff
    files = context.get("files")
    if isinstance(files, list):
        parts = []
        for f in files:
            if isinstance(f, dict) and (p := _first(f, "path", "filename")) and \
                    (patch := _first(f, "patch", "diff")):
                parts.append(f"--- a/{p}\n+++ b/{p}\n{patch}")
        return "\n".join(parts) or None
    return None


def _comments(annotation: Any) -> list[dict[str, Any]]:
    if isinstance(annotation, dict):
        annotation = _first(annotation, "comments", "human_comments", "issues") or []
    return [c for c in annotation if isinstance(c, dict)] if isinstance(annotation, list) else []


def convert(pr: dict[str, Any], context: dict[str, Any], annotation: Any
            ) -> tuple[str, dict[str, Any] | None, list[str]]:
    """(case id, case data or None, notes on what was left out)."""
    task = str(_first(pr, "task_id", "instance_id", "id") or "pr")
    case_id = "swe-prbench-" + re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")[:60]
    notes: list[str] = []
    diff = _diff_of(context)
    if not diff:
        return case_id, None, ["no diff in the config_A context"]
    files = {p: rebuild(patch) for p, patch in split_diff(diff).items()}
    languages = Counter(lang for p in files if (lang := _language(p))
                        and lang not in DATA_LANGUAGES)
    if not languages:
        return case_id, None, ["no code file of a supported language in the diff"]
    language = languages.most_common(1)[0][0]
    keep = {p: v for p, v in files.items()
            if _language(p) in (language, *DATA_LANGUAGES) or _language(p) is None}
    notes += [f"{p}: another language, left out" for p in files if p not in keep]
    base = {p: b for p, (b, _) in keep.items() if b}
    head = {p: h for p, (_, h) in keep.items() if h}
    deleted = [p for p, (b, h) in keep.items() if b and not h]
    defects = []
    for i, c in enumerate(_comments(annotation), 1):
        path = _first(c, "path", "file", "file_path", "filename")
        line = _first(c, "line", "end_line", "line_number", "new_line")
        body = str(_first(c, "body", "comment", "text", "description") or "").strip()
        if not path or not isinstance(line, int) or not body:
            notes.append(f"comment {i}: no path, line or text")
            continue
        start = c.get("start_line") if isinstance(c.get("start_line"), int) else line
        lines = (min(start, line), max(start, line))
        if path not in head:
            notes.append(f"comment {i}: {path} is not in the PR's head")
            continue
        added = {n for _, _, a in hunks(base.get(path, ""), head[path]) for n in a}
        if not added & set(range(lines[0], lines[1] + 1)):
            notes.append(f"comment {i}: {path}:{lines[0]}-{lines[1]} is on no added line")
            continue
        category = c.get("category") if c.get("category") in CATEGORIES else "wrong-condition"
        severity = c.get("severity") if c.get("severity") in SEVERITIES else "major"
        defects.append({"id": f"human-{i}", "path": path, "lines": list(lines),
                        "category": category, "severity": severity,
                        "description": " ".join(body.split())[:400]})
    if not defects:
        return case_id, None, [*notes, "no human comment on an added line"]
    if not base:  # a PR of new files only: the schema wants a base tree
        base = {".swe-prbench": f"{task}\n"}
    title = str(_first(pr, "title") or task)
    body = str(_first(pr, "body", "description") or "")
    source = f"{_first(pr, 'repo') or '?'}#{_first(pr, 'pr_number', 'number') or '?'}"
    data = {"language": language, "title": title[:200],
            "body": (f"{body}\n\n(SWE-PRBench {task}, {source})").strip(),
            "base": base, "push": [{"message": title[:200], "delete": deleted,
                                    "files": {p: h for p, h in head.items()
                                              if base.get(p) != h},
                                    "defects": defects}]}
    return case_id, data, notes


def import_dir(path: Path, out: Path, limit: int | None = None,
               log=lambda line: None) -> list[Path]:
    root = _root(path)
    prs_file = root / "prs.jsonl" if (root / "prs.jsonl").is_file() else root / "prs.json"
    try:
        prs = _records(prs_file)
    except (OSError, ValueError) as exc:
        raise SwePrBenchError(f"{prs_file}: {exc}") from None
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for pr in prs:
        if limit is not None and len(written) >= limit:
            break
        task = str(_first(pr, "task_id", "instance_id", "id") or "")
        if not re.fullmatch(r"\w[\w.-]*", task):
            # It names files of the dataset: never a path out of it ("../../x").
            log(f"skipped {task or '(no task_id)'}: a task_id is a file name (letters, digits, "
                "_ . -)")
            continue
        ctx_file = root / "contexts" / "config_A" / f"{task}.json"
        ann_file = root / "annotations" / f"{task}_human.json"
        try:
            context = json.loads(ctx_file.read_text(encoding="utf-8"))
            annotation = json.loads(ann_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log(f"skipped {task or '(no task_id)'}: {exc}")
            continue
        case_id, data, notes = convert(pr, context if isinstance(context, dict) else {},
                                       annotation)
        for note in notes:
            log(f"{task}: {note}")
        if data is None:
            log(f"skipped {task}")
            continue
        try:
            case = Case.model_validate({"id": case_id, **data})
        except ValidationError as exc:
            log(f"skipped {task}: {exc.errors()[0]['msg']}")
            continue
        problems = check_case(case)
        if problems:
            log(f"skipped {task}: {'; '.join(problems)[:300]}")
            continue
        target = out / f"{case_id}.toml"
        if target in written:
            log(f"skipped {task}: its case id {case_id} is an earlier task's")
            continue
        target.write_text(dumps_case(data, f"Imported from SWE-PRBench {task} (diff-only, "
                                           "config_A); CC BY 4.0."), encoding="utf-8")
        written.append(target)
    return written


def cmd_import(args) -> int:
    try:
        written = import_dir(Path(args.path), Path(args.out), args.limit,
                             log=lambda line: print(line, file=sys.stderr))
    except SwePrBenchError as exc:
        print(f"dsh: eval import-swe-prbench: {exc}", file=sys.stderr)
        return 2
    for p in written:
        print(p)
    print(f"eval import-swe-prbench: {len(written)} case(s) in {args.out}", file=sys.stderr)
    return 0 if written else 1
