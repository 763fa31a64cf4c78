"""The one review of one PR at one head, for every front end (daemon, CI, the eval's daemon).

Record-free: it reads everything from GitHub and writes only there, and returns one typed
outcome. The daemon (``work/review.py``) maps the outcome to ``PrRecord`` transitions; CI
(``ci/command.py``) maps it to an exit code and a step summary. Its steps, in order:

1. read the PR; a closed PR is ``Closed``;
2. the draft rule: a draft is reviewed only for an automatic trigger whose base's
   ``.github/dsh-review.toml`` says ``auto_review.drafts = true`` (else ``DraftWaits``);
3. what was already posted, by the bot's own marker: the trigger's review on this head is
   ``AlreadyPosted``; one on an older head answered its trigger elsewhere and the current head
   gets the front end's own trigger (``ReviewJob.fallback``); an automatic trigger is also
   answered by any complete review of this head (one review per head, not per CI run);
4. the trusted instructions, repository config and guideline files from the base
   (``MissingInstructions`` when there are none and they are required); what the repository
   config refuses automatically is ``Refused``;
5. the ``Reviewer`` (single or team, one protocol) posts one review (``Failed`` when it
   cannot, with ``account`` set when no PR of the account could succeed);
6. the after-post work on the posted review: the threads it names as fixed are resolved and
   the summary comment is updated (``Posted``).

Between steps the front end is told through ``Hooks`` (the daemon records the start of the
review there; CI only logs), so nothing about reviewing a PR is written twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from ..core.sanitizer import redact_secrets
from ..core.session_key import PrRef
from ..core.triggers import (
    AUTOMATIC,
    BotIdentity,
    Trigger,
    fixed_threads,
    is_bot_review,
    posted_answer,
    posted_trigger,
)
from ..github.errors import AuthError, BadCredentials, GitHubError, NotFound, RateLimited
from ..github.models import PullRequest, Review
from ..github.review_submit import find_posted
from ..github.threads import ThreadState
from ..reviewers.team import verdict
from ..turn.extras import TurnExtras
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
from .context import ReviewDeps, short_error
from .fixes import try_resolve
from .summary import update_summary

log = logging.getLogger(__name__)

# The trusted instructions file of the base repository (the only place it is named).
INSTRUCTIONS_PATH = ".github/review_instructions.md"

# A turn's failure that is the account's, not the PR's: (pause kind, what the pause says).
ACCOUNT_FAILURES = {
    "auth": ("model", "the model provider rejected the API key"),
    "rate_limit": ("rate_limit", "github-mcp-server is rate limited by GitHub"),
}

# Triggers answered by any complete review of the bot on the head: one review per head. A
# retarget is not (the same head on a new base is reviewed again), nor an explicit /review.
ONCE_PER_HEAD = frozenset({"auto", "ci"})


def missing_message(instance: str) -> str:
    """What ``status``, the web UI, CI and the log say about missing instructions: the file to
    add and the keys that change it."""
    return (f"no {INSTRUCTIONS_PATH} in the base repository and "
            f"plugins.{instance}.accounts[].review.require_instructions = true: add the file, "
            "or set review.default_instructions, or unset require_instructions to review "
            "with the built-in guidance")


# -- the job and its outcomes -----------------------------------------------------------------


@dataclass(frozen=True)
class ReviewJob:
    """One review to do: the PR (in its base repository), the trigger it answers, and what
    the front end knows of earlier reviews."""

    ref: PrRef
    trigger: Trigger
    # The head of the session's last completed review (None: a first review).
    previous_head: str | None = None
    requested_by: str | None = None
    # The instructions an earlier turn of this PR was told (kept when unchanged, so the
    # system prompt stays byte-stable).
    told: TrustedInstructions | None = None
    # The trigger for the current head when ``trigger`` was answered on another head
    # (the daemon: the head's automatic review; CI: None, the job's trigger is done).
    fallback: Trigger | None = None
    # Earlier triggers of this very review (CI: the run's earlier attempts).
    same_review: tuple[Trigger, ...] = ()


@dataclass(frozen=True)
class Closed:
    merged: bool


@dataclass(frozen=True)
class DraftWaits:
    """A draft not reviewed now: it waits until it is ready for review."""

    pr: PullRequest


@dataclass(frozen=True)
class MissingInstructions:
    pr: PullRequest


@dataclass(frozen=True)
class Refused:
    """The repository config refuses an automatic review (``/review`` still works)."""

    pr: PullRequest
    why: str
    settings: RepoSettings | None = None

    @property
    def note(self) -> str:
        return (f"not reviewed automatically: {self.why} ({REPO_CONFIG_PATH}); "
                "/review still works")


@dataclass(frozen=True)
class Posted:
    """A review is on GitHub for ``trigger`` (``posted_now``: by this run; else found by its
    marker). ``fix_error``: the fixed threads could not all be resolved (owed, retried)."""

    pr: PullRequest
    review: Review
    trigger: Trigger
    posted_now: bool = True
    verdict: str | None = None
    incomplete: tuple[str, ...] = ()
    fix_error: str | None = None
    # Per team member, how its turn went (CI's log lines); empty for a single reviewer.
    notes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AlreadyPosted(Posted):
    """The trigger's review (or, for an automatic trigger, a complete review of this head) was
    on GitHub before this run: nothing ran, only the after-post work."""


@dataclass(frozen=True)
class Failed:
    """Nothing was posted. ``account``: the account's problem, not the PR's ("github": the
    token is rejected; "model": the model key is; "rate_limit": GitHub limits the MCP
    server) — the front end pauses the account and counts no attempt. ``wait_s``: a
    transient problem (a rate limit, a flaky read) — retried after it, no attempt counted."""

    error: str
    trigger: Trigger
    pr: PullRequest | None = None
    account: str | None = None
    wait_s: float | None = None
    # The head a failed turn ran on (None: the run failed before a turn).
    head: str | None = None


Outcome = Closed | DraftWaits | MissingInstructions | Refused | Posted | Failed


class Hooks:
    """What the front end does between the procedure's steps; the defaults do nothing."""

    async def answered_elsewhere(self, trigger: Trigger, commit: str | None) -> None:
        """``trigger`` was answered by a review on another head (``commit``)."""

    async def extras(self, pr: PullRequest, settings: RepoSettings | None) -> TurnExtras | None:
        """What the front end adds to this turn (``turn.extras``: lessons, ``/review full``,
        the second look); None: nothing."""
        return None

    async def settings(self, pr: PullRequest, settings: RepoSettings | None) -> None:
        """The repository config as read from the base (its ``error`` when invalid)."""

    async def starting(self, pr: PullRequest, instructions: TrustedInstructions,
                       trigger: Trigger) -> None:
        """The reviewer is about to run (nothing has been posted for ``trigger``)."""


# -- the procedure ----------------------------------------------------------------------------


class ReviewPr:
    """Reviews one PR at one head: ``await ReviewPr(deps).run(job)``. Holds only what it logged
    once per repository, so one instance serves an account for the process's life."""

    def __init__(self, deps: ReviewDeps):
        self.deps = deps
        self._warned: set[object] = set()   # (repository, problem) already logged

    # -- reading the base ---------------------------------------------------------------------

    async def base_file(self, pr: PullRequest, path: str) -> str | None:
        """A file of the BASE repository (branch, then SHA; never the head); None at 404."""
        base = pr.base.repo
        assert base is not None
        for ref in (pr.base.ref, pr.base.sha):
            try:
                return await self.deps.client.get_file_text(base.owner.login, base.name, path,
                                                            ref)
            except NotFound:
                continue
        return None

    async def base_dir(self, pr: PullRequest, path: str) -> list[str]:
        base = pr.base.repo
        assert base is not None
        for ref in (pr.base.ref, pr.base.sha):
            try:
                return sorted(await self.deps.client.list_dir(base.owner.login, base.name,
                                                              path, ref))
            except NotFound:
                continue
        return []

    async def repo_settings(self, pr: PullRequest) -> tuple[RepoSettings, dict[str, str]]:
        """``.github/dsh-review.toml`` and the guideline files, from the base. An invalid
        config is ignored whole; its error goes to the log (once per text) and the outcome."""
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
        if self.deps.cfg.review.conventional_guidelines:
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

    async def instructions(self, pr: PullRequest) -> TrustedInstructions | None:
        """The base's instructions plus what its repository config and guideline files add
        (``turn/repo_config.py``); the per-turn settings ride along in ``.repo``. None: there
        are none and ``review.require_instructions`` is set. Raises when GitHub fails otherwise
        than with a 404."""
        found = await self._instructions(pr)
        if found is None:
            return None
        settings, guidelines = await self.repo_settings(pr)
        extra = guidelines_section(guidelines, settings.config)
        text = found.text + ("\n\n" + extra if extra else "")
        return TrustedInstructions(found.source, text, repo=settings)

    async def _instructions(self, pr: PullRequest) -> TrustedInstructions | None:
        base = pr.base.repo
        assert base is not None
        for ref in (pr.base.ref, pr.base.sha):
            try:
                text = await self.deps.client.get_file_text(base.owner.login, base.name,
                                                            INSTRUCTIONS_PATH, ref)
            except NotFound:
                continue
            return TrustedInstructions(f"{base.full_name}@{ref}:{INSTRUCTIONS_PATH}", text)
        review = self.deps.cfg.review
        if review.default_instructions.strip():
            return TrustedInstructions(f"dsh.toml:plugins.{self.deps.acct.instance}.accounts"
                                       f"[{self.deps.cfg.name}].review.default_instructions",
                                       review.default_instructions)
        if review.require_instructions:
            return None
        return builtin_guidance()

    # -- what is already on the PR ------------------------------------------------------------

    @staticmethod
    def posted_for(reviews: list[Review], me: BotIdentity, trigger: Trigger, head: str
                   ) -> Review | None:
        """Of the PR's ``reviews``: the bot's review for ``trigger``, else (``ONCE_PER_HEAD``)
        a complete review of the bot on ``head``: a re-run, a second event or a concurrent run
        never posts another."""
        found = posted_answer(reviews, me, trigger)
        if found is not None or trigger.kind not in ONCE_PER_HEAD:
            return found
        for r in reviews:
            if r.state == "PENDING" or r.commit_id != head:
                continue   # (checked first: a PR's every review passes here on every run)
            answered = posted_trigger(r, me)
            if answered is None or answered.account != trigger.account:
                continue
            line = verdict.verdict_of(r.body)
            # A team review that failed closed is no complete review: a re-run retries it.
            if not (line and "did not complete" in line):
                found = r
        return found

    # -- the review ---------------------------------------------------------------------------

    async def run(self, job: ReviewJob, hooks: Hooks | None = None) -> Outcome:
        """The whole review; every GitHub failure becomes ``Failed``. Anything else (a local
        failure such as a full disk, a bug, a front end's hook refusing) is raised: the front
        end decides (the daemon counts a failed attempt, CI exits with its error)."""
        hooks = hooks or Hooks()
        pr: PullRequest | None = None
        try:
            ref = job.ref
            pr = await self.deps.client.get_pull(ref.owner, ref.name, ref.number)
            return await self._run(job, pr, hooks)
        except RateLimited as exc:
            return Failed(short_error(exc), job.trigger, pr, wait_s=exc.wait_s)
        except BadCredentials as exc:
            # The token, not this PR: the account pauses, no attempt is counted.
            return Failed(short_error(exc), job.trigger, pr, account="github")
        except GitHubError as exc:
            return Failed(short_error(exc), job.trigger, pr)

    async def _transient(self, job: ReviewJob, pr: PullRequest, exc: GitHubError) -> Failed:
        # A transient read (a 500, a reset): retried at the next poll like a poll's read,
        # never a failed attempt - a flaky contents API must not lead to a give-up.
        return Failed(short_error(exc), job.trigger, pr, wait_s=self.deps.cfg.poll_interval_s)

    async def _run(self, job: ReviewJob, pr: PullRequest, hooks: Hooks) -> Outcome:
        trigger, ref = job.trigger, job.ref
        if pr.state != "open":
            return Closed(merged=pr.merged_at is not None)
        if pr.draft:
            try:
                reviewed = trigger.kind in AUTOMATIC | {"ci"} and await self.reviews_drafts(pr)
            except (RateLimited, AuthError):
                raise
            except GitHubError as exc:
                return await self._transient(job, pr, exc)
            if not reviewed:
                # A draft whose base does not say auto_review.drafts = true, or work owed
                # before it turned draft (a /review just before): nothing runs or posts
                # while it is a draft.
                return DraftWaits(pr)
        head = pr.head.sha
        if trigger.kind == "auto" and trigger.ident != head:
            trigger = Trigger.auto(trigger.account, head)   # the head the review will see
        me = self.deps.acct.identity
        # One listing of the PR's reviews answers both questions below.
        reviews = await self.deps.client.list_reviews(ref.owner, ref.name, ref.number)
        posted = posted_answer(reviews, me, trigger)
        if posted is not None and posted.commit_id != head:
            log.info("%s: trigger %s was answered on %s", job.ref, trigger,
                     (posted.commit_id or "?")[:12])
            await hooks.answered_elsewhere(trigger, posted.commit_id)
            if job.fallback is None:
                return await self._after_post(ref, AlreadyPosted(
                    pr, posted, trigger, False, verdict.verdict_of(posted.body)))
            trigger = job.fallback if job.fallback.kind != "auto" \
                else Trigger.auto(job.fallback.account, head)
            posted = None
        if posted is None:
            posted = self.posted_for(reviews, me, trigger, head)
        if posted is not None:
            log.info("%s: review for %s was already posted (%s)", job.ref, trigger, posted.id)
            return await self._after_post(ref, AlreadyPosted(
                pr, posted, trigger, False, verdict.verdict_of(posted.body)))
        try:
            instructions = await self.instructions(pr)
        except (RateLimited, AuthError):
            raise
        except GitHubError as exc:
            return await self._transient(job, pr, exc)
        if instructions is None:
            repo = (pr.base.repo.full_name if pr.base.repo else job.ref.repo).lower()
            if repo not in self._warned:
                self._warned.add(repo)
                log.warning("%s: not reviewed: %s", repo, missing_message(
                    self.deps.acct.instance))
            return MissingInstructions(pr)
        settings = instructions.repo
        instructions = replace(keep_told(instructions, job.told), repo=settings,
                               extras=await hooks.extras(pr, settings))
        await hooks.settings(pr, settings)
        refusal = settings.auto_review_refusal(pr.base.ref, pr.title,
                                               [label.name for label in pr.labels]) \
            if settings is not None and trigger.kind in AUTOMATIC | {"ci"} else None
        if refusal:
            return Refused(pr, refusal, settings)
        await hooks.starting(pr, instructions, trigger)
        log.info("%s: reviewing head %s (trigger %s)", job.ref, head, trigger)
        result = await self.deps.runner.review(
            self.deps.acct, pr, trigger, instructions, job.previous_head, job.requested_by,
            same_review=job.same_review)
        if not result.ok:
            account = ACCOUNT_FAILURES.get(result.failure or "")
            if account is not None:
                # A rejected model key (or the MCP server rate limited): no review of any PR
                # can work, so the account pauses and this review stays owed.
                kind, reason = account
                why = f"{reason}: {redact_secrets(result.error or '')}"[:300]
                return Failed(why, trigger, pr, account=kind)
            log.warning("%s: review failed: %s", job.ref, result.error)
            return Failed((result.error or "review failed")[:500], trigger, pr, head=head)
        log.info("%s: review posted (review id %s)", job.ref, result.review_id)
        review = await find_posted(self.deps.client, ref.owner, ref.name, ref.number, trigger,
                                  self.deps.acct.identity)
        if review is None:
            # Posted, but not listed yet: the after-post work waits for the next run.
            review = Review(id=result.review_id or 0, commit_id=head, state="COMMENTED")
            return Posted(pr, review, trigger, result.posted_now, result.verdict,
                          tuple(result.incomplete), notes=dict(result.notes))
        return await self._after_post(ref, Posted(pr, review, trigger, result.posted_now,
                                                  result.verdict, tuple(result.incomplete),
                                                  notes=dict(result.notes)),
                                      read=result.thread_states)

    async def _after_post(self, ref: PrRef, outcome: Posted,
                          read: dict[int, ThreadState] | None = None) -> Posted:
        """What follows a posted review on the PR, from the review as GitHub has it (so a run
        after a crash does it again, idempotently): the threads the review names as fixed are
        resolved, then the summary comment. A GitHub failure resolving never fails the posted
        review: it comes back as ``fix_error`` (the daemon owes and retries it). Rate limits
        and rejected credentials are raised: they pause the work as a whole.

        ``read``: the thread states the review turn read moments ago. The review only added
        threads (open ones), so unless it also resolved some, the summary starts from these
        instead of asking GraphQL for every thread of the PR again (a person's resolution
        during the turn shows at the next update)."""
        me = self.deps.acct.identity
        fix_error = await try_resolve(self.deps.client, me, ref, outcome.review)
        await update_summary(self.deps, ref, reviewing=None,
                             last_reviewed=outcome.review.commit_id,
                             states=read if not fixed_threads(outcome.review, me) else None)
        return replace(outcome, fix_error=fix_error)


async def last_reviewed_head(deps: ReviewDeps, owner: str, repo: str, number: int
                             ) -> str | None:
    """The head of the last review this bot posted (found by its marker): what a front end
    without a work record (CI) knows of the session's previous review."""
    ours = [r for r in await deps.client.list_reviews(owner, repo, number)
            if r.state != "PENDING" and is_bot_review(r, deps.acct.identity)]
    return ours[-1].commit_id if ours else None
