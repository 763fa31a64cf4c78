"""The eval case format: one TOML file per pull request, ``<id>.toml``.

```toml
language = "python"            # python | javascript | typescript | go | java | rust | sql | yaml
title = "Add order search"     # the PR's title
body = "Adds search."          # the PR's description (optional)

[base]                         # the base branch's tree: path = full text
"shop/db.py" = '''...'''

[[push]]                       # the PR's first push (a second [[push]] is a re-review)
message = "Add search"
delete = []                    # paths this push removes (optional)
[push.files]                   # path = full new text of every file the push adds or changes
"shop/orders.py" = '''...'''

[[push.defects]]               # an injected defect, as ground truth
id = "sql"                     # unique within the case
path = "shop/orders.py"
lines = [12, 13]               # first and last line in this push's head, on changed lines
category = "injection"         # see CATEGORIES
severity = "critical"          # critical | major | minor
description = "The customer name is concatenated into the SQL text."
also = [{path = "shop/api.py", lines = [40, 40]}]   # other acceptable places (optional): e.g.
                               # the symptom beside the cause, or a stale caller in another file

[[push.decoys]]                # safe code that looks suspicious: a finding here is a false
id = "fstring-log"             # positive (reported as a decoy hit)
path = "shop/orders.py"
lines = [20, 20]
description = "An f-string in a log call, not in SQL."
```

A second ``[[push]]`` may list ``fixes = ["sql"]`` (earlier defects it removes) and
``moved = {other = [14, 15]}`` (where an earlier defect or decoy still present now sits, when
the push shifted its lines; unmoved ones keep theirs). Defects a push introduces are listed in
its own ``defects``. Lines are 1-based and inclusive, in the head of the push that names them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

CASES_DIR = Path(__file__).parent / "cases"
LANGUAGES = ("python", "javascript", "typescript", "go", "java", "rust", "sql", "yaml")
CATEGORIES = ("off-by-one", "wrong-condition", "error-handling", "resource-leak", "injection",
              "secret", "race", "api-misuse", "edge-case", "performance")
SEVERITIES = ("critical", "major", "minor")
Language = Literal["python", "javascript", "typescript", "go", "java", "rust", "sql", "yaml"]
Category = Literal["off-by-one", "wrong-condition", "error-handling", "resource-leak",
                   "injection", "secret", "race", "api-misuse", "edge-case", "performance"]
Severity = Literal["critical", "major", "minor"]
Lines = tuple[int, int]


class CaseError(ValueError):
    """A case file that cannot be read, with the file named."""


def _check_lines(v: Lines) -> Lines:
    if v[0] < 1 or v[1] < v[0]:
        raise ValueError(f"lines {list(v)}: want [first, last] with 1 <= first <= last")
    return v


def _check_path(v: str) -> str:
    """A path a git tree can hold, relative to the repository root: a case from an importer or
    a hand-edited file must not name ``../x``, ``/etc/x`` or ``.git/config``."""
    parts = v.split("/")
    if (not v or "\\" in v or "\x00" in v
            or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts)):
        raise ValueError(f"path {v!r}: want a relative path inside the repository, such as "
                         "src/app.py (no leading /, no . or .. parts, no .git)")
    return v


RepoPath = Annotated[str, AfterValidator(_check_path)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Location(_Model):
    """Another place a defect may rightly be reported (its symptom beside its cause, a stale
    caller in another file), in the same head as the defect's own ``path``/``lines``."""
    path: str = Field(min_length=1)
    lines: Lines

    _lines = field_validator("lines")(_check_lines)


class Defect(_Model):
    id: str = Field(min_length=1)
    path: str = Field(min_length=1)
    lines: Lines
    category: Category
    severity: Severity
    description: str = Field(min_length=1)
    also: tuple[Location, ...] = ()

    _lines = field_validator("lines")(_check_lines)

    @property
    def locations(self) -> tuple[Location, ...]:
        """Every acceptable place: the defect's own first, then ``also``."""
        return (Location(path=self.path, lines=self.lines), *self.also)


class Decoy(_Model):
    id: str = Field(min_length=1)
    path: str = Field(min_length=1)
    lines: Lines
    description: str = Field(min_length=1)

    _lines = field_validator("lines")(_check_lines)


class Push(_Model):
    message: str = "update"
    files: dict[RepoPath, str] = Field(default_factory=dict)
    delete: list[RepoPath] = Field(default_factory=list)
    defects: list[Defect] = Field(default_factory=list)
    decoys: list[Decoy] = Field(default_factory=list)
    fixes: list[str] = Field(default_factory=list)
    moved: dict[str, Lines] = Field(default_factory=dict)


class Case(_Model):
    # The file's name; it becomes the sandbox repository ``eval/<id>``, so GitHub's rule for
    # repository names applies (a space or "&" passed --check-cases, then stopped the run).
    id: str
    language: Language
    title: str = Field(min_length=1)
    body: str = ""
    base: dict[RepoPath, str] = Field(min_length=1)
    push: list[Push] = Field(min_length=1, max_length=2)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", v):
            raise ValueError(f"{v!r} (the file's name) is not a repository name: want up to "
                             "100 letters, digits, '.', '_' or '-', e.g. py-pagination")
        return v

    @property
    def clean(self) -> bool:
        return not any(p.defects for p in self.push)

    @property
    def defects(self) -> list[Defect]:
        """Every defect of the case, as first introduced."""
        return [d for p in self.push for d in p.defects]

    def introduced_in(self, defect_id: str) -> int:
        return next(i for i, p in enumerate(self.push, 1)
                    if any(d.id == defect_id for d in p.defects))

    def fixed_in(self, defect_id: str) -> int | None:
        return next((i for i, p in enumerate(self.push, 1) if defect_id in p.fixes), None)

    def live(self, push: int) -> dict[str, Defect]:
        """The defects present in the head of push ``push`` (1-based), at their lines there."""
        return self._live(push, "defects")

    def live_decoys(self, push: int) -> dict[str, Decoy]:
        return self._live(push, "decoys")

    def _live(self, push: int, kind: str) -> dict:
        out: dict = {}
        for p in self.push[:push]:
            for gone in p.fixes:
                out.pop(gone, None)
            for key, lines in p.moved.items():
                if key in out:
                    out[key] = out[key].model_copy(update={"lines": lines})
            for item in getattr(p, kind):
                out[item.id] = item
        return out

    def tree(self, push: int) -> dict[str, str]:
        """The files in the head of push ``push`` (0: the base)."""
        files = dict(self.base)
        for p in self.push[:push]:
            for path in p.delete:
                files.pop(path, None)
            files.update(p.files)
        return files


_ITEM = {"push": "push", "defects": "defect", "decoys": "decoy", "also": "also"}


def _where(loc: tuple) -> str:
    """A pydantic error location with 1-based positions: ("push", 0, "defects", 1, "lines")
    -> "push 1, defect 2, lines" (what a person counts in the file)."""
    out: list[str] = []
    for part in loc:
        if isinstance(part, int) and out:
            name = out.pop()
            out.append(f"{_ITEM.get(name, name)} {part + 1}")
        elif isinstance(part, int):
            out.append(f"item {part + 1}")
        else:
            out.append(str(part))
    return ", ".join(out)


def load_case(path: Path) -> Case:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CaseError(f"{path}: {exc}") from None
    try:
        return Case.model_validate({"id": path.stem, **data})
    except ValidationError as exc:
        errors = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors())
        raise CaseError(f"{path}: {errors}") from None


def _files(directory: Path | None) -> list[Path]:
    directory = directory or CASES_DIR
    if not directory.is_dir():
        raise CaseError(f"{directory}: not a directory of eval cases")
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise CaseError(f"{directory}: no *.toml eval cases")
    return files


def load_cases(directory: Path | None = None) -> list[Case]:
    """Every ``*.toml`` case in ``directory`` (default: the shipped corpus), sorted by id; the
    first unreadable one raises (``load_cases_leniently`` reads past it)."""
    return [load_case(p) for p in _files(directory)]


def load_cases_leniently(directory: Path | None = None) -> tuple[list[Case], dict[str, str]]:
    """The readable cases, and case id -> why it cannot be read for every other file (so
    ``--check-cases`` names every problem and still validates the rest)."""
    cases: list[Case] = []
    problems: dict[str, str] = {}
    for p in _files(directory):
        try:
            cases.append(load_case(p))
        except CaseError as exc:
            problems[p.stem] = str(exc)
    return cases, problems
