"""Issue 23: deterministic scoring gives the exact figures computed by hand."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.eval import TOLERANCE, CaseRun, Finding, load_cases, score_case, summarize
from dsh_github_reviewer.eval.score import overlaps
from dsh_github_reviewer.eval.validate import hunks

from .kit import case


def _run(findings, **kw) -> CaseRun:
    return CaseRun(case_id="calc", findings=[Finding(push=p, path="app/calc.py", line=n,
                                                     comment_id=100 * p + n)
                                             for p, n in findings], **kw)


def _one(c, run):
    return summarize([score_case(c, run)], [run])


def _added(c, push: int) -> list[int]:
    return sorted(line for _, _, added in hunks(c.tree(0)["app/calc.py"],
                                                c.tree(push)["app/calc.py"]) for line in added)


def test_perfect_reviewer_scores_one_and_recognises_the_fix():
    c = case()
    run = _run([(1, 6), (1, 11), (2, 15)], reviewed=[1, 2], resolved=[106])
    s = _one(c, run)
    assert (s["recall"], s["precision"], s["f1"]) == (1.0, 1.0, 1.0)
    assert s["false_positives"] == 0 and s["false_positives_per_pr"] == 0
    assert s["re_review"] == {"cases": 1, "new_defects": 1, "new_found": 1, "fixes": 1,
                              "fixes_recognised": 1, "repeats": 0, "resolved_unfixed": 0}
    # The fixed defect's thread left open: the fix is not recognised.
    run = _run([(1, 6), (1, 11), (2, 15)], reviewed=[1, 2])
    assert _one(c, run)["re_review"]["fixes_recognised"] == 0
    # Resolving the thread of "loop" (still there) is a false claim of a fix.
    run = _run([(1, 6), (1, 11), (2, 15)], reviewed=[1, 2], resolved=[106, 111])
    r = _one(c, run)["re_review"]
    assert (r["fixes_recognised"], r["resolved_unfixed"]) == (1, 1)


def test_silent_reviewer_scores_zero():
    s = _one(case(), _run([], reviewed=[1, 2]))
    assert (s["recall"], s["precision"], s["f1"], s["findings"]) == (0.0, None, 0.0, 0)
    assert s["re_review"]["fixes"] == 0  # nothing was found, so no fix to recognise


def test_every_added_line_flagged_gives_the_hand_computed_figures():
    c = case()
    assert _added(c, 1) == list(range(4, 15)) and _added(c, 2) == list(range(4, 16))
    run = _run([(1, n) for n in _added(c, 1)] + [(2, n) for n in _added(c, 2)],
               reviewed=[1, 2])
    score = score_case(c, run)
    kinds = {(f.finding.push, f.finding.line): f.kind for f in score.findings}
    # Review 1: 6 and 11 sit on the defects; 13 is the decoy; 4-9 are within 3 lines of "div",
    # 10, 12 and 14 of "loop" - second comments on defects already hit.
    assert [n for (p, n), k in kinds.items() if p == 1 and k == "hit"] == [6, 11]
    assert [n for (p, n), k in kinds.items() if p == 1 and k == "decoy"] == [13]
    assert sum(p == 1 and k == "duplicate" for (p, _), k in kinds.items()) == 8
    # Review 2: 15 finds the new secret; 8-12 and 14 repeat "loop" (found before); 4-7 are near
    # nothing live ("div" was fixed).
    assert [n for (p, n), k in kinds.items() if p == 2 and k == "hit"] == [15]
    assert sorted(n for (p, n), k in kinds.items() if p == 2 and k == "repeat") == \
        [8, 9, 10, 11, 12, 14]
    assert sorted(n for (p, n), k in kinds.items() if p == 2 and k == "other") == [4, 5, 6, 7]
    s = summarize([score], [run])
    assert (s["findings"], s["hits"], s["false_positives"]) == (23, 3, 20)
    assert s["recall"] == 1.0
    assert s["precision"] == round(3 / 23, 4)
    assert s["f1"] == round(2 * (3 / 23) / (3 / 23 + 1), 4) == round(3 / 13, 4)
    assert s["false_positive_kinds"] == {"other": 4, "decoy": 2, "repeat": 6, "duplicate": 8}
    assert s["decoy_hits"] == 2 and s["re_review"]["repeats"] == 6


def test_repeating_an_earlier_finding_on_the_second_push_is_penalised():
    c = case()
    clean = _one(c, _run([(1, 6), (1, 11), (2, 15)], reviewed=[1, 2]))
    repeat = _one(c, _run([(1, 6), (1, 11), (2, 11), (2, 15)], reviewed=[1, 2]))
    assert repeat["re_review"]["repeats"] == 1 and repeat["recall"] == 1.0
    assert repeat["precision"] == 0.75 < clean["precision"]
    assert repeat["f1"] == round(2 * 0.75 / 1.75, 4) < clean["f1"]
    # Found late (missed by the first review) is a hit, not a repeat.
    late = _one(c, _run([(1, 6), (2, 11), (2, 15)], reviewed=[1, 2]))
    assert (late["recall"], late["precision"], late["re_review"]["repeats"]) == (1.0, 1.0, 0)


def test_a_comment_on_a_decoy_is_a_false_positive():
    s = _one(case(), _run([(1, 6), (1, 11), (1, 13), (2, 15)], reviewed=[1, 2]))
    assert (s["decoy_hits"], s["false_positives"], s["precision"]) == (1, 1, 0.75)


@pytest.mark.parametrize(("line", "start", "hit"), [
    (12 + TOLERANCE, None, True), (12 + TOLERANCE + 1, None, False),
    (11 - TOLERANCE, None, True), (11 - TOLERANCE - 1, None, False),
    (20, 14, True),  # a multi-line comment whose range reaches the widened defect
])
def test_tolerance_widens_the_defect_range_on_both_sides(line, start, hit):
    finding = Finding(path="app/calc.py", line=line, start_line=start)
    assert overlaps(finding, "app/calc.py", (11, 12), TOLERANCE) is hit
    assert not overlaps(finding, "app/other.py", (11, 12), TOLERANCE)


def test_each_defect_is_matched_once_by_a_maximum_matching():
    """Finding A (line 9) is near both defects, B (line 5) only near "div": a greedy nearest
    match would give A to "div" and leave B and "loop" unmatched."""
    c = case()
    run = _run([(1, 9), (1, 5)])
    s = score_case(c, run)
    assert {d.id: d.found_in for d in s.defects} == {"div": 1, "loop": 1, "secret": None}
    assert [f.kind for f in s.findings] == ["hit", "hit"]
    # A finding on another path matches nothing.
    other = score_case(c, CaseRun(case_id="calc", findings=[Finding(path="app/x.py", line=6)]))
    assert [f.kind for f in other.findings] == ["other"]


def test_slices_by_category_and_severity():
    c = case()
    s = _one(c, _run([(1, 6), (1, 30), (2, 15)], reviewed=[1, 2]))
    assert s["by_category"]["secret"] == {"defects": 1, "found": 1, "recall": 1.0,
                                          "precision": 0.5, "f1": round(2 * 0.5 / 1.5, 4)}
    assert s["by_category"]["off-by-one"]["recall"] == 0.0
    assert s["by_severity"]["major"] == {"defects": 2, "found": 1, "recall": 0.5,
                                         "precision": 0.5, "f1": 0.5}


def test_the_shipped_corpus_scores_perfectly_against_its_own_ground_truth():
    cases = load_cases()
    scores, runs = [], []
    for c in cases:
        findings = [Finding(push=c.introduced_in(d.id), path=d.path, line=d.lines[1],
                            start_line=d.lines[0]) for d in c.defects]
        run = CaseRun(case_id=c.id, findings=findings, reviewed=list(range(1, len(c.push) + 1)))
        runs.append(run)
        scores.append(score_case(c, run))
    s = summarize(scores, runs)
    assert (s["recall"], s["precision"], s["f1"]) == (1.0, 1.0, 1.0)
    assert s["findings_on_clean"] == 0 and s["clean_cases"] >= 8
