"""The repository's own review config, ``.github/dsh-review.toml``, and the conventional
guideline files (``AGENTS.md``, ``.github/copilot-instructions.md``) — trusted only from the
BASE branch/SHA, never from the PR's head (a PR cannot rewrite the rules it is reviewed by).

Precedence: the repository file over the account's config over the built-ins. An invalid file is
ignored as a whole (its error goes to the log and the PR record, shown by ``status`` and the web
UI; never posted on the PR).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dsh_harness import ConfigBool

from ..core.globs import GlobError, check_glob, split_top
from ..core.sanitizer import sanitize_line
from ..core.session_key import PERSONA_RE
from ..core.severity import Severity
from .diff_prep import excluded

REPO_CONFIG_PATH = ".github/dsh-review.toml"
GUIDELINE_FILES = ("AGENTS.md", ".github/copilot-instructions.md")
GUIDELINE_CHARS = 16_000   # per file, in the system prompt
PATH_INSTRUCTIONS_CHARS = 4_000
# Files that steer the review: a PR editing them is reviewed with the base's version.
STEERING = (".github/review_instructions.md", REPO_CONFIG_PATH, *GUIDELINE_FILES)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _globs(v: list[str]) -> list[str]:
    out = []
    for item in v:
        item = item.strip()
        if not item or "\x00" in item:
            raise ValueError("entries must be non-empty path globs such as *.lock or vendor/*")
        try:
            out.append(check_glob(item))
        except GlobError as exc:
            raise ValueError(f"{exc} (braces list alternatives, e.g. *.{{ts,tsx}})") from None
    return out


class PathInstructions(_Strict):
    path: str
    instructions: str = Field(max_length=PATH_INSTRUCTIONS_CHARS)

    @field_validator("path")
    @classmethod
    def _glob(cls, v: str) -> str:
        return _globs([v])[0]


class AutoReview(_Strict):
    # Only TOML booleans, as in dsh.toml: "no" or 0 here must not be read as a switch.
    enabled: ConfigBool = True
    drafts: ConfigBool = False
    base_branches: list[str] = Field(default_factory=list)
    ignore_title_keywords: list[str] = Field(default_factory=list)
    ignore_labels: list[str] = Field(default_factory=list)


class RepoConfig(_Strict):
    instructions: str | None = Field(default=None, max_length=GUIDELINE_CHARS)
    # Or the instructions as a file of the repository (read from the base, like this file).
    instructions_file: str | None = None
    path_instructions: list[PathInstructions] = Field(default_factory=list, max_length=100)
    exclude: list[str] = Field(default_factory=list)
    personas: list[str] = Field(default_factory=list)
    auto_review: AutoReview = AutoReview()
    max_findings: int | None = Field(default=None, ge=0, le=1000, strict=True)
    min_severity: Severity | None = None
    # The second look for this repository (overrides ``review.verify``).
    verify: bool | None = Field(default=None, strict=True)

    @field_validator("exclude")
    @classmethod
    def _exclude(cls, v: list[str]) -> list[str]:
        return _globs(v)

    @field_validator("instructions_file")
    @classmethod
    def _relative(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.strip().removeprefix("./")
        if not v or v.startswith("/") or ".." in v.split("/") or "\x00" in v:
            raise ValueError("must be a relative path inside the repository (no leading /, "
                             "no ..)")
        return v

    @field_validator("personas")
    @classmethod
    def _personas(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for name in v:
            name = name.strip().lower()
            if not PERSONA_RE.match(name) or name == "coordinator":
                raise ValueError(f"persona names must match {PERSONA_RE.pattern} (the "
                                 "coordinator is always part of a team)")
            if name not in out:
                out.append(name)
        return out


INSTRUCTIONS_DIR = ".github/instructions"
SCOPED_FILES = 20   # .github/instructions/*.instructions.md read at most
_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.S)
_APPLY_TO = re.compile(r"^applyTo:\s*[\"']?([^\"'\n]*)[\"']?\s*$", re.M)


@dataclass(frozen=True)
class ScopedGuideline:
    """A ``.github/instructions/<name>.instructions.md`` file (Copilot's convention): its
    text applies to the changed files its front matter's ``applyTo`` globs match."""

    path: str
    globs: tuple[str, ...]
    text: str


def scoped_guideline(path: str, text: str) -> ScopedGuideline | None:
    m = _FRONT.match(text)
    if not m:
        return None
    apply = _APPLY_TO.search(m.group(1))
    # Commas separate globs, except inside braces ("**/*.{ts,tsx}" is one glob).
    globs = tuple(g.strip() for g in split_top(apply.group(1) if apply else "") if g.strip())
    body = text[m.end():].strip()
    if not globs or not body:
        return None
    if len(body) > PATH_INSTRUCTIONS_CHARS:
        body = (body[:PATH_INSTRUCTIONS_CHARS]
                + f"\n[{path} cut at {PATH_INSTRUCTIONS_CHARS} characters]")
    return ScopedGuideline(path, globs, body)


class RepoConfigError(ValueError):
    pass


def parse(text: str) -> RepoConfig:
    """The file's settings; a ``RepoConfigError`` names the key and what is wrong."""
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RepoConfigError(f"{REPO_CONFIG_PATH}: not valid TOML: {exc}") from None
    try:
        return RepoConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(file)'}: {e['msg']}"
            for e in exc.errors())
        raise RepoConfigError(f"{REPO_CONFIG_PATH}: {problems}") from None


@dataclass(frozen=True)
class RepoSettings:
    """What the base says about reviewing this repository (empty when it says nothing)."""

    config: RepoConfig = field(default_factory=RepoConfig)
    error: str | None = None
    found: tuple[str, ...] = ()      # steering files read from the base
    scoped: tuple[ScopedGuideline, ...] = ()

    def scoped_guidelines(self, paths: Iterable[str]) -> list[ScopedGuideline]:
        paths = list(paths)
        return [g for g in self.scoped
                if any(excluded(path, [glob]) for path in paths for glob in g.globs)]

    def path_instructions(self, paths: Iterable[str]) -> list[PathInstructions]:
        """The path instructions whose glob matches one of ``paths`` (the PR's changed
        files), with the glob rules of ``review.exclude``."""
        paths = list(paths)
        return [p for p in self.config.path_instructions
                if any(excluded(path, [p.path]) for path in paths)]

    def auto_review_refusal(self, base_ref: str, title: str, labels: Iterable[str]
                            ) -> str | None:
        """Why ``auto_review`` says no automatic review for this PR (``/review`` still works)."""
        auto = self.config.auto_review
        if not auto.enabled:
            return "auto_review.enabled = false"
        if auto.base_branches and not any(excluded(base_ref, [g]) or g == base_ref
                                          for g in auto.base_branches):
            return (f"base branch {sanitize_line(base_ref, 100)} is not in "
                    "auto_review.base_branches")
        lowered = title.lower()
        word = next((k for k in auto.ignore_title_keywords if k.lower() in lowered), None)
        if word:
            return (f"the title contains {sanitize_line(word, 100)!r} "
                    "(auto_review.ignore_title_keywords)")
        names = {n.lower() for n in labels}
        label = next((x for x in auto.ignore_labels if x.lower() in names), None)
        if label:
            return f"label {sanitize_line(label, 100)!r} (auto_review.ignore_labels)"
        return None


def steering_edits(paths: Iterable[str]) -> list[str]:
    return sorted({p for p in paths if p in STEERING
                   or (p.startswith(".github/instructions/") and p.endswith(".instructions.md"))})


def guidelines_section(files: dict[str, str], config: RepoConfig | None) -> str:
    """The trusted text the base adds to the instructions (system prompt): the repository
    config's ``instructions`` and the guideline files, each capped."""
    parts = []
    if config is not None and config.instructions and config.instructions.strip():
        parts.append(f"## From {REPO_CONFIG_PATH}\n\n{config.instructions.strip()}")
    for path, text in files.items():
        body = text.strip()
        if len(body) > GUIDELINE_CHARS:
            body = body[:GUIDELINE_CHARS] + f"\n[{path} cut at {GUIDELINE_CHARS} characters]"
        if body:
            parts.append(f"## Repository guidelines: {path}\n\n{body}")
    return "\n\n".join(parts)
