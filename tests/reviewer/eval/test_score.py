"""Deterministic scoring gives the exact figures computed by hand."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.eval import (
    TOLERANCE,
    CaseRun,
    Finding,
    check_cases,
    load_cases,
    score_case,
    summarize,
)
from dsh_github_reviewer.eval.score import distance, max_width, overlaps
from dsh_github_reviewer.eval.validate import hunks

from .kit import TWO_PUSH, case


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
    keys = ("defects", "found", "findings", "hits", "recall", "precision", "f1")
    assert {k: s["by_category"]["secret"][k] for k in keys} == {
        "defects": 1, "found": 1, "findings": 2, "hits": 1, "recall": 1.0, "precision": 0.5,
        "f1": round(2 * 0.5 / 1.5, 4)}
    assert s["by_category"]["off-by-one"]["recall"] == 0.0
    assert {k: s["by_severity"]["major"][k] for k in keys} == {
        "defects": 2, "found": 1, "findings": 2, "hits": 1, "recall": 0.5, "precision": 0.5,
        "f1": 0.5}
    # Every rate with its n and a 95 % interval.
    assert s["by_severity"]["major"]["recall_ci95"] == [0.0945, 0.9055]
    assert s["by_language"]["python"]["cases"] == 1


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


def test_a_finding_much_wider_than_the_defect_matches_nothing():
    """At most the defect's lines plus twice the tolerance: "div" is one line, so 7 lines."""
    c = case()
    assert max_width((6, 6)) == 1 + 2 * TOLERANCE
    ok = Finding(push=1, path="app/calc.py", start_line=3, line=9)
    wide = Finding(push=1, path="app/calc.py", start_line=2, line=9)
    assert distance(ok, c.defects[0]) == 0 and distance(wide, c.defects[0]) is None
    # 9 lines: wider than "loop" (2 lines + 6) too, although within its tolerance.
    wide = Finding(push=1, path="app/calc.py", start_line=1, line=9)
    s = score_case(c, CaseRun(case_id="calc", findings=[wide]))
    assert [f.kind for f in s.findings] == ["other"]
    # One comment spanning the whole hunk finds nothing, however many defects are inside it.
    hunk = Finding(push=1, path="app/calc.py", start_line=4, line=14, body="Something's off.")
    s = summarize([score_case(c, CaseRun(case_id="calc", findings=[hunk, hunk]))])
    assert (s["found"], s["hits"]) == (0, 0)


def test_any_of_a_defects_locations_is_accepted():
    """``also``: the symptom beside the cause; a comment on either finds it, once."""
    text = TWO_PUSH.replace('description = "b may be zero"',
                            'description = "b may be zero"\n'
                            'also = [{path = "app/calc.py", lines = [12, 12]}]', 1)
    c = case(text)
    assert check_cases([c]) == []
    at_symptom = Finding(push=1, path="app/calc.py", line=12)
    s = score_case(c, CaseRun(case_id="calc", findings=[at_symptom]))
    # Line 12 is both "loop" and div's symptom: one comment, one defect.
    assert [f.kind for f in s.findings] == ["hit"]
    both = [at_symptom, Finding(push=1, path="app/calc.py", line=11)]
    s = score_case(c, CaseRun(case_id="calc", findings=both))
    assert {d.id for d in s.defects if d.found_in} == {"div", "loop"}
    # An also location off the diff is refused like any range.
    bad = case(text.replace("lines = [12, 12]}]", "lines = [2, 2]}]"))
    assert any("div also.1: lines [2, 2]" in p for p in check_cases([bad]))


def test_the_nearest_comment_is_credited_and_either_thread_resolves_the_fix():
    """Two comments on "div" (push 1) - the one on its line is the hit; the bot resolving the
    thread of either when push 2 fixes it recognises the fix (py-db-backup)."""
    c = case()
    near = Finding(push=1, path="app/calc.py", line=6, comment_id=1)
    far = Finding(push=1, path="app/calc.py", line=4, comment_id=2)
    for resolved in ([1], [2]):
        run = CaseRun(case_id="calc", findings=[far, near], reviewed=[1, 2], resolved=resolved)
        s = score_case(c, run)
        assert [(f.finding.line, f.kind, f.distance) for f in s.findings] == \
            [(4, "duplicate", None), (6, "hit", 0)]
        assert next(d for d in s.defects if d.id == "div").fix_recognised is True


def test_matching_prefers_the_least_total_distance():
    """Line 8 is 2 from "div" and 3 from "loop"; line 9 is 3 and 2: both pairings are maximum,
    the nearer one (8-div, 9-loop) is taken, whatever order the comments came in."""
    c = case()
    for order in ([8, 9], [9, 8]):
        s = score_case(c, _run([(1, n) for n in order]))
        assert {f.finding.line: f.target for f in s.findings} == {8: "div", 9: "loop"}


@pytest.mark.parametrize("seed", range(5))
def test_maximum_matching_is_order_independent(seed):
    """Any order of the same comments scores the same (kinds, targets, figures)."""
    import random

    c = case()
    lines = [(1, n) for n in (4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 30)] + [(2, 12), (2, 15)]
    base = score_case(c, _run(lines, reviewed=[1, 2]))
    shuffled = list(lines)
    random.Random(seed).shuffle(shuffled)
    other = score_case(c, _run(shuffled, reviewed=[1, 2]))
    assert other.model_dump() == base.model_dump()
    assert sum(f.kind == "hit" for f in base.findings) == 3  # every defect, once


def test_a_comment_on_a_decoy_next_to_a_defect_falls_for_the_decoy():
    """The decoy (line 13) is one line from "loop" (11-12): a comment on the decoy is closer to
    it and counts as a decoy hit, not as finding "loop"; a comment on "loop" still finds it."""
    c = case()
    s = score_case(c, _run([(1, 13)]))
    assert [(f.kind, f.target) for f in s.findings] == [("decoy", "fstring")]
    assert all(d.found_in is None for d in s.defects)
    s = score_case(c, _run([(1, 12), (1, 13)]))
    assert [(f.finding.line, f.kind) for f in s.findings] == [(12, "hit"), (13, "decoy")]
