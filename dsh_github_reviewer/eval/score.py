"""Deterministic scoring of what a reviewer posted against a case's ground truth.

A finding (an inline comment: path, line, optional start_line) **can match** a defect when, for
one of the defect's locations (its own ``path``/``lines``, then each ``also``):

* the path is the same and the finding's line range overlaps the location widened by
  ``TOLERANCE`` lines on each side (reviewers often comment on the line above or below), and
* the finding is not much wider than the location: it spans at most the location's lines plus
  ``2 * TOLERANCE`` (``max_width``), so one comment spanning a whole hunk cannot claim every
  defect in it;
* with a judge (``confirmed``), the judge also said the comment describes that defect.

Its distance to the defect is the fewest lines between it and any location (0: it touches one).
Each defect is matched at most once and each finding matches at most one defect: within one
review, a maximum matching of the least total distance pairs them (the nearest comment is the
one credited when a defect got two). Findings are put in a canonical order first, so the result
never depends on the order comments were posted.

Decoys are scored first: a finding on a decoy's own lines (no tolerance; not wider than the
decoy plus ``2 * TOLERANCE``) that touches no defect location it could match (distance 0)
falls for the decoy and matches nothing.

A finding that matches nothing is a false positive, reported by kind: ``decoy``, ``repeat`` (it
could match a defect an earlier review already found: the re-review should not say it again),
``duplicate`` (it could match a defect this review found), or ``other``. Precision = hits / all
findings; recall = defects found / defects; F1 their harmonic mean. On a second push, a defect
the first review found and the push fixed is **recognised** when the bot resolved the thread of
a comment on it (the hit, or a duplicate of it); resolving such a thread of a defect no push
fixed is counted against it (``resolved_unfixed``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from pydantic import BaseModel, Field

from .cases import CATEGORIES, SEVERITIES, Case, Decoy, Defect, Location
from .stats import Bootstrap, f1_interval, wilson

TOLERANCE = 3
INF = 1 << 30


def max_width(lines: tuple[int, int], tolerance: int = TOLERANCE) -> int:
    """The most lines a finding may span and still match a location of ``lines``."""
    return lines[1] - lines[0] + 1 + 2 * tolerance


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

    @property
    def key(self) -> str:
        """What the judge's verdicts are keyed by: where and what (not the comment id, which
        another repeat's sandbox reuses; the same words in the same place get one verdict)."""
        first, last = self.span
        digest = hashlib.sha256(self.body.encode()).hexdigest()[:10]
        return f"{self.push}:{self.path}:{first}-{last}:{digest}"


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
    repeat: int = 1  # which of ``--repeat N`` runs this is (1-based)


class FindingScore(BaseModel):
    finding: Finding
    kind: str  # hit | repeat | duplicate | decoy | other
    target: str | None = None  # the defect (or decoy) id
    distance: int | None = None  # lines from the target defect (hits)


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
    repeat: int = 1

    def count(self, kind: str) -> int:
        return sum(f.kind == kind for f in self.findings)


def overlaps(finding: Finding, path: str, lines: tuple[int, int], tolerance: int) -> bool:
    first, last = finding.span
    return finding.path == path and first <= lines[1] + tolerance \
        and lines[0] - tolerance <= last


def _gap(finding: Finding, lines: tuple[int, int]) -> int:
    first, last = finding.span
    return max(0, lines[0] - last, first - lines[1])


def location_distance(finding: Finding, loc: Location | Defect | Decoy,
                      tolerance: int = TOLERANCE) -> int | None:
    """Lines between the finding and one location, or None when it cannot match there (other
    path, beyond the tolerance, or wider than ``max_width``)."""
    first, last = finding.span
    if not overlaps(finding, loc.path, loc.lines, tolerance):
        return None
    if last - first + 1 > max_width(loc.lines, tolerance):
        return None
    return _gap(finding, loc.lines)


def distance(finding: Finding, defect: Defect, tolerance: int = TOLERANCE) -> int | None:
    """The finding's distance to the nearest location of ``defect`` it may match there."""
    ds = [d for loc in defect.locations
          if (d := location_distance(finding, loc, tolerance)) is not None]
    return min(ds) if ds else None


def _on_decoy(finding: Finding, decoy: Decoy, tolerance: int) -> bool:
    """A comment on the decoy's own lines (no tolerance), not much wider than it (a comment
    spanning a whole hunk is vague, not a fall for the trap)."""
    first, last = finding.span
    return overlaps(finding, decoy.path, decoy.lines, 0) \
        and last - first + 1 <= max_width(decoy.lines, tolerance)


def pair_key(case_id: str, finding: Finding, defect_id: str) -> str:
    return f"{case_id}|{finding.key}|{defect_id}"


def candidate_pairs(case: Case, run: CaseRun, tolerance: int = TOLERANCE
                    ) -> list[tuple[Finding, Defect]]:
    """Every (finding, defect present in its push) pair the location rule allows: what a
    judge is asked about."""
    out = []
    for f in run.findings:
        if 1 <= f.push <= len(case.push):
            out += [(f, d) for d in case.live(f.push).values()
                    if distance(f, d, tolerance) is not None]
    return out


def _match(cost: list[list[int | None]]) -> dict[int, int]:
    """A maximum matching of least total cost, finding index -> defect index (successive
    shortest augmenting paths; the sizes are a review's comments and a case's defects).
    Ties go to the lower finding index, then the lower defect index."""
    n_f, n_d = len(cost), len(cost[0]) if cost else 0
    mf, md = [-1] * n_f, [-1] * n_d
    while True:
        # Bellman-Ford over the residual graph from every free finding.
        df = [0 if mf[i] < 0 else INF for i in range(n_f)]
        dd, via = [INF] * n_d, [-1] * n_d
        changed = True
        while changed:
            changed = False
            for i in range(n_f):
                if df[i] >= INF:
                    continue
                for j in range(n_d):
                    c = cost[i][j]
                    if c is None or mf[i] == j or df[i] + c >= dd[j]:
                        continue
                    dd[j], via[j], changed = df[i] + c, i, True
            for j in range(n_d):
                i = md[j]
                if i >= 0 and dd[j] < INF and dd[j] - cost[i][j] < df[i]:
                    df[i], changed = dd[j] - cost[i][j], True
        free = [(dd[j], j) for j in range(n_d) if md[j] < 0 and dd[j] < INF]
        if not free:
            break
        _, j = min(free)
        while j >= 0:  # flip the path back to its free finding
            i = via[j]
            prev = mf[i]
            mf[i], md[j] = j, i
            j = prev
    return {i: j for i, j in enumerate(mf) if j >= 0}


def score_case(case: Case, run: CaseRun, tolerance: int = TOLERANCE,
               confirmed: dict[str, bool | None] | None = None) -> CaseScore:
    """Score one run. ``confirmed``: the judge's verdicts by ``pair_key`` (only a YES lets a
    finding match a defect); None scores by location alone."""
    defects = {d.id: DefectScore(id=d.id, path=d.path, category=d.category,
                                 severity=d.severity, description=d.description,
                                 introduced=case.introduced_in(d.id),
                                 fixed_in=case.fixed_in(d.id)) for d in case.defects}

    def dist(f: Finding, d: Defect) -> int | None:
        if confirmed is not None and confirmed.get(pair_key(case.id, f, d.id)) is not True:
            return None
        return distance(f, d, tolerance)

    on_defect: dict[str, list[Finding]] = {}  # every comment of the finding review on it
    scored: list[FindingScore] = []
    for push in range(1, len(case.push) + 1):
        findings = sorted((f for f in run.findings if f.push == push),
                          key=lambda f: (f.path, f.span, f.comment_id or 0, f.body))
        live = case.live(push)
        decoys = list(case.live_decoys(push).values())
        near = [{k: x for k, d in live.items() if (x := dist(f, d)) is not None}
                for f in findings]
        # Decoys first: a comment on a decoy's own lines that touches no defect fell for it.
        trapped = {i: x.id for i, f in enumerate(findings) for x in decoys
                   if _on_decoy(f, x, tolerance) and 0 not in near[i].values()}
        unfound = [k for k in live if defects[k].found_in is None]
        cost = [[None if i in trapped else near[i].get(k) for k in unfound]
                for i in range(len(findings))]
        matched = {i: unfound[j] for i, j in _match(cost).items()}
        for k in matched.values():
            defects[k].found_in = push
        for i, f in enumerate(findings):
            if i in matched:
                k = matched[i]
                on_defect.setdefault(k, []).append(f)
                scored.append(FindingScore(finding=f, kind="hit", target=k,
                                           distance=near[i][k]))
                continue
            if i in trapped:
                scored.append(FindingScore(finding=f, kind="decoy", target=trapped[i]))
                continue
            by_near = sorted(near[i], key=lambda k, i=i: (near[i][k], k))
            earlier = [k for k in by_near if (defects[k].found_in or push) < push]
            now = [k for k in by_near if defects[k].found_in == push]
            on_decoy = [x.id for x in decoys if _on_decoy(f, x, tolerance)]
            if on_decoy:
                scored.append(FindingScore(finding=f, kind="decoy", target=on_decoy[0]))
            elif earlier:
                scored.append(FindingScore(finding=f, kind="repeat", target=earlier[0]))
            elif now:
                on_defect.setdefault(now[0], []).append(f)
                scored.append(FindingScore(finding=f, kind="duplicate", target=now[0]))
            else:
                scored.append(FindingScore(finding=f, kind="other"))
    resolved = set(run.resolved)
    for d in defects.values():
        ids = {f.comment_id for f in on_defect.get(d.id, ()) if f.comment_id is not None}
        if d.fixed_in is None and ids & resolved:
            d.resolved_unfixed = True
        if d.fixed_in and d.fixed_in in run.reviewed and d.found_in is not None \
                and d.found_in < d.fixed_in:
            d.fix_recognised = bool(ids & resolved)
    return CaseScore(case_id=case.id, language=case.language, clean=case.clean,
                     pushes=len(case.push),
                     decoys=len({x.id for p in case.push for x in p.decoys}),
                     defects=list(defects.values()), findings=scored, error=run.error,
                     repeat=run.repeat)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _prf(hits: int, findings: int, found: int, defects: int) -> dict[str, object]:
    """Recall, precision and F1 (rounded only after F1 is computed from the exact ratios), and
    the Wilson intervals of the two proportions."""
    recall, precision = _ratio(found, defects), _ratio(hits, findings)
    if recall is None:
        f1 = None
    elif not precision or not recall:
        f1 = 0.0
    else:
        f1 = 2 * precision * recall / (precision + recall)
    return {"recall": _r(recall), "recall_ci95": wilson(found, defects),
            "precision": _r(precision), "precision_ci95": wilson(hits, findings),
            "f1": _r(f1)}


def _ALL(d) -> bool:
    return True


def case_rows(scores: list[CaseScore], keep=_ALL
              ) -> tuple[list[str], list[tuple[int, int, int, int]]]:
    """Per case id (every repeat of a case added up): (hits, findings, found, defects) over
    the defects ``keep`` selects; precision counts the findings of cases holding one, hits on
    defects outside the selection left out (neither right nor wrong here)."""
    rows: dict[str, list[int]] = {}
    for s in scores:
        ids = {d.id for d in s.defects if keep(d)}
        row = rows.setdefault(s.case_id, [0, 0, 0, 0])
        everything = keep is _ALL
        if not ids and not everything:
            continue
        hits = sum(f.kind == "hit" and (everything or f.target in ids) for f in s.findings)
        fps = sum(f.kind != "hit" for f in s.findings)
        row[0] += hits
        row[1] += hits + fps
        row[2] += sum(d.found_in is not None for d in s.defects if d.id in ids)
        row[3] += len(ids)
    names = sorted(rows)
    return names, [tuple(rows[n]) for n in names]  # type: ignore[misc]


def figures(scores: list[CaseScore], keep=_ALL, boot: Bootstrap | None = None
            ) -> dict[str, object]:
    """Recall, precision, F1 with their n and 95 % intervals over the selected defects."""
    names, rows = case_rows(scores, keep)
    hits, findings, found, defects = (sum(r[k] for r in rows) for k in range(4))
    boot = boot or Bootstrap(len(names))
    if boot.n != len(names):
        boot = Bootstrap(len(names))
    out: dict[str, object] = {"defects": defects, "found": found, "findings": findings,
                              "hits": hits, **_prf(hits, findings, found, defects)}
    out["f1_ci95"] = f1_interval(boot, rows)
    return out


def _slice(scores: list[CaseScore], keep, boot: Bootstrap | None = None) -> dict[str, object]:
    return figures(scores, keep, boot)


def summarize(scores: Iterable[CaseScore], runs: Iterable[CaseRun] = ()) -> dict[str, object]:
    """One configuration's figures over its scored cases (and their runs' costs); with
    ``--repeat`` every run of a case is in ``scores``."""
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
    boot = Bootstrap(len({s.case_id for s in scores}))
    languages = sorted({s.language for s in scores})
    return {
        "cases": n, "repeats": max((s.repeat for s in scores), default=1),
        "defects": len(defects), "found": found, "findings": len(findings),
        "hits": hits, "false_positives": fp,
        **_prf(hits, len(findings), found, len(defects)),
        "f1_ci95": f1_interval(boot, case_rows(scores)[1]),
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
        "by_category": {c: _slice(scores, lambda d, c=c: d.category == c, boot)
                        for c in CATEGORIES if any(d.category == c for d in defects)},
        "by_severity": {v: _slice(scores, lambda d, v=v: d.severity == v, boot)
                        for v in SEVERITIES if any(d.severity == v for d in defects)},
        "by_language": {g: _language(scores, g) for g in languages},
        "failures": sum(s.error is not None for s in scores),
        "cost_usd": round(sum(r.cost_usd for r in runs), 6),
        "cost_per_pr_usd": round(sum(r.cost_usd for r in runs) / n, 6) if n else None,
        "prompt_tokens": prompt, "output_tokens": sum(r.output_tokens for r in runs),
        "cache_hit": _r(_ratio(sum(r.cached_tokens for r in runs), prompt)),
        "model_calls": sum(r.model_calls for r in runs),
        "wall_s": round(sum(r.wall_s for r in runs), 3),
    }


def _language(scores: list[CaseScore], language: str) -> dict[str, object]:
    """A language's cases: every finding and defect of them (clean cases included)."""
    mine = [s for s in scores if s.language == language]
    out = figures(mine)
    out["cases"] = len(mine)
    return out
