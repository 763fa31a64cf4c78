"""The eval command's arguments (kept apart so registering the CLI imports nothing heavy)."""

from __future__ import annotations

import argparse
import math


def count(text: str) -> int:
    """A whole number of at least 1 (--repeat 0 or --concurrency 0 was silently taken as 1)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want a whole number, not {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"want 1 or more, not {n}")
    return n


def dollars(text: str) -> float:
    """A positive, finite amount: "nan" disabled the cap (no spend compares >= nan) and a
    negative one stopped every configuration after its first case."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want an amount in US dollars, not {text!r}") from None
    if not math.isfinite(x) or x <= 0:
        raise argparse.ArgumentTypeError(f"want a positive amount in US dollars, e.g. 2.5, "
                                         f"not {text}")
    return x


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cases", metavar="DIR", help="a directory of case files (default: the "
                   "corpus shipped with the reviewer)")
    p.add_argument("--only", metavar="GLOB", action="append", default=[],
                   help="only cases whose id matches (repeatable)")
    p.add_argument("--limit", type=count, metavar="N", help="at most N cases, stratified: the "
                   "clean share kept, taken in turn from each language")
    p.add_argument("--model", metavar="PROVIDER/MODEL", action="append", default=[],
                   help="a configuration to run (repeatable; default: default_model)")
    p.add_argument("--team", metavar="P,Q", help="also run each model as a review team with "
                   "these personas, side by side with the single reviewer")
    p.add_argument("--verify", metavar="off,on", help="run each configuration with the second "
                   "look off, on, or both side by side (review.verify; default: as configured)")
    p.add_argument("--instructions", metavar="FILE", help="review instructions to use "
                   "(review.default_instructions) instead of the built-in guidance")
    p.add_argument("--concurrency", type=count, default=4, metavar="N",
                   help="cases in flight at once (default 4; a case starts when one ends)")
    p.add_argument("--json", action="store_true", help="print the JSON report, not the table")
    p.add_argument("--out", metavar="DIR", help="also write report.json, report.md and "
                   "report.html here")
    p.add_argument("--yes", action="store_true", help="start without asking")
    p.add_argument("--max-cost-usd", type=dollars, metavar="X",
                   help="stop starting cases (partial report, exit 1) once the runs cost this "
                   "much; each configuration gets an equal share")
    p.add_argument("--repeat", type=count, default=1, metavar="N",
                   help="run every configuration N times (intervals then cover run-to-run "
                   "variation too)")
    p.add_argument("--judge", metavar="PROVIDER/MODEL", help="also ask this model whether each "
                   "finding near a defect describes it; judge-confirmed figures are reported "
                   "beside the location-only ones")
    p.add_argument("--check-cases", action="store_true",
                   help="only validate the cases and print what the corpus holds")
    sub = p.add_subparsers(dest="eval_command", metavar="SUBCOMMAND", required=False)
    text = ("draft eval cases from a repository's own bug fixes: each fix's lines blamed back "
            "to the change that introduced them (SZZ), which becomes the PR to review")
    mine = sub.add_parser("mine", help=text, description=text)
    mine.add_argument("--repo", required=True, metavar="OWNER/NAME",
                      help="the repository (cloned from GitHub unless --clone is given)")
    mine.add_argument("--clone", metavar="PATH", help="a local clone to read instead")
    mine.add_argument("--since", metavar="DATE", help="only fixes since this date (git's "
                      "--since, e.g. 2025-01-01)")
    mine.add_argument("--limit", type=count, metavar="N", help="at most N draft cases")
    mine.add_argument("--out", required=True, metavar="DIR", help="where to write the drafts")
    text = ("convert SWE-PRBench's published diff-only contexts (JSON/JSONL) into eval cases "
            "(the dataset is not shipped; see docs/eval.en.md)")
    imp = sub.add_parser("import-swe-prbench", help=text, description=text)
    imp.add_argument("path", metavar="PATH", help="a .json or .jsonl file, or a directory "
                     "of them")
    imp.add_argument("--out", required=True, metavar="DIR", help="where to write the cases")
    imp.add_argument("--limit", type=count, metavar="N", help="at most N cases")
