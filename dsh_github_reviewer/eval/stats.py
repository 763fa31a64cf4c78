"""Uncertainty of eval figures, without heavy dependencies (a few lines each; no scipy).

* ``wilson``: the 95 % Wilson score interval of a proportion k/n (recall, precision).
* ``Bootstrap``: a seeded, deterministic bootstrap over cases for figures that are not one
  proportion (F1): cases are resampled with replacement, every repeat of a case travels with it.
* ``mcnemar_exact``: the exact two-sided McNemar test on paired found/missed outcomes.
* ``paired_bootstrap``: the 95 % interval of a difference between two configurations'
  figures, resampling the same cases for both (a size, not a test: percentile intervals are
  too narrow on few cases);
* ``paired_permutation``: a sign-flip permutation test of F1's difference, swapping the two
  configurations' results case by case (exact when few cases differ, else seeded).
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence

Z95 = 1.959963984540054
SEED = 20260
RESAMPLES = 2000


def wilson(k: int, n: int, z: float = Z95) -> list[float] | None:
    """The Wilson score interval [low, high] of k successes in n trials (None when n = 0)."""
    if n <= 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def _percentiles(values: list[float]) -> list[float] | None:
    if not values:
        return None
    values = sorted(values)
    lo = values[int(0.025 * (len(values) - 1))]
    hi = values[math.ceil(0.975 * (len(values) - 1))]
    return [round(lo, 4), round(hi, 4)]


class Bootstrap:
    """The same resamples of ``n`` cases for every figure of one report (seeded: the same
    input gives the same intervals on every machine). A resample is kept as how many times
    it drew each case."""

    def __init__(self, n: int, resamples: int = RESAMPLES, seed: int = SEED):
        self.n = n
        self.weights = _weights(n, resamples, seed)

    def interval(self, stat: Callable[[list[int]], float | None]) -> list[float] | None:
        """The 2.5th and 97.5th percentiles of ``stat`` over the resamples (each given as
        per-case draw counts); resamples where it is undefined are left out."""
        return _percentiles([v for w in self.weights if (v := stat(w)) is not None])


@functools.cache
def _weights(n: int, resamples: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(resamples if n else 0):
        w = [0] * n
        for i in rng.choices(range(n), k=n):
            w[i] += 1
        out.append(w)
    return out


Row = tuple[int, int, int, int]


def _sums(w: list[int], rows: Sequence[Row], used: list[int]) -> tuple[int, int, int, int]:
    h = f = fo = d = 0
    for i in used:
        k = w[i]
        if k:
            a, b, c, e = rows[i]
            h, f, fo, d = h + k * a, f + k * b, fo + k * c, d + k * e
    return h, f, fo, d


def f1_of(hits: int, findings: int, found: int, defects: int) -> float | None:
    if not defects:
        return None
    if not findings or not hits or not found:
        return 0.0
    p, r = hits / findings, found / defects
    return 2 * p * r / (p + r)


def f1_interval(boot: Bootstrap, rows: Sequence[Row]) -> list[float] | None:
    """F1's interval from per-case (hits, findings, found, defects) rows (index = case)."""
    used = [i for i, r in enumerate(rows) if any(r)]
    return boot.interval(lambda w: f1_of(*_sums(w, rows, used))) if rows else None


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b pairs found only by A and c only by B."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_bootstrap(boot: Bootstrap, a: Sequence[Row], b: Sequence[Row]
                     ) -> list[float] | None:
    """The interval of F1(A) - F1(B), resampling the same cases for both."""
    used = [i for i in range(len(a)) if any(a[i]) or any(b[i])]

    def stat(w: list[int]) -> float | None:
        fa, fb = f1_of(*_sums(w, a, used)), f1_of(*_sums(w, b, used))
        return None if fa is None or fb is None else fa - fb
    return boot.interval(stat) if a else None


def paired_permutation(a: Sequence[Row], b: Sequence[Row], resamples: int = RESAMPLES,
                       seed: int = SEED) -> float:
    """Two-sided p-value of F1(A) - F1(B) under "the labels are exchangeable within a case":
    each case's two results are swapped or not; p = share of swaps at least as extreme."""
    differ = [i for i in range(len(a)) if a[i] != b[i]]
    same = [i for i in range(len(a)) if a[i] == b[i]]
    base = [sum(a[i][k] for i in same) for k in range(4)]

    def diff(flips: Sequence[bool]) -> float | None:
        ta, tb = list(base), list(base)
        for i, flip in zip(differ, flips, strict=True):
            x, y = (b[i], a[i]) if flip else (a[i], b[i])
            for k in range(4):
                ta[k] += x[k]
                tb[k] += y[k]
        fa, fb = f1_of(*ta), f1_of(*tb)
        return None if fa is None or fb is None else fa - fb

    observed = diff([False] * len(differ))
    if observed is None or not differ:
        return 1.0
    if len(differ) <= 12:
        patterns: list[Sequence[bool]] = [[bool(m >> j & 1) for j in range(len(differ))]
                                          for m in range(2 ** len(differ))]
    else:
        rng = random.Random(seed)
        patterns = [[False] * len(differ)] + [
            [rng.random() < 0.5 for _ in differ] for _ in range(resamples - 1)]
    values = [d for f in patterns if (d := diff(f)) is not None]
    extreme = sum(abs(v) >= abs(observed) - 1e-12 for v in values)
    return extreme / len(values)
