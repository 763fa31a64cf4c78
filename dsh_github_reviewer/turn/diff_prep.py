"""The prepared diff that goes into a review turn's user message.

The model should not have to fetch the PR's diff with a tool: a tool result is billed uncached
on every review, and the whole diff again on every re-review. Instead the runner puts a
*prepared* diff in the user message: files matching ``review.exclude`` (and the built-in list of
lockfiles and generated files, unless cleared) are named but not shown, binary files are
summarized, and a diff over ``review.max_diff_kb`` is cut at file boundaries — largest files
first, so the most files stay visible — with a notice naming what was left out and the tools
that read it. The guard still lets the model read any changed file.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache

from ..core.globs import GlobError, expand_braces
from ..core.sanitizer import sanitize_code, sanitize_line
from ..github.models import PullFile

# Lockfiles and generated files: large, machine-written, and not where review findings are.
BUILTIN_EXCLUDE: tuple[str, ...] = (
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
    "poetry.lock", "uv.lock", "Pipfile.lock", "pdm.lock", "Cargo.lock", "go.sum",
    "composer.lock", "Gemfile.lock", "mix.lock", "pubspec.lock", "packages.lock.json",
    "flake.lock", "gradle.lockfile", "Package.resolved", "*.min.js", "*.min.css", "*.map",
    "*.pb.go", "*_pb2.py", "*_pb2.pyi", "*.snap",
)
NAMES_LISTED = 40  # per notice: a PR touching thousands of lockfiles still gets a short notice


_UNWRAP = re.compile(r"\(\?s:(.*)\)\\[Zz]", re.S)


@lru_cache(maxsize=1024)
def _path_glob(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: ``*`` and ``?`` as in fnmatch (``*`` crosses ``/``), ``**/``
    also matches no directory at all (``**/gen/*`` covers ``gen/x``, ``src/**/a.py`` covers
    ``src/a.py``, as in .gitignore), and a trailing ``/`` means everything under it."""
    pattern = pattern.lstrip("/")
    if pattern.endswith("/"):
        pattern += "**"
    # fnmatch's translation of each piece, without its (?s: ... )\Z wrapper (\z on 3.14).
    parts = [_UNWRAP.fullmatch(fnmatch.translate(piece)).group(1)  # type: ignore[union-attr]
             for piece in pattern.split("**/")]
    return re.compile("(?s:" + "(?:.*/)?".join(parts) + r")\Z")


def excluded(path: str, patterns: Iterable[str]) -> bool:
    """A pattern without ``/`` matches the file name in any directory; one with ``/`` matches
    the whole path (``*`` also crosses ``/``, so ``vendor/*`` is everything under vendor; see
    ``_path_glob`` for ``**/`` and a trailing ``/``); ``{a,b}`` is either (``expand_braces``).
    A pattern that does not expand (validated configs never hold one) matches nothing."""
    name = path.rsplit("/", 1)[-1]
    for braced in patterns:
        try:
            alternatives = expand_braces(braced)
        except GlobError:
            continue
        for pattern in alternatives:
            if "/" in pattern:
                if _path_glob(pattern).match(path):
                    return True
            elif fnmatchcase(name, pattern):
                return True
    return False


def exclude_patterns(extra: Sequence[str], builtin: bool) -> list[str]:
    return [*(BUILTIN_EXCLUDE if builtin else ()), *extra]


def render_file(f: PullFile) -> str:
    """One file's section in ``git diff`` form (paths, status lines, then the hunks)."""
    # Paths are untrusted too: one line each, no invisible characters.
    new, old = sanitize_line(f.filename, 500), sanitize_line(f.previous_filename or f.filename,
                                                              500)
    head = [f"diff --git a/{old} b/{new}"]
    if f.status == "added":
        head += ["new file", "--- /dev/null", f"+++ b/{new}"]
    elif f.status == "removed":
        head += ["deleted file", f"--- a/{old}", "+++ /dev/null"]
    else:
        if f.status == "renamed":
            head += [f"rename from {old}", f"rename to {new}"]
        head += [f"--- a/{old}", f"+++ b/{new}"]
    return "\n".join(head) + "\n" + _sanitize_patch(f.patch or "").rstrip("\n") + "\n"


def _sanitize_patch(patch: str) -> str:
    """``sanitize_code`` keeps the line count, but a multi-line HTML comment it removes takes
    the diff's ``+``/``-``/space prefixes of the lines inside it along: put them back, or the
    model counts those lines on the wrong side and its LEFT line numbers drift."""
    clean = sanitize_code(patch)
    raw_lines, clean_lines = patch.split("\n"), clean.split("\n")
    if len(raw_lines) != len(clean_lines):
        return clean
    out = []
    for raw, line in zip(raw_lines, clean_lines, strict=True):
        mark = raw[:1]
        out.append(mark + line if mark in ("+", "-", " ") and not line.startswith(mark)
                   else line)
    return "\n".join(out)


def _size(n: int) -> str:
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} B"


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:NAMES_LISTED])
    more = len(items) - NAMES_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


@dataclass
class PreparedDiff:
    sections: list[str] = field(default_factory=list)  # shown files, in the PR's order
    shown: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)  # by review.exclude / built-in list
    binary: list[str] = field(default_factory=list)  # no text patch: "name (size)"
    left_out: list[tuple[str, int]] = field(default_factory=list)  # over budget: (path, bytes)
    budget_bytes: int = 0

    @property
    def empty(self) -> bool:
        return not (self.sections or self.excluded or self.binary or self.left_out)

    def notices(self) -> list[str]:
        out = []
        if self.left_out:
            listed = _names([f"{sanitize_line(p, 200)} ({_size(n)})" for p, n in self.left_out])
            out.append(
                f"[diff cut at {_size(self.budget_bytes)}: {len(self.left_out)} file(s) left "
                f"out, largest first: {listed}. Read them with get_file_contents (head SHA) or "
                "pull_request_read method=get_files.]")
        if self.binary:
            out.append(f"[no text diff (binary or too large for GitHub to diff): "
                       f"{_names([sanitize_line(p, 220) for p in self.binary])}. "
                       "get_file_contents reads them.]")
        if self.excluded:
            out.append(f"[not shown (lockfiles/generated, review.exclude): "
                       f"{_names([sanitize_line(p, 200) for p in self.excluded])}. "
                       "get_file_contents reads them if they matter.]")
        return out

    def render(self) -> str:
        body = "".join(self.sections) or "(no text changes to show)\n"
        notes = "\n".join(self.notices())
        return f"<diff>\n{body}</diff>" + (f"\n{notes}" if notes else "")


def is_binary(f: PullFile) -> bool:
    """No text patch: a binary file or one too large for GitHub to diff (a pure rename has no
    patch either, but nothing to summarize)."""
    return not f.patch and not (f.status == "renamed" and not f.changes) \
        and f.status != "removed"


def prepare(files: Sequence[PullFile], patterns: Sequence[str], max_bytes: int,
            sizes: Mapping[str, int] | None = None) -> PreparedDiff:
    """Filter, summarize and budget ``files`` (a PR's or an interdiff's diff entries);
    ``sizes`` are the byte sizes of binary files at the head, where known."""
    out = PreparedDiff(budget_bytes=max_bytes)
    candidates: list[tuple[int, PullFile, str]] = []
    for i, f in enumerate(files):
        if excluded(f.filename, patterns):
            out.excluded.append(f.filename)
        elif is_binary(f):
            size = (sizes or {}).get(f.filename)
            out.binary.append(f.filename + (f" ({_size(size)})" if size is not None else ""))
        elif not f.patch and f.status == "removed":
            out.binary.append(f"{f.filename} (removed)")
        else:
            candidates.append((i, f, render_file(f)))
    total = sum(len(text.encode()) for _, _, text in candidates)
    # Drop the largest files until the rest fits, so the most files stay fully visible; on a
    # tie the later file goes first.
    for _i, f, text in sorted(candidates, key=lambda c: (-len(c[2].encode()), -c[0])):
        if total <= max_bytes:
            break
        size = len(text.encode())
        total -= size
        out.left_out.append((f.filename, size))
    dropped = {p for p, _ in out.left_out}
    for _, f, text in candidates:
        if f.filename not in dropped:
            out.sections.append(text)
            out.shown.append(f.filename)
    return out
