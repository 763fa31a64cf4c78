"""What the team's sessions are told per run (user messages; the system prompts stay stable).

A persona gets the same review message as the single reviewer. The coordinator gets that same
prepared message too (the prepared diff — only what changed on a re-review, ``exclude`` and the
size budget applied — its own open threads and people's feedback), followed by this run's
reports, each fenced in a ``<persona_report>`` element; the reviewers that found nothing are
named on one line. Reports come from models that read untrusted text, so they are sanitized
and cannot close or open a report element themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...core.sanitizer import sanitize, sanitize_line
from .verdict import failed_verdict

REPORT_LIMIT = 30_000
_REPORT_TAG = re.compile(r"<\s*/?\s*persona_report", re.I)


@dataclass(frozen=True)
class Report:
    persona: str
    text: str | None  # None: the persona did not complete
    error: str | None = None
    idle: bool = False  # nothing new to review: it was not asked (its last report stands)


def _report_text(text: str) -> str:
    body = _REPORT_TAG.sub("<persona-report", sanitize(text))
    if len(body) > REPORT_LIMIT:
        body = body[:REPORT_LIMIT] + f"\n[report cut at {REPORT_LIMIT} characters]"
    return body


def no_findings(text: str) -> bool:
    """The answer a persona's prompt asks for when it found nothing (``No findings.``)."""
    return text.strip().rstrip(".").strip().lower() == "no findings"


def coordinator_message(base: str, reports: list[Report]) -> str:
    """``base``: the review message the personas got (``reviewers.inputs``). Reviewers that
    found nothing are named on one line (the usual re-review: the coordinator pays its user
    message uncached every run); what to do when everyone completed is in its system prompt,
    only a run with a reviewer missing gets a line about it."""
    head = "Flow: review (team coordinator)."
    base = (base.replace("Flow: review.", head, 1) if base.startswith("Flow: review.")
            else f"{head}\n{base}")
    parts = [base, "", "Reports of this run:"]
    for r in reports:
        if r.idle:
            continue
        if r.text is not None and not no_findings(r.text):
            parts.append(f'<persona_report persona="{r.persona}" status="completed">\n'
                         f"{_report_text(r.text)}\n</persona_report>")
        elif r.text is None:
            why = sanitize_line(r.error or "no result", 300)
            parts.append(f'<persona_report persona="{r.persona}" status="did not complete">\n'
                         f"(no report: {why})\n</persona_report>")
    nothing = [r.persona for r in reports
               if not r.idle and r.text is not None and no_findings(r.text)]
    if nothing:
        parts.append(f"No findings: {', '.join(nothing)}.")
    idle = [r.persona for r in reports if r.idle]
    if idle:
        parts.append(f"Not asked, nothing new to review (no reviewed file changed since their "
                     f"last report): {', '.join(idle)}.")
    failed = [r.persona for r in reports if r.text is None]
    if failed:
        parts.append(f"Not completed: {', '.join(failed)}. Post the findings you have, say "
                     f"which reviewer did not complete, and end with `{failed_verdict(failed)}`.")
    return "\n".join(parts)
