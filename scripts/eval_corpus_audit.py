"""Audit the eval corpus' ground truth beyond ``--check-cases``: print the lines each defect,
``also`` location and decoy points at, and flag ranges that are too wide, decoys within 8 lines
of a defect, and per-case changed-line counts.

    PYTHONPATH=$PWD .venv/bin/python scripts/eval_corpus_audit.py [--show] [ID-GLOB ...]
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import sys

from dsh_github_reviewer.eval.cases import Case, load_cases
from dsh_github_reviewer.eval.validate import check_cases, hunks

# Defects that need a file outside the diff to see: the base holds a helper or contract the
# changed code misuses, and that file is unchanged (not derivable from the case format).
OUTSIDE_DIFF = {
    ("go-project-export", "not-found"), ("java-password-reset", "reusable"),
    ("java-sales-report", "last-day"), ("py-contact-import", "wipe-phones"),
    ("py-github-webhook", "prefix"), ("py-upload-worker", "claim-no-tx"),
    ("rust-order-reserve", "discontinued"), ("ts-cart-cents", "saved-carts"),
    ("ts-team-page", "attr-escape"),
}

MAX_WIDTH = 6        # a defect range wider than this is suspicious (tight: the wrong lines)
DECOY_GAP = 8        # a decoy nearer than this to a defect location sits inside the tolerance


def changed_lines(case: Case) -> int:
    total = 0
    for i in range(1, len(case.push) + 1):
        before, after = case.tree(i - 1), case.tree(i)
        for path in set(before) | set(after):
            old = before.get(path, "").splitlines()
            new = after.get(path, "").splitlines()
            if old == new:
                continue
            for line in difflib.unified_diff(old, new, n=0, lineterm=""):
                if line[:1] in "+-" and not line.startswith(("+++", "---")):
                    total += 1
    return total


def gap(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Lines between two ranges (0 when they overlap)."""
    return max(0, max(a[0], b[0]) - min(a[1], b[1]))


def audit(case: Case, show: bool) -> list[str]:
    warn: list[str] = []
    for i in range(1, len(case.push) + 1):
        head = case.tree(i)
        base = case.tree(0)
        live = case.live(i)
        decoys = case.live_decoys(i)
        new_here = {d.id for d in case.push[i - 1].defects}
        locs = []
        for d in live.values():
            places = [(d.path, d.lines)]
            if d.id in new_here:
                places += [(loc.path, loc.lines) for loc in d.also]
            for path, lines in places:
                locs.append((d.id, path, lines))
                width = lines[1] - lines[0] + 1
                if width > MAX_WIDTH:
                    warn.append(f"push {i}: {d.id} at {path}:{list(lines)} is {width} lines wide")
                added = {n for _, _, a in hunks(base.get(path, ""), head.get(path, ""))
                         for n in a}
                if added and width > 0.3 * len(added) and width > 3:
                    warn.append(f"push {i}: {d.id} covers {width} of {len(added)} added lines "
                                f"of {path}")
        for x in decoys.values():
            for did, path, lines in locs:
                if path == x.path and gap(lines, x.lines) < DECOY_GAP:
                    warn.append(f"push {i}: decoy {x.id} {list(x.lines)} is "
                                f"{gap(lines, x.lines)} lines from {did} {list(lines)}")
        if show:
            print(f"--- {case.id} push {i}")
            items = [(f"defect {did}", p, ln) for did, p, ln in locs]
            items += [(f"decoy {x.id}", x.path, x.lines) for x in decoys.values()]
            for what, path, lines in items:
                text = head.get(path, "").splitlines()
                print(f"  {what} {path}:{lines[0]}-{lines[1]}")
                for n in range(lines[0], min(lines[1], len(text)) + 1):
                    print(f"    {n:4} | {text[n - 1]}")
    return warn


def off_by(cases: list[Case], shift: int, tolerance: int = 3) -> tuple[int, int, list[str]]:
    """A reviewer that comments ``shift`` lines below every defect (its own place, as
    introduced): how many of those comments still land within ``tolerance`` of some live
    defect location (its own or another's), which would let an imprecise reviewer score."""
    hits, total, where = 0, 0, []
    for c in cases:
        for i, push in enumerate(c.push, 1):
            live = c.live(i)
            places = [(d.id, d.path, d.lines) for d in live.values()]
            places += [(d.id, loc.path, loc.lines) for d in push.defects for loc in d.also]
            for d in push.defects:
                total += 1
                first, last = d.lines[0] + shift, d.lines[1] + shift
                near = [did for did, path, lines in places if path == d.path
                        and first <= lines[1] + tolerance and lines[0] - tolerance <= last]
                if near:
                    hits += 1
                    where.append(f"{c.id}:{d.id}->{','.join(sorted(set(near)))}")
    return hits, total, where


def stats(cases: list[Case]) -> None:
    """The figures the corpus section of docs/eval*.md quotes."""
    from collections import Counter
    from statistics import median

    lang_cases, lang_defects, cats, sevs = Counter(), Counter(), Counter(), Counter()
    modified = multi = outside = 0
    sizes = []
    for c in cases:
        lang_cases[c.language] += 1
        sizes.append(changed_lines(c))
        for d in c.defects:
            lang_defects[c.language] += 1
            cats[d.category] += 1
            sevs[d.severity] += 1
            parent = c.tree(c.introduced_in(d.id) - 1)
            modified += d.path in parent
            multi += any(loc.path != d.path for loc in d.also)
            outside += (c.id, d.id) in OUTSIDE_DIFF
    big = [n for n in sizes if n >= 150]
    print(f"cases {len(cases)}, clean {sum(c.clean for c in cases)}, "
          f"second push {sum(len(c.push) > 1 for c in cases)}, "
          f"with decoys {sum(any(p.decoys for p in c.push) for c in cases)}, "
          f"defects {sum(lang_defects.values())}")
    print("languages (cases/defects):", ", ".join(
        f"{k} {lang_cases[k]}/{lang_defects[k]}" for k in sorted(lang_cases)))
    print("categories:", ", ".join(f"{k} {v}" for k, v in sorted(cats.items())))
    print("severities:", ", ".join(f"{k} {v}" for k, v in sorted(sevs.items())))
    new = sum(lang_defects.values()) - modified
    print(f"defects in modified files {modified}, in new files {new}; multi-file {multi}; "
          f"outside the diff {outside}")
    print(f"changed lines per case: median {median(sizes):.0f}; {len(big)} cases of 150+ "
          f"({min(big) if big else 0}-{max(big) if big else 0})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--show", action="store_true", help="print the lines each range points at")
    ap.add_argument("--stats", action="store_true", help="print the corpus figures only")
    ap.add_argument("only", nargs="*", help="case id globs")
    args = ap.parse_args()
    cases = [c for c in load_cases()
             if not args.only or any(fnmatch.fnmatch(c.id, g) for g in args.only)]
    if args.stats:
        stats(cases)
        return 0
    bad = 0
    for p in check_cases(cases):
        print("INVALID", p)
        bad += 1
    for c in cases:
        n = changed_lines(c)
        kind = "clean" if c.clean else f"{len(c.defects)} defects"
        print(f"{c.id:40} {c.language:10} {n:4} changed lines  {kind}")
        for w in audit(c, args.show):
            print("  WARN", w)
            bad += 1
    for shift in (4, -4):
        hits, total, where = off_by(cases, shift)
        print(f"{shift:+d}-line reviewer lands near a defect for {hits} of {total}: "
              + " ".join(where))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
