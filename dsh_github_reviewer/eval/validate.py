"""``eval --check-cases``: every case applies, states its language truly, and puts every
ground-truth range on lines of its pull request's diff that a reviewer can comment on."""

from __future__ import annotations

import difflib
import re
from pathlib import PurePosixPath

from .cases import Case

EXTENSIONS = {"python": (".py",), "javascript": (".js", ".jsx", ".mjs", ".cjs"),
              "typescript": (".ts", ".tsx"), "go": (".go",), "java": (".java",),
              "rust": (".rs",), "sql": (".sql",), "yaml": (".yml", ".yaml")}
# A service's change often carries a migration or a CI file beside its code: SQL and YAML
# files may accompany a case of any language; two programming languages in one case may not.
_COMPANION = ("sql", "yaml")
COMPANIONS = _COMPANION  # the importers keep such files beside any language
_CODE = tuple(e for lang, exts in EXTENSIONS.items() if lang not in _COMPANION for e in exts)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def hunks(old: str, new: str) -> list[tuple[int, int, set[int]]]:
    """The diff's hunks on the new side as GitHub shows them (3 lines of context):
    (first line, last line, added lines)."""
    out: list[tuple[int, int, set[int]]] = []
    line = 0
    for raw in difflib.unified_diff(old.splitlines(), new.splitlines(), n=3, lineterm=""):
        m = _HUNK.match(raw)
        if m:
            first = int(m.group(1))
            count = int(m.group(2)) if m.group(2) is not None else 1
            first = max(first, 1)
            out.append((first, first + count - 1, set()))
            line = first
        elif out and raw.startswith("+") and not raw.startswith("+++"):
            out[-1][2].add(line)
            line += 1
        elif out and raw.startswith(" "):
            line += 1
    return out


def _range_problem(case: Case, push: int, what: str, path: str, lines: tuple[int, int]) -> str:
    """Why ``lines`` of ``path`` are not a valid ground-truth range at ``push`` ("" if valid)."""
    head = case.tree(push)
    if path not in head:
        return f"{what}: {path} is not in the head of push {push}"
    n = len(head[path].splitlines())
    if lines[1] > n:
        return f"{what}: lines {list(lines)} past the end of {path} ({n} lines) at push {push}"
    for first, last, added in hunks(case.tree(0).get(path, ""), head[path]):
        if first <= lines[0] and lines[1] <= last:
            if added & set(range(lines[0], lines[1] + 1)):
                return ""
            return (f"{what}: lines {list(lines)} of {path} hold no added line at push {push} "
                    f"(added in that hunk: {sorted(added) or 'none'})")
    return (f"{what}: lines {list(lines)} of {path} are not inside one hunk of the PR's diff "
            f"at push {push}")


def check_case(case: Case) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    changed: set[str] = set()
    for i, push in enumerate(case.push, 1):
        before, after = case.tree(i - 1), case.tree(i)
        for path in push.delete:
            if path not in before:
                problems.append(f"push {i} deletes {path}, which is not in its parent")
        if before == after:
            problems.append(f"push {i} changes nothing")
        for path in push.files:
            if before.get(path) == push.files[path]:
                problems.append(f"push {i} lists {path} unchanged")
        live = case.live(i - 1) if i > 1 else {}
        decoys = case.live_decoys(i - 1) if i > 1 else {}
        for gone in push.fixes:
            if gone not in live:
                problems.append(f"push {i} fixes {gone!r}, not a defect present before it")
        for key in push.moved:
            if key not in live and key not in decoys:
                problems.append(f"push {i} moves {key!r}, not a defect or decoy present before it")
        for item in [*push.defects, *push.decoys]:
            if item.id in seen:
                problems.append(f"push {i}: id {item.id!r} used twice")
            seen.add(item.id)
        for key, d in [*case.live(i).items(), *case.live_decoys(i).items()]:
            problem = _range_problem(case, i, key, d.path, d.lines)
            if problem:
                problems.append(problem)
        for d in push.defects:  # other acceptable places are in the head of the same push
            for n, loc in enumerate(d.also, 1):
                problem = _range_problem(case, i, f"{d.id} also.{n}", loc.path, loc.lines)
                if problem:
                    problems.append(problem)
        if i > 1:
            for d in push.defects:
                # A re-review scores "the new defect found": it must be new in this push,
                # not code the first review already saw (finding it there would have been
                # scored a false positive).
                added = {n for _, _, a in hunks(before.get(d.path, ""), after.get(d.path, ""))
                         for n in a}
                if d.path in after and not added & set(range(d.lines[0], d.lines[1] + 1)):
                    problems.append(f"push {i}: new defect {d.id!r} (lines {list(d.lines)} of "
                                    f"{d.path}) changes no line of push {i - 1}; it was "
                                    f"already there, list it at the push that added it")
        for d in case.live(i).values():
            for x in case.live_decoys(i).values():
                if any(x.path == loc.path and x.lines[0] <= loc.lines[1]
                       and loc.lines[0] <= x.lines[1] for loc in d.locations):
                    problems.append(f"push {i}: decoy {x.id!r} overlaps defect {d.id!r}")
        base = case.tree(0)
        changed |= {p for p in set(base) | set(after) if base.get(p) != after.get(p)}
    code = [p for p in changed if PurePosixPath(p).suffix in _CODE]
    own = EXTENSIONS[case.language]
    if not any(PurePosixPath(p).suffix in own for p in changed):
        problems.append(f"language {case.language}: no changed {'/'.join(own)} file")
    for p in sorted(code):
        if PurePosixPath(p).suffix not in own:
            problems.append(f"language {case.language}: changed file {p} is another language")
    return [f"{case.id}: {p}" for p in problems]


def check_cases(cases: list[Case]) -> list[str]:
    """Every problem of every case, one line each, naming the case (empty: all valid)."""
    problems: list[str] = []
    ids: set[str] = set()
    for case in cases:
        if case.id in ids:
            problems.append(f"{case.id}: two cases with this id")
        ids.add(case.id)
        problems.extend(check_case(case))
    return problems


def corpus_stats(cases: list[Case]) -> dict[str, object]:
    """What the corpus holds: per language, clean, re-review and decoy cases, defect kinds."""
    langs: dict[str, int] = {}
    cats: dict[str, int] = {}
    sevs: dict[str, int] = {}
    for c in cases:
        langs[c.language] = langs.get(c.language, 0) + 1
        for d in c.defects:
            cats[d.category] = cats.get(d.category, 0) + 1
            sevs[d.severity] = sevs.get(d.severity, 0) + 1
    return {"cases": len(cases), "languages": dict(sorted(langs.items())),
            "clean": sum(c.clean for c in cases),
            "re_review": sum(len(c.push) > 1 for c in cases),
            "with_decoys": sum(any(p.decoys for p in c.push) for c in cases),
            "defects": sum(len(c.defects) for c in cases),
            "categories": dict(sorted(cats.items())), "severities": dict(sorted(sevs.items()))}
