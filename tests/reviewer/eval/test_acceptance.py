"""Scoring rewards precise findings: scripted reviewers of known behaviour on the shipped
corpus (what ``eval/scripted_model.py`` reports, scored directly; the loop itself is covered by
test_runner)."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.eval import CaseRun, load_cases, score_case, summarize
from dsh_github_reviewer.eval.compare import compare
from dsh_github_reviewer.eval.report import build_report
from dsh_github_reviewer.eval.run import ConfigResult, EvalConfig
from dsh_github_reviewer.eval.scripted_model import scripted_findings, scripted_verdicts


def _runs(cases, behaviour: str, repeat: int = 1) -> list[CaseRun]:
    return [CaseRun(case_id=c.id, findings=scripted_findings(c, behaviour), repeat=repeat,
                    reviewed=list(range(1, len(c.push) + 1))) for c in cases]


def _scores(behaviour: str, judged: bool = False) -> dict:
    cases = load_cases()
    out = []
    for c, run in zip(cases, _runs(cases, behaviour), strict=True):
        out.append(score_case(c, run, confirmed=scripted_verdicts(c, run.findings)
                              if judged else None))
    return summarize(out)


@pytest.fixture(scope="module")
def corpus():
    return load_cases()


def test_a_perfect_reviewer_scores_one():
    s = _scores("perfect")
    assert (s["recall"], s["precision"], s["f1"]) == (1.0, 1.0, 1.0)
    assert s["f1_ci95"] == [1.0, 1.0]
    assert _scores("perfect", judged=True)["f1"] == 1.0


def test_two_vague_comments_spanning_each_hunk_score_low():
    """Before: recall 1.00, F1 0.61 (a comment matched anywhere inside its range)."""
    s = _scores("vague")
    assert s["f1"] <= 0.3 and s["recall"] <= 0.1, s
    assert _scores("vague", judged=True)["recall"] == 0.0


def test_a_reviewer_four_lines_off_finds_nothing_once_judged():
    """Beyond the tolerance a comment misses its own defect; where it lands on a neighbouring
    defect (defects 4 lines apart) only the judge can tell it is about another one, so the
    judge-confirmed recall is the one that must be ~0; the location-only one is reported
    beside it."""
    judged = _scores("off_by_4", judged=True)
    assert judged["recall"] <= 0.1, judged
    located = _scores("off_by_4")
    assert located["recall"] < 0.5  # only neighbours, never its own defect


def test_a_decoy_only_reviewer_finds_nothing_and_every_decoy_counts(corpus):
    s = _scores("decoy_only")
    assert s["recall"] == 0.0 and s["hits"] == 0
    assert s["decoys"] == sum(len(p.decoys) for c in corpus for p in c.push) > 0
    assert s["decoy_hits"] == s["decoys"] == s["findings"]


def _config(cases, behaviour: str, label: str, repeats: int = 1) -> ConfigResult:
    runs = [r for rep in range(1, repeats + 1) for r in _runs(cases, behaviour, rep)]
    return ConfigResult(EvalConfig(label), runs)


def test_paired_comparison_tells_a_difference_from_noise(corpus):
    from datetime import UTC, datetime

    report = build_report(corpus, [_config(corpus, "perfect", "a/perfect", 2),
                                   _config(corpus, "perfect", "a/perfect-again", 2),
                                   _config(corpus, "half", "a/half", 2)],
                          started_at=datetime.now(UTC))
    perfect, again, half = report["configs"]
    same = compare(perfect, again)
    assert not same["distinguishable"] and same["verdict"] == "not distinguishable from noise"
    assert (same["found_by_a_only"], same["found_by_b_only"], same["mcnemar_p"]) == (0, 0, 1.0)
    diff = compare(perfect, half)
    assert diff["distinguishable"] and diff["mcnemar_p"] < 0.05
    assert diff["found_by_b_only"] == 0 and diff["found_by_a_only"] > 0
    assert diff["f1_diff_ci95"][0] > 0
    # Every pair of configurations of the report is compared.
    assert [(c["a"], c["b"]) for c in report["comparisons"]] == [
        ("a/perfect", "a/perfect-again"), ("a/perfect", "a/half"),
        ("a/perfect-again", "a/half")]
    s = half["summary"]
    assert s["repeats"] == 2 and s["cases"] == 2 * len(corpus)
    lo, hi = s["recall_ci95"]
    assert lo < s["recall"] < hi and s["f1_ci95"][0] <= s["f1"] <= s["f1_ci95"][1]


def test_a_difference_in_precision_alone_is_told_apart_and_a_few_cases_are_not(corpus):
    """Same recall (McNemar sees nothing), very different precision: the F1 permutation test
    tells them apart. Three missed defects on eight cases are not enough to tell anything."""
    from datetime import UTC, datetime

    report = build_report(corpus, [_config(corpus, "perfect", "a/perfect"),
                                   _config(corpus, "every_line", "a/noisy")],
                          started_at=datetime.now(UTC))
    (cmp,) = report["comparisons"]
    assert cmp["mcnemar_p"] == 1.0 and cmp["f1_permutation_p"] < 0.001
    assert cmp["distinguishable"]
    few = corpus[:8]
    report = build_report(few, [_config(few, "perfect", "a/perfect"),
                                _config(few, "half", "a/half")], started_at=datetime.now(UTC))
    (cmp,) = report["comparisons"]
    assert cmp["found_by_a_only"] >= 1 and not cmp["distinguishable"], cmp
