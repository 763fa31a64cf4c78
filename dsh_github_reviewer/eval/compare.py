"""A paired comparison of two configurations on the same cases: is the difference noise?

Both configurations' report entries (``report["configs"][i]``, from one run or from two runs'
reports) are reduced to what they share: the same case, repeat and defect. Recall is compared
per defect with the exact McNemar test (defects only A found against defects only B found); F1
with a paired sign-flip permutation test over the shared cases (each case's two results swapped
or not). The two are **distinguishable** when either test gives p < 0.025 (0.05 split over the
two tests); otherwise the difference is within what chance gives on this many cases. F1's
difference also gets a paired-bootstrap 95 % interval, as a size.
"""

from __future__ import annotations

from typing import Any

from .stats import Bootstrap, f1_of, mcnemar_exact, paired_bootstrap, paired_permutation

ALPHA = 0.05  # split over the two tests (Bonferroni)


def _rows(cfg: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["case"], r.get("repeat", 1)): r for r in cfg["cases"]}


def _counts(row: dict[str, Any], defects: set[str], judged: bool) -> tuple[int, int, int, int]:
    kind = "judged_kind" if judged else "kind"
    found = "judged_found_in" if judged else "found_in"
    hits = sum(f.get(kind, f["kind"]) == "hit" for f in row["findings"])
    return (hits, len(row["findings"]),
            sum(d.get(found) is not None for d in row["defects"] if d["id"] in defects),
            len(defects))


def compare(a: dict[str, Any], b: dict[str, Any], judged: bool = False) -> dict[str, Any]:
    """``a`` against ``b`` (two ``report["configs"]`` entries) on their shared cases."""
    ra, rb = _rows(a), _rows(b)
    shared = sorted(set(ra) & set(rb))
    found = "judged_found_in" if judged else "found_in"
    only_a = only_b = both = neither = 0
    per_case: dict[str, list[list[int]]] = {}
    for key in shared:
        da = {d["id"]: d for d in ra[key]["defects"]}
        db = {d["id"]: d for d in rb[key]["defects"]}
        ids = set(da) & set(db)
        for i in ids:
            fa, fb = da[i].get(found) is not None, db[i].get(found) is not None
            only_a += fa and not fb
            only_b += fb and not fa
            both += fa and fb
            neither += not fa and not fb
        rows = per_case.setdefault(key[0], [[0] * 4, [0] * 4])
        for acc, row in ((rows[0], ra[key]), (rows[1], rb[key])):
            for k, v in enumerate(_counts(row, ids, judged)):
                acc[k] += v
    cases = sorted(per_case)
    rows_a = [tuple(per_case[c][0]) for c in cases]
    rows_b = [tuple(per_case[c][1]) for c in cases]
    p = mcnemar_exact(only_a, only_b)
    interval = paired_bootstrap(Bootstrap(len(cases)), rows_a, rows_b) if cases else None
    f1a = f1_of(*[sum(r[k] for r in rows_a) for k in range(4)]) if cases else None
    f1b = f1_of(*[sum(r[k] for r in rows_b) for k in range(4)]) if cases else None
    pairs = only_a + only_b + both + neither
    p_f1 = paired_permutation(rows_a, rows_b) if cases else 1.0
    distinct = min(p, p_f1) < ALPHA / 2
    return {"a": a["label"], "b": b["label"], "judged": judged, "cases": len(cases),
            "runs": len(shared), "defects": pairs, "found_by_a_only": only_a,
            "found_by_b_only": only_b, "found_by_both": both, "found_by_neither": neither,
            "recall_diff": round((only_a - only_b) / pairs, 4) if pairs else None,
            "mcnemar_p": round(p, 6),
            "f1_diff": None if f1a is None or f1b is None else round(f1a - f1b, 4),
            "f1_diff_ci95": interval, "f1_permutation_p": round(p_f1, 6),
            "distinguishable": distinct,
            "verdict": ("distinguishable" if distinct else "not distinguishable from noise")}


def compare_all(configs: list[dict[str, Any]], judged: bool = False) -> list[dict[str, Any]]:
    """Every pair of configurations of one report, in the report's order."""
    return [compare(configs[i], configs[j], judged) for i in range(len(configs))
            for j in range(i + 1, len(configs))]
