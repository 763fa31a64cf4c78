"""``dsh github-reviewer eval``: review quality measured on seeded-defect pull requests.

A corpus of small pull requests with known, injected defects (``cases/``, one TOML file each,
format in :mod:`.cases`) is built in the sandbox GitHub and reviewed by the real loop; what the
bot posted is scored against the ground truth (:mod:`.score`). Scores compare configurations on
the same corpus; they are not an absolute measure of quality.

A front end: may import ``app``, ``testing`` and every layer below.
"""

from .cases import CASES_DIR, Case, CaseError, Decoy, Defect, Push, load_case, load_cases
from .score import TOLERANCE, CaseRun, Finding, score_case, summarize
from .validate import check_cases

__all__ = ["CASES_DIR", "TOLERANCE", "Case", "CaseError", "CaseRun", "Decoy", "Defect",
           "Finding", "Push", "check_cases", "load_case", "load_cases", "score_case",
           "summarize"]
