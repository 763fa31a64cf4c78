"""The review procedure of one PR: trusted instructions, then one review turn.

Runs only from the PR's record: the record says ``reviewing`` (with the trigger it answers)
before the model runs and ``reviewed`` only after the review is on GitHub. Every way out —
success, missing instructions, a failed turn, an exception from GitHub, the runner or the
store's reads — ends in a recorded state; failures count attempts with backoff, and after
``review.max_attempts`` on one head the bot gives up visibly (``notices``).

Exactly once, checked by commit: a review already posted for the trigger (found by its
marker, e.g. after a crash between the post and the record) is accepted only if its
``commit_id`` is the head being recorded; one posted on an older head answered its trigger,
and the current head gets its own automatic review.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from ..core.failures import local_failure
from ..core.sanitizer import redact_secrets, sanitize_line
from ..core.triggers import AUTOMATIC, Trigger
from ..github.errors import AuthError, BadCredentials, GitHubError, NotFound, RateLimited
from ..github.models import PullRequest, Review
from ..github.review_submit import find_posted
from ..pr_output.summary import Waiting
from ..turn.guidance import builtin_guidance
from ..turn.prompts import TrustedInstructions, keep_told
from ..turn.repo_config import (
    GUIDELINE_FILES,
    INSTRUCTIONS_DIR,
    REPO_CONFIG_PATH,
    SCOPED_FILES,
    RepoConfigError,
    RepoSettings,
    ScopedGuideline,
    guidelines_section,
    scoped_guideline,
)
from ..turn.repo_config import parse as parse_repo_config
from . import fixes
from . import pause as account_pause
from .context import WorkContext, repo_of, short_error
from .records import InstructionsRecord, PrRecord
from .summary import update_summary
from .turn_extras import turn_extras

log = logging.getLogger(__name__)

INSTRUCTIONS_PATH = ".github/review_instructions.md"


# A turn's failure that is the account's, not the PR's: (pause kind, what the pause says).
ACCOUNT_FAILURES = {
    "auth": ("model", "the model provider rejected the API key"),
    "rate_limit": ("rate_limit", "github-mcp-server is rate limited by GitHub"),
}


class Missing:
    """No instructions file, no default instructions, and ``review.require_instructions``."""


def missing_message(instance: str) -> str:
    """What ``status``, the web UI and the log say about a ``missing_instructions`` PR: the
    file to add and the keys that change it."""
    return (f"no {INSTRUCTIONS_PATH} in the base repository and "
            f"plugins.{instance}.accounts[].review.require_instructions = true: add the file, "
            "or set review.default_instructions, or unset require_instructions to review "
            "with the built-in guidance")


class ReviewProcedure:
    def __init__(self, ctx: WorkContext):
        self.ctx = ctx
        self._warned: set[object] = set()   # (repository, problem) already logged

    async def base_file(self, pr: PullRequest, path: str) -> str | None:
        """A file of the BASE repository (branch, then SHA; never the head); None at 404."""
        base = pr.base.repo
        assert base is not None
        for ref in (pr.base.ref, pr.base.sha):
            try:
                return await self.ctx.client.get_file_text(base.owner.login, base.name, path,
                                                           ref)
            except NotFound:
                continue
        return None

    async def repo_settings(self, pr: PullRequest) -> tuple[RepoSettings, dict[str, str]]:
        """``.github/dsh-review.toml`` and the guideline files, from the base. An invalid
        config is ignored whole; its error goes to the log (once per text) and the record."""
        found = []
        settings = RepoSettings()
        text = await self.base_file(pr, REPO_CONFIG_PATH)
        if text is not None:
            found.append(REPO_CONFIG_PATH)
            try:
                settings = RepoSettings(config=parse_repo_config(text))
            except RepoConfigError as exc:
                settings = RepoSettings(error=str(exc))
                repo = pr.base.repo.full_name if pr.base.repo else "?"
                if (repo, str(exc)) not in self._warned:
                    self._warned.add((repo, str(exc)))
                    log.warning("%s: %s (the file is ignored)", repo, exc)
        guidelines: dict[str, str] = {}
        scoped: list[ScopedGuideline] = []
        named = settings.config.instructions_file
        if named:
            body = await self.base_file(pr, named)
            if body is None:
                settings = RepoSettings(settings.config, f"{REPO_CONFIG_PATH}: "
                                        f"instructions_file {named} is not in the base branch")
            else:
                guidelines[named] = body
                found.append(named)
        if self.ctx.cfg.review.conventional_guidelines:
            for path in GUIDELINE_FILES:
                body = await self.base_file(pr, path)
                if body is not None:
                    guidelines[path] = body
                    found.append(path)
            for path in (await self.base_dir(pr, INSTRUCTIONS_DIR))[:SCOPED_FILES]:
                if path.endswith(".instructions.md"):
                    body = await self.base_file(pr, path)
                    rule = scoped_guideline(path, body) if body is not None else None
                    if rule is not None:
                        scoped.append(rule)
                        found.append(path)
        return RepoSettings(settings.config, settings.error, tuple(found),
                            tuple(scoped)), guidelines

    async def reviews_drafts(self, pr: PullRequest) -> bool:
        """Whether the base's ``.github/dsh-review.toml`` says ``auto_review.drafts = true``
        (only that file is read; an invalid one says no, and the review that follows a yes
        reads and reports it as usual)."""
        text = await self.base_file(pr, REPO_CONFIG_PATH)
        if text is None:
            return False
        try:
            return parse_repo_config(text).auto_review.drafts
        except RepoConfigError:
            return False

    async def base_dir(self, pr: PullRequest, path: str) -> list[str]:
        base = pr.base.repo
        assert base is not None
        for ref in (pr.base.ref, pr.base.sha):
            try:
                return sorted(await self.ctx.client.list_dir(base.owner.login, base.name, path,
                                                             ref))
            except NotFound:
                continue
        return []

    async def instructions(self, pr: PullRequest) -> TrustedInstructions | Missing:
        """The base's instructions plus what its repository config and guideline files add
        (``turn/repo_config.py``); the per-turn settings ride along in ``.repo``."""
        found = await self._instructions(pr)
        if isinstance(found, Missing):
            return found
        settings, guidelines = await self.repo_settings(pr)
        extra = guidelines_section(guidelines, settings.config)
        text = found.text + ("\n\n" + extra if extra else "")
        return TrustedInstructions(found.source, text, repo=settings)

    async def _instructions(self, pr: PullRequest) -> TrustedInstructions | Missing:
        """Trusted instructions from the base repo (branch, then SHA); raises when GitHub
        fails otherwise than with a 404 (a transient error: a failed attempt)."""
        base = pr.base.repo
        assert base is not None
        for ref in (pr.base.ref, pr.base.sha):
            try:
                text = await self.ctx.client.get_file_text(base.owner.login, base.name,
                                                           INSTRUCTIONS_PATH, ref)
            except NotFound:
                continue
            return TrustedInstructions(f"{base.full_name}@{ref}:{INSTRUCTIONS_PATH}", text)
        default = self.ctx.cfg.review.default_instructions
        if default.strip():
            return TrustedInstructions(f"dsh.toml:plugins.{self.ctx.acct.instance}.accounts"
                                       f"[{self.ctx.cfg.name}].review.default_instructions",
                                       default)
        if self.ctx.cfg.review.require_instructions:
            return Missing()
        return builtin_guidance()

    async def run(self, key: str, rec: PrRecord) -> None:
        ran = rec.trigger or Trigger.auto(self.ctx.acct.key, rec.head_sha)
        try:
            await self._run(key, rec, ran)
        except RateLimited as exc:
            await self._paused(key, exc, exc.wait_s)
        except BadCredentials as exc:
            # The token, not this PR: the account pauses, no attempt is counted.
            await account_pause.pause(self.ctx.pause, "github", short_error(exc), self.ctx.clock())
        except Exception as exc:
            if local_failure(exc):
                # The store failed (locked, disk full): not the review's fault, and recording
                # a failed attempt could mark a review already on GitHub as failed. The
                # scheduler retries later; the marker finds a review that was posted.
                raise
            if not isinstance(exc, GitHubError):
                log.exception("%s: review failed with an exception", key)
            await self._failed(key, ran, None, short_error(exc))

    def _auto(self, head: str) -> Trigger:
        return Trigger.auto(self.ctx.acct.key, head)

    async def _run(self, key: str, rec: PrRecord, trigger: Trigger) -> None:
        ctx = self.ctx
        owner, name, number = repo_of(key)
        pr = await ctx.client.get_pull(owner, name, number)
        if pr.state != "open":
            await self._closed(key, merged=pr.merged_at is not None)
            return
        if pr.draft:
            try:
                reviewed = trigger.kind in AUTOMATIC and await self.reviews_drafts(pr)
            except (RateLimited, AuthError):
                raise
            except GitHubError as exc:
                await self._paused(key, exc, self.ctx.cfg.poll_interval_s)
                return
            if not reviewed:
                # A draft whose base does not say auto_review.drafts = true, or work owed
                # before it turned draft (a /review just before): nothing runs or posts while
                # it is a draft; this head is not asked again.
                await ctx.store.mark_draft(key, pr.head.sha)
                log.info("%s: is a draft; the owed review waits until it is ready", key)
                return
        head = pr.head.sha
        if trigger == self._auto(rec.head_sha):
            trigger = self._auto(head)   # the head the review will actually see
        posted = await find_posted(ctx.client, owner, name, number, trigger,
                                   ctx.acct.identity)
        if posted is not None and posted.commit_id != head:
            log.info("%s: trigger %s was answered on %s; reviewing head %s on its own", key,
                     trigger, (posted.commit_id or "?")[:12], head[:12])
            await self._answered_elsewhere(key, trigger, posted.commit_id)
            trigger = self._auto(head)
            posted = await find_posted(ctx.client, owner, name, number, trigger,
                                       ctx.acct.identity)
        if posted is not None:
            log.info("%s: review for %s was already posted (%s)", key, trigger, posted.id)
            await self._after_post(key, posted)
            await self._succeeded(key, rec.trigger, trigger, pr, posted.id, started=None)
            return
        try:
            instructions = await self.instructions(pr)
        except (RateLimited, AuthError):
            raise
        except GitHubError as exc:
            # A transient read (a 500, a reset): retried at the next tick like a poll's read,
            # never a failed attempt - a flaky contents API must not lead to a give-up.
            await self._paused(key, exc, self.ctx.cfg.poll_interval_s)
            return
        if isinstance(instructions, Missing):
            await self._missing(key, pr)
            return
        told = await ctx.store.instructions(rec.instructions_key)
        settings = instructions.repo
        instructions = replace(keep_told(instructions, told and TrustedInstructions(
            told.source, told.text)), repo=settings,
            extras=await turn_extras(ctx, key, rec, settings))
        error = settings.error if settings is not None else None
        if error != rec.config_error:
            await ctx.store.update_pr(key, lambda e: e and e.model_copy(
                update={"config_error": error}))
        refusal = settings.auto_review_refusal(pr.base.ref, pr.title,
                                               [label.name for label in pr.labels]) \
            if settings is not None and trigger.kind in AUTOMATIC else None
        if refusal:
            await self._skipped(key, pr, refusal)
            return
        # Whole seconds, like GitHub's timestamps: a /review posted in the same second as
        # this start is not treated as covered by it.
        started = ctx.clock().replace(microsecond=0)
        stored = InstructionsRecord(source=instructions.source, text=instructions.text)

        def reviewing(e: PrRecord | None) -> PrRecord:
            assert e is not None
            e.started(started, stored.key)
            e.title, e.base_sha, e.base_ref = sanitize_line(pr.title), pr.base.sha, pr.base.ref
            return e
        rec = await ctx.store.start_review(key, stored, reviewing)
        log.info("%s: reviewing head %s (trigger %s)", key, head, trigger)
        await update_summary(ctx, key, reviewing=head, last_reviewed=rec.reviewed_head_sha)
        result = await ctx.runner.review(ctx.acct, pr, str(trigger), instructions,
                                         rec.reviewed_head_sha, rec.requested_by)
        if not result.ok and result.failure in ACCOUNT_FAILURES:
            # A rejected model key (or the MCP server rate limited): no review of any PR can
            # work, so the account pauses and this review stays owed, no attempt counted.
            kind, reason = ACCOUNT_FAILURES[result.failure]
            why = f"{reason}: {redact_secrets(result.error or '')}"[:300]
            # A rate limit: the wait GitHub stated, within bounds (else a short backoff).
            wait = account_pause.github_wait(ctx.client) if kind == "rate_limit" else None
            until = await account_pause.pause(ctx.pause, kind, why, ctx.clock(), wait=wait)
            if kind != "rate_limit":   # (rate limited: no GitHub call until it ends)
                # The PR says its review waits, and why, not "reviewing" for the whole pause.
                await update_summary(ctx, key, reviewing=None,
                                     last_reviewed=rec.reviewed_head_sha,
                                     waiting=Waiting(head, kind, until))
            return
        if result.ok:
            await account_pause.resume(ctx.pause, "model", "rate_limit")
            log.info("%s: review posted (review id %s)", key, result.review_id)
            posted = await find_posted(ctx.client, owner, name, number, trigger,
                                       ctx.acct.identity)
            if posted is not None:
                await self._after_post(key, posted)
            await self._succeeded(key, rec.trigger, trigger, pr, result.review_id, started)
        else:
            log.warning("%s: review failed: %s", key, result.error)
            await self._failed(key, rec.trigger or trigger, head,
                               (result.error or "review failed")[:500])

    async def _after_post(self, key: str, review: Review) -> None:
        """What follows a posted review on the PR, from the review as GitHub has it (so a crash
        before the record says ``reviewed`` runs it again, idempotently): the threads the model
        said are fixed are resolved. A GitHub failure here never fails the posted review: the
        resolution is recorded as owed and the worker retries it (``work/fixes.py``)."""
        await fixes.resolve(self.ctx, key, review)
        await update_summary(self.ctx, key, reviewing=None, last_reviewed=review.commit_id)

    # -- recording outcomes ---------------------------------------------------------------

    async def _succeeded(self, key: str, owed: Trigger | None, trigger: Trigger,
                         pr: PullRequest, review_id: int | None, started: object) -> None:
        now = self.ctx.clock()

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is None:
                return None
            # Still owed if the record moved on meanwhile (a push, a /review after the start).
            # A new head's review and a retarget's count toward max_reviews_per_pr; so does
            # one found on GitHub by its marker (posted before a crash or a failed write: the
            # record still owed it, so it was never counted). A /review never counts.
            e.reviewed(pr.head.sha, now, counted=trigger.automatic,
                       answers=(owed, trigger, self._auto(pr.head.sha)))
            return e
        await self.ctx.store.update_pr(key, apply)

    async def _answered_elsewhere(self, key: str, trigger: Trigger, commit: str | None) -> None:
        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None and e.trigger == trigger:
                e.answered_elsewhere(self._auto(e.head_sha), commit)
            return e
        await self.ctx.store.update_pr(key, apply)

    async def _missing(self, key: str, pr: PullRequest) -> None:
        now = self.ctx.clock()

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is None:
                return None
            e.seen_at(head_sha=pr.head.sha, title=sanitize_line(pr.title),
                      base_sha=pr.base.sha, base_ref=pr.base.ref)
            e.missing_instructions(now, missing_message(self.ctx.acct.instance))
            return e
        await self.ctx.store.update_pr(key, apply)
        repo = pr.base.repo.full_name if pr.base.repo else key
        if repo.lower() not in self._warned:
            self._warned.add(repo.lower())
            log.warning("%s: not reviewed: %s", repo, missing_message(self.ctx.acct.instance))
        log.info("%s: no review instructions; marked missing_instructions", key)

    async def _skipped(self, key: str, pr: PullRequest, why: str) -> None:
        now = self.ctx.clock()
        note = f"not reviewed automatically: {why} ({REPO_CONFIG_PATH}); /review still works"

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None:
                e.skipped(pr.head.sha, now, note)
            return e
        await self.ctx.store.update_pr(key, apply)
        log.info("%s: %s", key, note)

    async def _closed(self, key: str, merged: bool = False) -> None:
        now = self.ctx.clock()

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None:
                e.closed(now, merged)
            return e
        await self.ctx.store.update_pr(key, apply)
        log.info("%s: closed; its review is no longer owed", key)

    async def _paused(self, key: str, exc: GitHubError, wait_s: float) -> None:
        """The review waits ``wait_s`` without counting an attempt (a rate limit, a
        transient read of the instructions)."""
        from datetime import timedelta

        until = self.ctx.clock() + timedelta(seconds=wait_s)

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None and e.status == "reviewing":
                e.paused(until, short_error(exc))
            return e
        await self.ctx.store.update_pr(key, apply)
        log.warning("%s: %s; review waits until %s", key, exc, until.isoformat())

    async def _failed(self, key: str, trigger: Trigger, head: str | None, error: str) -> None:
        now = self.ctx.clock()
        limit = self.ctx.cfg.review.max_attempts

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is None or e.status != "reviewing":
                return e
            sha = head or e.head_sha
            if e.trigger not in (trigger, None) and e.trigger != self._auto(sha):
                return e   # the owed work changed during the attempt: it starts afresh
            if e.failed(sha, now, error, limit, trigger):
                log.error("%s: gave up reviewing head %s after %d attempts: %s", key, sha,
                          e.fail_count, error)
            return e
        await self.ctx.store.update_pr(key, apply)
