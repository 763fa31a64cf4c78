"""What the PR's summary comment shows of the second look (``work/second_look.py`` keeps the
outcomes; ``pr_output/second_look.py`` renders): the findings dropped from reviews now on
GitHub, and the verifier session's cost, apart from the reviews'."""

from __future__ import annotations

from collections.abc import Collection

from ..core.session_key import PrRef
from ..core.triggers import Trigger
from ..pr_output.second_look import DroppedFinding, render_second_look
from ..turn.second_look import Checked, SecondLookOutcome
from .context import WorkContext

VERIFIER = "verifier"   # the persona of the verifier's session (reviewers.second_look)


def dropped_of(found: list[SecondLookOutcome], posted: Collection[Trigger]
               ) -> list[tuple[Trigger, Checked]]:
    """(trigger, checked finding) of every finding dropped from a review now on GitHub."""
    return [(o.trigger, c) for o in found if o.trigger in posted for c in o.dropped]


async def section(ctx: WorkContext, ref: PrRef, dropped: list[tuple[Trigger, Checked]]) -> str:
    """The summary comment's second-look section: dropped findings and the verifier's cost
    (read from its session log, no model call)."""
    sid = ref.session(VERIFIER).session_id
    cost, prompt, cached = 0.0, 0, 0
    harness = getattr(ctx.runner, "harness", None) or getattr(
        getattr(ctx.runner, "team", None), "harness", None)
    if harness is not None:
        try:
            log_ = await harness.sessions.read(sid)
        except Exception:   # no verifier session (yet): no cost line
            log_ = None
        for e in log_.events if log_ is not None else []:
            usage = getattr(e, "usage", None) if e.type in ("assistant_message",
                                                            "compaction") else None
            if usage is not None:
                cost += usage.cost_usd
                prompt += usage.prompt
                cached += usage.cache_read
    return render_second_look([DroppedFinding(c.path, c.line, c.severity, c.text, c.reason)
                               for _, c in dropped], cost, prompt, cached)
