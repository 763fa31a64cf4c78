"""``eval mine``: draft eval cases from a repository's own bug fixes (SZZ-style).

For every bug-fix commit on the default branch (a merged change whose subject says it fixes
something; refactors, formatting and whitespace-only changes left out), in a local clone:

1. the lines the fix removed or changed in its parent (for lines it only inserted, the lines on
   either side of the insertion) are **blamed** in that parent, ignoring whitespace;
2. the commit most of those lines come from **introduced** the bug: it becomes the pull request
   to review (base = its parent, the push = its version of the files it changed);
3. the defect is where those lines are in that commit's version: the largest group of nearby
   lines is the defect's ``lines``, the other groups its ``also`` locations.

Each draft is validated like every case (``validate.check_case``) and written only if valid;
category and severity are guesses from the fix's message, and the description names the fix:
a person reviews each draft before it joins a corpus. Everything runs through ``git``
subprocesses; without ``--clone`` the repository is cloned from GitHub into a temporary
directory (your git credentials apply to a private one).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from .case_toml import dumps_case
from .cases import Case
from .validate import EXTENSIONS, check_case

FIX_WORDS = re.compile(r"\b(fix(e[sd])?|bug(fix)?|hotfix|patch(ed)?|repair(ed)?|resolve[sd]?|"
                       r"crash(es|ed)?|regression|broken|wrong|incorrect|leak)\b", re.I)
NOT_A_FIX = re.compile(r"\b(refactor\w*|renam\w*|reformat\w*|format(ting)?|style|lint\w*|"
                       r"typos?|docs?|documentation|comments?|whitespace|indent\w*|bump|"
                       r"changelog|readme)\b", re.I)
CATEGORY_WORDS = [
    ("off-by-one", r"off[- ]by[- ]one|fence ?post|\bindex\b|\bbounds?\b"),
    ("resource-leak", r"\bleak|\bclose[sd]?\b|not closed|file handle"),
    ("injection", r"inject|\bxss\b|\bsql\b|escap|sanitiz|shell"),
    ("race", r"\brace\b|concurren|\block|deadlock|thread|atomic"),
    ("secret", r"secret|password|token|credential|api key"),
    ("performance", r"\bslow|perf|quadratic|n\+1|timeout"),
    ("error-handling", r"\berror|exception|panic|\bcatch|\bthrow|swallow"),
    ("edge-case", r"\bnull\b|\bnil\b|\bnone\b|empty|zero|edge|overflow|negative"),
    ("api-misuse", r"\bapi\b|deprecat|misuse|wrong argument"),
]
MAX_FILE_BYTES = 200_000
MAX_FILES = 30
GAP = 3  # lines apart that still make one location


class MineError(ValueError):
    pass


@dataclass
class Draft:
    case_id: str
    text: str
    fix: str
    introduced: str
    data: dict = field(default_factory=dict)
    header: str = ""

    def with_defects_of(self, other: Draft) -> Draft | str:
        """This draft with ``other``'s defects added (a second fix of the same change), or
        why they cannot be (the merged case is not valid)."""
        data = {**self.data, "push": [{**self.data["push"][0], "defects": [
            *self.data["push"][0]["defects"], *other.data["push"][0]["defects"]]}]}
        try:
            problems = check_case(Case.model_validate({"id": self.case_id, **data}))
        except ValidationError as exc:
            return f"not a valid case with the defect of {other.fix[:12]}: {exc.errors()[0]['msg']}"
        if problems:
            return "; ".join(p.split(": ", 1)[1] for p in problems)[:300]
        header = f"{self.header}\nAlso fixed by {other.fix}."
        return Draft(self.case_id, dumps_case(data, header), self.fix, self.introduced, data,
                     header)


@dataclass
class Skipped:
    fix: str
    why: str


@dataclass
class MineResult:
    written: list[Path] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def _git(repo: Path, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          encoding="utf-8", errors="replace")
    if proc.returncode not in ok:
        raise MineError(f"git {' '.join(args[:3])}: {proc.stderr.strip()[:300]}")
    return proc.stdout


def _language(path: str) -> str | None:
    suffix = PurePosixPath(path).suffix
    return next((lang for lang, exts in EXTENSIONS.items() if suffix in exts), None)


def is_fix(subject: str) -> bool:
    return bool(FIX_WORDS.search(subject)) and not NOT_A_FIX.search(subject)


def guess_category(message: str) -> str:
    for category, words in CATEGORY_WORDS:
        if re.search(words, message, re.I):
            return category
    return "wrong-condition"


def _changed_old_lines(repo: Path, parent: str, fix: str) -> dict[str, set[int]]:
    """path in the parent -> lines the fix removed or changed there (an insertion: the lines on
    either side of it), ignoring whitespace-only changes."""
    out: dict[str, set[int]] = {}
    diff = _git(repo, "diff", "-U0", "-w", "--no-renames", "--no-color", parent, fix)
    path = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            path = None if line == "--- /dev/null" else line[6:]
        elif line.startswith("@@") and path is not None:
            m = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", line)
            if not m:
                continue
            first, count = int(m.group(1)), int(m.group(2) or 1)
            # An insertion (count 0 after line ``first``): the lines on either side of it.
            lines = set(range(first, first + count)) if count else \
                {n for n in (first, first + 1) if n >= 1}
            out.setdefault(path, set()).update(lines)
    return {p: v for p, v in out.items() if v}


def _blame(repo: Path, parent: str, path: str, lines: set[int]) -> list[tuple[str, str, int]]:
    """(commit, its path, its line number) for each line of ``path`` in ``parent``."""
    out: list[tuple[str, str, int]] = []
    ranges = []
    for n in sorted(lines):
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    args = [a for lo, hi in ranges for a in ("-L", f"{lo},{hi}")]
    text = _git(repo, "blame", "-w", "--porcelain", *args, parent, "--", path)
    sha, orig, names = None, 0, {}
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]{40}) (\d+) \d+", line)
        if m:
            sha, orig = m.group(1), int(m.group(2))
        elif line.startswith("filename ") and sha:
            names[sha] = line[9:]
        elif line.startswith("\t") and sha:
            out.append((sha, names.get(sha, path), orig))
    return out


def _groups(lines: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n - out[-1][1] <= GAP:
            out[-1][1] = n
        else:
            out.append([n, n])
    return [(a, b) for a, b in out]


def _show(repo: Path, rev: str, path: str) -> str | None:
    proc = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"],
                          capture_output=True)
    if proc.returncode != 0 or len(proc.stdout) > MAX_FILE_BYTES or b"\0" in proc.stdout:
        return None
    try:
        return proc.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "change"


def draft_case(repo: Path, fix: str, subject: str, name: str) -> Draft | Skipped:
    """The case for one fix commit, or why there is none."""
    parents = _git(repo, "rev-list", "--parents", "-n", "1", fix).split()[1:]
    if not parents:
        return Skipped(fix, "the first commit")
    parent = parents[0]
    old = {p: v for p, v in _changed_old_lines(repo, parent, fix).items() if _language(p)}
    if not old:
        return Skipped(fix, "changes no code line (whitespace, docs or other files only)")
    blamed = [b for p, lines in sorted(old.items()) for b in _blame(repo, parent, p, lines)]
    if not blamed:
        return Skipped(fix, "nothing to blame")
    introduced, _ = Counter(sha for sha, _, _ in blamed).most_common(1)[0]
    intro_parents = _git(repo, "rev-list", "--parents", "-n", "1", introduced).split()[1:]
    if not intro_parents:
        return Skipped(fix, f"the lines come from the first commit {introduced[:12]}")
    base_rev = intro_parents[0]
    status = _git(repo, "diff", "--name-status", "--no-renames", base_rev, introduced)
    changed: dict[str, str] = {}
    for line in status.splitlines():
        kind, _, path = line.partition("\t")
        changed[path] = kind[:1]
    languages = Counter(lang for p in changed if (lang := _language(p)))
    where = Counter(_language(p) for _, p, _ in
                    [(s, p, n) for s, p, n in blamed if s == introduced])
    language = next((lang for lang, _ in where.most_common() if lang), None) \
        or next(iter(languages), None)
    if language is None:
        return Skipped(fix, "the introducing commit changes no code")
    keep = [p for p in changed if _language(p) in (language, "sql", "yaml")]
    if len(keep) > MAX_FILES:
        return Skipped(fix, f"the introducing commit changes {len(keep)} files")
    base: dict[str, str] = {}
    files: dict[str, str] = {}
    delete: list[str] = []
    for p in keep:
        if changed[p] in ("M", "D"):
            text = _show(repo, base_rev, p)
            if text is None:
                return Skipped(fix, f"{p}: binary or too large")
            base[p] = text
        if changed[p] == "D":
            delete.append(p)
        elif changed[p] in ("A", "M"):
            text = _show(repo, introduced, p)
            if text is None:
                return Skipped(fix, f"{p}: binary or too large")
            files[p] = text
    if not base:  # the schema wants a base tree: a small file of the parent
        for p in _git(repo, "ls-tree", "-r", "--name-only", base_rev).splitlines():
            text = _show(repo, base_rev, p)
            if text is not None and len(text) < 20_000:
                base[p] = text
                break
        else:
            return Skipped(fix, "the introducing commit's parent has no small text file")
    by_path: dict[str, list[int]] = {}
    for sha, path, n in blamed:
        if sha == introduced and path in files:
            by_path.setdefault(path, []).append(n)
    locations = sorted(((p, g) for p, ns in by_path.items() for g in _groups(ns)),
                       key=lambda x: (-(x[1][1] - x[1][0] + 1), x[0], x[1]))
    if not locations:
        return Skipped(fix, "the blamed lines are not in the introducing commit's code files")
    (path, lines), *others = locations
    fix_subject = subject.strip()
    message = _git(repo, "log", "-1", "--format=%B", introduced).strip()
    title, _, body = message.partition("\n")
    defect = {"id": "fixed-" + fix[:8], "path": path, "lines": list(lines),
              "category": guess_category(fix_subject + "\n" + _git(repo, "log", "-1",
                                                                     "--format=%B", fix)),
              "severity": "major",
              "description": f"What {fix[:12]} fixed later: {fix_subject[:200]}",
              "also": [{"path": p, "lines": list(g)} for p, g in others]}
    data = {"language": language, "title": title.strip() or f"Change {introduced[:12]}",
            "body": body.strip(), "base": base,
            "push": [{"message": title.strip() or "change", "delete": delete, "files": files,
                      "defects": [defect]}]}
    case_id = f"mined-{_slug(name)}-{introduced[:8]}"
    try:
        case = Case.model_validate({"id": case_id, **data})
    except ValidationError as exc:
        return Skipped(fix, f"not a valid case: {exc.errors()[0]['msg']}")
    problems = check_case(case)
    if problems:
        return Skipped(fix, "; ".join(p.split(": ", 1)[1] for p in problems)[:300])
    header = (f"Draft mined from {name}: introduced by {introduced}, fixed by {fix}\n"
              f"(\"{fix_subject[:120]}\"). Review it before use: is it a real defect, are "
              "the lines,\ncategory and severity right? (`eval --check-cases` validates it.)")
    return Draft(case_id, dumps_case(data, header), fix, introduced, data, header)


def fixes(repo: Path, since: str | None) -> list[tuple[str, str]]:
    """(commit, subject) of every fix on the checked-out branch's first-parent history (merges
    of pull requests included, as the change they merged), newest first."""
    args = ["log", "--first-parent", "--format=%H%x00%s"]
    if since:
        args.append(f"--since={since}")
    out = []
    for line in _git(repo, *args, "HEAD").splitlines():
        sha, _, subject = line.partition("\0")
        if is_fix(subject):
            out.append((sha, subject))
    return out


def mine(repo: Path, name: str, out_dir: Path, since: str | None = None,
         limit: int | None = None) -> MineResult:
    _git(repo, "rev-parse", "--git-dir")
    result = MineResult()
    seen: dict[str, Draft] = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    for sha, subject in fixes(repo, since):
        if limit is not None and len(result.written) >= limit:
            break
        try:
            draft = draft_case(repo, sha, subject, name)
        except MineError as exc:
            result.skipped.append(Skipped(sha, str(exc)))
            continue
        if isinstance(draft, Skipped):
            result.skipped.append(draft)
            continue
        path = out_dir / f"{draft.case_id}.toml"
        if (earlier := seen.get(draft.introduced)) is not None:
            # Two fixes of one change: one case with both defects, so a reviewer that finds
            # the second bug is not scored a false positive.
            merged = earlier.with_defects_of(draft)
            if isinstance(merged, str):
                result.skipped.append(Skipped(sha, merged))
                continue
            seen[draft.introduced] = merged
            path.write_text(merged.text, encoding="utf-8")
            continue
        seen[draft.introduced] = draft
        path.write_text(draft.text, encoding="utf-8")
        result.written.append(path)
    return result


def clone(name: str, into: Path) -> Path:
    """A full clone of ``owner/name`` from GitHub (blame needs the history)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", name):
        raise MineError(f"--repo {name!r}: want owner/name")
    target = into / "repo"
    proc = subprocess.run(["git", "clone", "--quiet", f"https://github.com/{name}.git",
                           str(target)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise MineError(f"git clone {name}: {proc.stderr.strip()[:300]}")
    return target


def cmd_mine(args) -> int:
    import sys

    try:
        if args.clone:
            result = mine(Path(args.clone), args.repo, Path(args.out), args.since, args.limit)
        else:
            with tempfile.TemporaryDirectory(prefix="dsh-eval-mine-") as tmp:
                repo = clone(args.repo, Path(tmp))
                result = mine(repo, args.repo, Path(args.out), args.since, args.limit)
    except MineError as exc:
        print(f"dsh: eval mine: {exc}", file=sys.stderr)
        return 2
    for s in result.skipped:
        print(f"skipped {s.fix[:12]}: {s.why}", file=sys.stderr)
    for p in result.written:
        print(p)
    if not result.written and not result.skipped:
        print("dsh: eval mine: no bug-fix commit on the checked-out branch's first-parent history"
              + (f" since {args.since!r} (as git reads it)" if args.since else "")
              + ": a fix's subject says fix, bug, crash, regression, ...", file=sys.stderr)
        return 1
    print(f"eval mine: {len(result.written)} draft case(s) in {args.out}; review them, then "
          f"`dsh github-reviewer eval --check-cases --cases {args.out}`", file=sys.stderr)
    return 0 if result.written else 1
