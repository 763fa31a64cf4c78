"""The review procedure of one PR (spec §2): trusted instructions, then one review turn.

Mixed into ``AccountPoller``, whose ``client``, ``store``, ``runner``, ``acct``, ``cfg`` and
``clock`` it uses. The cursor says ``reviewing`` before the model runs and ``reviewed`` only
after the review is on GitHub.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

from .cursor import Instructions, PrEntry
from .github.errors import GitHubError, NotFound, RateLimited
from .github.models import PullRequest
from .prompts import TrustedInstructions
from .sanitizer import sanitize_line

if TYPE_CHECKING:
    from .poller import PrWork

log = logging.getLogger(__name__)

INSTRUCTIONS_PATH = ".github/review_instructions.md"


class Missing:
    """No instructions file and no default instructions."""


class ReviewProcedure:
    async def _instructions(self, pr: PullRequest) -> TrustedInstructions | Missing | None:
        """Trusted instructions from the base repo (branch, then SHA); None = transient error."""
        base = pr.base.repo
        assert base is not None
        for ref in (pr.base.ref, pr.base.sha):
            try:
                text = await self.client.get_file_text(base.owner.login, base.name,
                                                       INSTRUCTIONS_PATH, ref)
            except NotFound:
                continue
            except RateLimited:
                raise
            except GitHubError as exc:
                log.warning("%s#%d: cannot read review instructions: %s", base.full_name,
                            pr.number, exc)
                return None
            return TrustedInstructions(f"{base.full_name}@{ref}:{INSTRUCTIONS_PATH}", text)
        default = self.cfg.review.default_instructions
        if default.strip():
            return TrustedInstructions(f"dsh.toml:plugins.{self.acct.instance}.accounts"
                                       f"[{self.cfg.name}].review.default_instructions", default)
        return Missing()

    async def _review(self, item: PrWork, trigger: str, requested_by: str | None,
                      automatic: bool, now: datetime) -> None:
        owner, name = item.full.split("/")
        key = self._key(item.full, item.summary.number)
        pr = await self.client.get_pull(owner, name, item.summary.number)
        instructions = await self._instructions(pr)
        if instructions is None:
            return  # transient: cursor untouched, retried next tick
        if isinstance(instructions, Missing):
            def missing(e: PrEntry | None) -> PrEntry:
                e = e or PrEntry(head_sha=pr.head.sha, status="missing_instructions",
                                 updated_at=now)
                e.head_sha, e.status, e.updated_at = pr.head.sha, "missing_instructions", now
                e.title, e.base_sha, e.last_seen_open_at = sanitize_line(pr.title), pr.base.sha, now
                e.last_error = f"no {INSTRUCTIONS_PATH} in the base repository"
                return e
            await self.store.update_pr(key, missing)
            log.info("%s: no review instructions; marked missing_instructions", key)
            return
        # Whole seconds, like GitHub's timestamps: a /review posted in the same second as
        # this start is not treated as covered by it.
        started = self.clock().replace(microsecond=0)

        def reviewing(e: PrEntry | None) -> PrEntry:
            e = e or PrEntry(head_sha=pr.head.sha, status="reviewing", updated_at=now)
            if e.head_sha != pr.head.sha:
                e.fail_count, e.last_failed_sha, e.last_failed_at = 0, None, None
            e.head_sha, e.status, e.updated_at, e.trigger = pr.head.sha, "reviewing", now, trigger
            e.title, e.base_sha, e.last_seen_open_at = sanitize_line(pr.title), pr.base.sha, now
            e.last_review_started_at = started
            e.instructions = Instructions(source=instructions.source, text=instructions.text)
            return e
        entry = await self.store.update_pr(key, reviewing)
        assert entry is not None
        log.info("%s: reviewing head %s (trigger %s)", key, pr.head.sha, trigger)
        result = await self.runner.review(self.acct, pr, trigger, instructions,
                                          entry.reviewed_head_sha, requested_by)
        finished = self.clock()

        def after(e: PrEntry | None) -> PrEntry:
            assert e is not None
            e.updated_at = finished
            if result.ok:
                e.status, e.reviewed_head_sha, e.trigger = "reviewed", pr.head.sha, None
                e.fail_count, e.last_failed_sha, e.last_failed_at = 0, None, None
                e.last_error = None
                if automatic:
                    e.reviews_done += 1
            else:
                e.fail_count = (e.fail_count if e.last_failed_sha == pr.head.sha else 0) + 1
                e.last_failed_sha, e.last_failed_at = pr.head.sha, finished
                e.last_error = (result.error or "review failed")[:500]
            return e
        await self.store.update_pr(key, after)
        if result.ok:
            log.info("%s: review posted (review id %s)", key, result.review_id)
        else:
            log.warning("%s: review failed: %s", key, result.error)
