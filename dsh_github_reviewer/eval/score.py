"""Deterministic scoring of what a reviewer posted against a case's ground truth.

A finding (an inline comment: path, line, optional start_line) **matches** a defect when its path
is the defect's and its line range overlaps the defect's range widened by ``TOLERANCE`` lines on
each side (reviewers often comment on the line above or below the faulty one). Each defect is
matched at most once and each finding matches at most one defect: within one review, findings and
the defects still unfound are paired by a maximum matching (nearest first), so the score never
depends on the order comments were posted.

A finding that matches nothing is a false positive, reported by kind: ``repeat`` (on a defect an
earlier review already found: the re-review should not say it again), ``duplicate`` (a second
comment on a defect this review found), ``decoy`` (on safe code planted to look suspicious), or
``other``. A decoy counts only for a comment on its own lines (no tolerance) and is checked
first. Precision = hits / all findings; recall = defects found / defects; F1 their harmonic
mean. On a second push, a defect the first review found and the push fixed is **recognised** when
the bot resolved the thread of the comment that found it; resolving the thread of a defect no
push fixed is counted against it (``resolved_unfixed``).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from .cases import CATEGORIES, SEVERITIES, Case, Defect

TOLERANCE = 3


class Finding(BaseModel):
    """One inline comment the bot posted in the review of push ``push``."""

    push: int = 1
    path: str
    line: int
    start_line: int | None = None
    body: str = ""
    comment_id: int | None = None

    @property
    def span(self) -> tuple[int, int]:
        first = self.start_line if self.start_line is not None else self.line
        return min(first, self.line), max(first, self.line)


class CaseRun(BaseModel):
    """What one configuration did on one case (the runner fills it from the sandbox)."""

    case_id: str
    findings: list[Finding] = Field(default_factory=list)
    resolved: list[int] = Field(default_factory=list)  # thread roots the bot resolved
    reviewed: list[int] = Field(default_factory=list)  # pushes whose review was posted
    error: str | None = None
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    wall_s: float = 0.0


class FindingScore(BaseModel):
    finding: Finding
    kind: str  # hit | repeat | duplicate | decoy | other
    target: str | None = None  # the defect (or decoy) id


class DefectScore(BaseModel):
    id: str
    path: str
    category: str
    severity: str
    description: str
    introduced: int
    fixed_in: int | None
    found_in: int | None = None
    fix_recognised: bool | None = None  # None: not applicable
    # The bot resolved the thread that found it although no push fixed it (a false "fixed").
    resolved_unfixed: bool = False


class CaseScore(BaseModel):
    case_id: str
    language: str
    clean: bool
    pushes: int
    decoys: int
    defects: list[DefectScore]
    findings: list[FindingScore]
    error: str | None = None

    def count(self, kind: str) -> int:
        return sum(f.kind == kind for f in self.findings)


def overlaps(finding: Finding, path: str, lines: tuple[int, int], tolerance: int) -> bool:
    first, last = finding.span
    return finding.path == path and first <= lines[1] + tolerance \
        and lines[0] - tolerance <= last


def _distance(finding: Finding, d: Defect) -> int:
    first, last = finding.span
    return max(0, d.lines[0] - last, first - d.lines[1])


def _match(findings: list[Finding], defects: list[Defect], tolerance: int) -> dict[int, str]:
    """A maximum matching finding index -> defect id (Kuhn's algorithm). Findings closest to a
    defect claim first and try their nearest candidate first, so the pairing is deterministic
    and a comment right on a defect's line is the one credited with it."""
    cands = [sorted((d for d in defects if overlaps(f, d.path, d.lines, tolerance)),
                    key=lambda d, f=f: (_distance(f, d), d.id)) for f in findings]
    order = sorted(range(len(findings)),
                   key=lambda i: (_distance(findings[i], cands[i][0]) if cands[i] else 1 << 30,
                                  i))
    owner: dict[str, int] = {}

    def augment(i: int, seen: set[str]) -> bool:
        for d in cands[i]:
            if d.id in seen:
                continue
            seen.add(d.id)
            if d.id not in owner or augment(owner[d.id], seen):
                owner[d.id] = i
                return True
        return False

    for i in order:
        augment(i, set())
    return {i: d for d, i in owner.items()}


def score_case(case: Case, run: CaseRun, tolerance: int = TOLERANCE) -> CaseScore:
    defects = {d.id: DefectScore(id=d.id, path=d.path, category=d.category,
                                 severity=d.severity, description=d.description,
                                 introduced=case.introduced_in(d.id),
                                 fixed_in=case.fixed_in(d.id)) for d in case.defects}
    found_by: dict[str, Finding] = {}
    scored: list[FindingScore] = []
    for push in range(1, len(case.push) + 1):
        findings = sorted((f for f in run.findings if f.push == push),
                          key=lambda f: (f.path, f.span, f.comment_id or 0, f.body))
        live = case.live(push)
        unfound = [d for k, d in live.items() if defects[k].found_in is None]
        matched = _match(findings, unfound, tolerance)
        for k in matched.values():
            defects[k].found_in = push
        for i, f in enumerate(findings):
            if i in matched:
                found_by[matched[i]] = f
                scored.append(FindingScore(finding=f, kind="hit", target=matched[i]))
                continue
            near = [d for d in live.values() if overlaps(f, d.path, d.lines, tolerance)]
            earlier = [d for d in near if (defects[d.id].found_in or push) < push]
            now = [d for d in near if defects[d.id].found_in == push]
            # A decoy is a precise trap: only a comment on its own lines falls into it.
            decoys = [x for x in case.live_decoys(push).values()
                      if overlaps(f, x.path, x.lines, 0)]
            if decoys:
                scored.append(FindingScore(finding=f, kind="decoy", target=decoys[0].id))
            elif earlier:
                scored.append(FindingScore(finding=f, kind="repeat", target=earlier[0].id))
            elif now:
                scored.append(FindingScore(finding=f, kind="duplicate", target=now[0].id))
            else:
                scored.append(FindingScore(finding=f, kind="other"))
    resolved = set(run.resolved)
    for d in defects.values():
        f = found_by.get(d.id)
        if d.fixed_in is None and f is not None and f.comment_id in resolved:
            d.resolved_unfixed = True
        if d.fixed_in and d.fixed_in in run.reviewed and f is not None and d.found_in is not None \
                and d.found_in < d.fixed_in:
            d.fix_recognised = f.comment_id is not None and f.comment_id in resolved
    return CaseScore(case_id=case.id, language=case.language, clean=case.clean,
                     pushes=len(case.push),
                     decoys=len({x.id for p in case.push for x in p.decoys}),
                     defects=list(defects.values()), findings=scored, error=run.error)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _prf(hits: int, findings: int, found: int, defects: int) -> dict[str, float | None]:
    """Recall, precision and F1, each rounded only after F1 is computed from the exact ratios."""
    recall, precision = _ratio(found, defects), _ratio(hits, findings)
    if recall is None:
        f1 = None
    elif not precision or not recall:
        f1 = 0.0
    else:
        f1 = 2 * precision * recall / (precision + recall)
    return {"recall": _r(recall), "precision": _r(precision), "f1": _r(f1)}


def _slice(scores: list[CaseScore], keep) -> dict[str, object]:
    """Recall over the slice's defects; precision over the findings of the cases holding one,
    where hits on defects outside the slice are left out (neither right nor wrong here)."""
    defects = [d for s in scores for d in s.defects if keep(d)]
    found = sum(d.found_in is not None for d in defects)
    hits = fps = 0
    for s in scores:
        ids = {d.id for d in s.defects if keep(d)}
        if not ids:
            continue
        hits += sum(f.kind == "hit" and f.target in ids for f in s.findings)
        fps += sum(f.kind != "hit" for f in s.findings)
    return {"defects": len(defects), "found": found, **_prf(hits, hits + fps, found,
                                                             len(defects))}


def summarize(scores: Iterable[CaseScore], runs: Iterable[CaseRun] = ()) -> dict[str, object]:
    """One configuration's figures over its scored cases (and their runs' costs)."""
    scores, runs = list(scores), list(runs)
    findings = [f for s in scores for f in s.findings]
    hits = sum(f.kind == "hit" for f in findings)
    defects = [d for s in scores for d in s.defects]
    found = sum(d.found_in is not None for d in defects)
    clean = [s for s in scores if s.clean]
    second = [s for s in scores if s.pushes > 1]
    new = [d for s in second for d in s.defects if d.introduced > 1]
    fixes = [d for s in second for d in s.defects if d.fix_recognised is not None]
    fp = len(findings) - hits
    n = len(scores)
    prompt = sum(r.prompt_tokens for r in runs)
    return {
        "cases": n, "defects": len(defects), "found": found, "findings": len(findings),
        "hits": hits, "false_positives": fp,
        **_prf(hits, len(findings), found, len(defects)),
        "false_positives_per_pr": _r(_ratio(fp, n)),
        "false_positive_kinds": {k: sum(f.kind == k for f in findings)
                                 for k in ("other", "decoy", "repeat", "duplicate")},
        "clean_cases": len(clean),
        "findings_on_clean": sum(len(s.findings) for s in clean),
        "clean_cases_flagged": sum(bool(s.findings) for s in clean),
        "decoys": sum(s.decoys for s in scores),
        "decoy_hits": sum(f.kind == "decoy" for f in findings),
        "re_review": {"cases": len(second), "new_defects": len(new),
                      "new_found": sum(d.found_in is not None and d.found_in > 1 for d in new),
                      "fixes": len(fixes), "fixes_recognised": sum(bool(d.fix_recognised)
                                                                   for d in fixes),
                      "repeats": sum(f.kind == "repeat" for f in findings),
                      "resolved_unfixed": sum(d.resolved_unfixed for d in defects)},
        "by_category": {c: _slice(scores, lambda d, c=c: d.category == c) for c in CATEGORIES
                        if any(d.category == c for d in defects)},
        "by_severity": {v: _slice(scores, lambda d, v=v: d.severity == v) for v in SEVERITIES
                        if any(d.severity == v for d in defects)},
        "failures": sum(s.error is not None for s in scores),
        "cost_usd": round(sum(r.cost_usd for r in runs), 6),
        "cost_per_pr_usd": round(sum(r.cost_usd for r in runs) / n, 6) if n else None,
        "prompt_tokens": prompt, "output_tokens": sum(r.output_tokens for r in runs),
        "cache_hit": _r(_ratio(sum(r.cached_tokens for r in runs), prompt)),
        "model_calls": sum(r.model_calls for r in runs),
        "wall_s": round(sum(r.wall_s for r in runs), 3),
    }
