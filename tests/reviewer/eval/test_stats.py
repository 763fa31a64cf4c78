"""The intervals and tests behind the eval's uncertainty figures, against known values."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.eval.stats import (
    Bootstrap,
    f1_interval,
    mcnemar_exact,
    paired_bootstrap,
    wilson,
)


def test_wilson_interval_matches_the_textbook_values():
    # 36/52, the example: 56-80 %.
    assert wilson(36, 52) == [0.5573, 0.8009]
    assert wilson(0, 10) == [0.0, 0.2775]
    assert wilson(10, 10) == [0.7225, 1.0]
    assert wilson(0, 0) is None


@pytest.mark.parametrize(("b", "c", "p"), [
    (0, 0, 1.0), (5, 5, 1.0), (6, 0, 0.03125), (10, 2, 0.0385742), (1, 0, 1.0)])
def test_exact_mcnemar(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=1e-6)
    assert mcnemar_exact(c, b) == pytest.approx(p, abs=1e-6)


def test_bootstrap_is_seeded_and_covers_the_figure():
    rows = [(1, 1, 1, 1), (0, 2, 0, 1), (1, 1, 1, 2), (2, 3, 2, 2)] * 5
    a = f1_interval(Bootstrap(len(rows)), rows)
    assert a == f1_interval(Bootstrap(len(rows)), rows)  # the same every time
    assert 0 < a[0] < a[1] < 1
    same = paired_bootstrap(Bootstrap(len(rows)), rows, rows)
    assert same == [0.0, 0.0]
    assert f1_interval(Bootstrap(0), []) is None


def test_permutation_test_of_f1():
    from dsh_github_reviewer.eval.stats import paired_permutation

    rows = [(1, 1, 1, 1)] * 8
    assert paired_permutation(rows, rows) == 1.0
    # Three of eight cases differ, all one way: of the 2^3 swaps, the observed one and its
    # mirror are the most extreme - p = 2/8, not a difference this few cases can show.
    half = [(0, 0, 0, 1)] * 3 + [(1, 1, 1, 1)] * 5
    assert paired_permutation(rows, half) == 0.25
    # Forty cases, every one the same way: far beyond chance (seeded, so the same each time).
    many_a, many_b = [(1, 1, 1, 1)] * 40, [(1, 4, 1, 1)] * 40
    p = paired_permutation(many_a, many_b)
    assert p < 0.001 and p == paired_permutation(many_a, many_b)
