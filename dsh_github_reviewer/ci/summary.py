"""The job's step summary (``GITHUB_STEP_SUMMARY``): what the run did, in one small table.

Actions shows it on the run's page, so a reader sees the verdict, how many findings were
posted, what the model calls cost, how much of the prompt came from the provider's prefix
cache, and whether the team's memory was restored from the Actions cache, without opening the
log. Every value is our own text or a redacted, escaped model line (the verdict).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from dsh_harness import Harness, Usage

from ..core.sanitizer import redact_secrets

log = logging.getLogger(__name__)


async def spent(harness: Harness) -> Usage:
    """Usage of every session in the home so far (the CI home holds this PR's sessions)."""
    total = Usage()
    for s in await harness.sessions.summaries():
        total = total + s.usage
    return total


def since(before: Usage, after: Usage) -> Usage:
    return Usage(uncached_input=after.uncached_input - before.uncached_input,
                 cache_read=after.cache_read - before.cache_read,
                 output=after.output - before.output,
                 cost_usd=round(after.cost_usd - before.cost_usd, 10))


def _cell(text: str) -> str:
    """A table cell: no line breaks, no pipes, no HTML (GitHub renders the summary)."""
    text = " ".join(redact_secrets(text).split())
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;"))


@dataclass
class StepSummary:
    title: str
    rows: list[tuple[str, str]] = field(default_factory=list)

    def add(self, name: str, value: str) -> StepSummary:
        self.rows.append((name, value))
        return self

    def usage(self, usage: Usage) -> StepSummary:
        prompt = usage.prompt
        hit = f"{100.0 * usage.cache_read / prompt:.1f} %" if prompt else "no model call"
        self.add("Model cost", f"${usage.cost_usd:.4f}")
        self.add("Prompt tokens", f"{prompt:,} ({usage.cache_read:,} from the prefix cache)")
        return self.add("Prefix-cache hit", hit)

    def markdown(self) -> str:
        lines = [f"### {_cell(self.title)}", "", "| | |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in self.rows]
        return "\n".join(lines) + "\n"

    def write(self, path: Path | None) -> None:
        """Appended (other steps of the job share the file); a write error is only logged."""
        if path is None:
            return
        try:
            with path.open("a", encoding="utf-8") as f:
                f.write(self.markdown())
        except OSError as exc:
            log.warning("cannot write the step summary %s: %s", path, exc.strerror or exc)


def restored(key: str | None) -> str:
    """The memory row: which Actions cache entry the sessions came from, if any."""
    if key is None:
        return "unknown (not run by action.yml)"
    # actions/cache/restore answers a failed download like a miss (a warning in its log, no
    # key): the row cannot tell the two apart, so it names both.
    return (f"restored ({key})" if key else
            "none restored: fresh sessions (no earlier entry, or the restore failed: see the "
            "restore step's log)")
