"""One team review of a PR: personas read concurrently, the coordinator writes one review.

Each persona runs in its own session (``…:pr:<n>:persona:<name>``, read tools only) and answers
with a report; the coordinator session (``…:persona:coordinator``) gets this run's reports as
its user turn and is the single writer: one COMMENT review with inline comments, its verdict
line enforced by ``verdict.finalize``. If the coordinator posts nothing, code posts a review
that carries the reports and fails closed, so every run leaves exactly one review (found again
by its trigger marker after a crash or a re-run).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from dsh_harness import Agent, Harness, StorageError

from ...core.sanitizer import redact_secrets, sanitize
from ...core.session_key import PrKey
from ...core.triggers import Trigger, meta_trigger, turn_meta
from ...github.account import ConnectedAccount
from ...github.errors import GitHubError
from ...github.guard import GuardTurn
from ...github.models import PullRequest
from ...github.review_submit import Draft, find_posted, post_review
from ...turn.answered import committed_answer
from ...turn.prompts import TrustedInstructions, TurnMessage, chat_message
from ..base import TurnResult
from ..inputs import (
    WorldInputs,
    facts,
    finding_limits,
    review_turn_message,
    scope_for,
    session_key,
)
from ..models import ModelChoice
from ..second_look import SecondLook, holds, post_held
from . import verdict
from .attempts import AttemptResult, Outcome, reported_before, run_attempts
from .messages import Report, coordinator_message
from .personas import COORDINATOR

log = logging.getLogger(__name__)

# None: nothing for this session to look at in this run (no model request).
MessageFor = Callable[[Agent, GuardTurn], Awaitable[str | TurnMessage | None]]


@dataclass
class TeamResult:
    posted: bool
    review_id: int | None = None
    verdict: str | None = None
    failed: list[str] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    error: str | None = None
    posted_now: bool = False
    # "auth": the model provider rejected the key, so nothing was posted (no fallback review:
    # the account pauses instead, see work/pause.py).
    failure: str | None = None

    @property
    def ok(self) -> bool:
        """A review is on GitHub and every persona and the coordinator completed."""
        return self.posted and not self.failed


class TeamReview:
    def __init__(self, harness: Harness, models: ModelChoice):
        self.harness, self.models = harness, models
        self.second_look = SecondLook(harness, models)

    async def review(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                     instructions: TrustedInstructions | None, previous_head: str | None,
                     requested_by: str | None = None,
                     personas: list[str] | None = None,
                     same_review: tuple[Trigger, ...] = ()) -> TeamResult:
        """``same_review``: earlier triggers of this very review (CI: the run's earlier
        attempts) whose completed persona reports of this head are reused."""
        team = acct.config.review.team
        names = list(personas if personas is not None else team.personas)
        base = pr.base.repo
        assert base is not None
        already = await find_posted(acct.client, base.owner.login, base.name, pr.number,
                                    trigger, acct.identity)
        if already is not None:
            # Posted before a crash or by an earlier attempt of this job: nothing to run.
            found = verdict.verdict_of(already.body)
            failed = ["(an earlier attempt)"] if found and "did not complete" in found else []
            return TeamResult(True, already.id, found, failed)
        await self.models.resolve()
        key = session_key(acct, pr)
        # Every session of this run builds its world from exactly these instructions.
        limit = asyncio.Semaphore(team.max_parallel)

        async def one(name: str) -> tuple[str, Outcome]:
            async with limit:
                return name, await self._persona(acct, key.with_persona(name), pr, trigger,
                                                 instructions, previous_head, requested_by,
                                                 (trigger, *same_review))
        outcomes = dict(await asyncio.gather(*(one(n) for n in names)))
        local = [o for o in outcomes.values() if o.failure == "storage"]
        if local:
            # A session log this machine could not write (a full disk) is no persona that
            # "did not complete": the review is tried again later (no attempt counted), and
            # the reports that completed are reused from their logs.
            raise StorageError(f"{key.session_id}: {local[0].error}")
        if outcomes and all(o.failure == "auth" for o in outcomes.values()):
            # The key is rejected: a fallback review would tell every PR so, publicly.
            first = next(iter(outcomes.values()))
            return TeamResult(False, error=first.error, failure="auth", outcomes=outcomes)
        reports = [Report(n, outcomes[n].text if outcomes[n].ok else None,
                          outcomes[n].error, idle=outcomes[n].idle) for n in names]
        failed = [r.persona for r in reports if r.text is None]
        result = await self._coordinate(acct, key, pr, trigger, instructions, previous_head,
                                        requested_by, reports, failed)
        result.outcomes.update(outcomes)
        return result

    async def chat(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                   instructions: TrustedInstructions | None,
                   message: str | TurnMessage) -> AttemptResult:
        """A /bot question, answered by the coordinator, who holds the team's reports (both
        modes, so the conversation is the same session wherever it continues)."""
        key = session_key(acct, pr)
        # Answered in the log but never posted (the process died in between): that answer,
        # not the same question asked twice in the coordinator's history.
        answer = await committed_answer(
            self.harness, key.with_persona(COORDINATOR).session_id,
            lambda meta: meta.get("flow") == "chat" and meta_trigger(meta) == trigger)
        if answer is not None:
            return AttemptResult(True, answer)
        await self.models.resolve()
        result, _ = await self.run_turn(acct, key.with_persona(COORDINATOR), pr, instructions,
                                        self.models.candidates()[0], "chat", trigger, message,
                                        acct.config.review.turn_timeout_s)
        return result

    # -- one session's attempt ------------------------------------------------------------------

    async def run_turn(self, acct: ConnectedAccount, key: PrKey, pr: PullRequest,
                       instructions: TrustedInstructions | None, model: str | None,
                       flow: str, trigger: Trigger, message: str | TurnMessage | MessageFor,
                       timeout_s: float, finalize=None,
                       start_review: bool = False) -> tuple[AttemptResult, GuardTurn | None]:
        """One attempt of one session's turn, on a fresh agent whose world is built from
        ``instructions`` and this attempt's ``model``; ``message`` may be built from the opened
        agent and the guard turn (the prepared diff needs the conversation). ``start_review``:
        the turn begins with its pending review started (the coordinator's)."""
        sid = key.session_id
        deadline = asyncio.get_running_loop().time() + timeout_s
        turn: GuardTurn | None = None
        # A fresh agent per attempt: the world (and its model) is rebuilt and the transcript
        # replayed from the log, never from a failed attempt's memory.
        await self.harness.agents.evict(sid)
        try:
            async with asyncio.timeout_at(deadline):
                meta = {"plugin": "dsh-github-reviewer", "account": acct.key,
                        "owner": key.owner, "repo": key.repo, "number": key.number,
                        "persona": key.persona, "url": pr.html_url}
                agent = await self.harness.agents.get_or_open(
                    sid, meta=meta, inputs=WorldInputs(instructions, model),
                    fence=acct.client.fence)  # the PR lease's fence guards the appends
                turn = GuardTurn(scope=scope_for(pr, flow, trigger), client=acct.client,
                                 runtime=acct.mcp, token=await acct.auth.token(),
                                 me=acct.identity, finalize_body=finalize,
                                 limits=finding_limits(acct, instructions),
                                 hold_post=holds(instructions, flow))
                if start_review:
                    # The coordinator writes exactly one review per run: a model request only
                    # to call ``create`` (whose answer is fixed) would add nothing.
                    turn.start_draft()
                acct.guard.begin(sid, turn)
                try:
                    text = (message if isinstance(message, (str, TurnMessage))
                            else await message(agent, turn))
                    if text is None:
                        return AttemptResult(True, "", idle=True), turn
                    told = {}
                    if isinstance(text, TurnMessage):
                        text, told = text.text, text.meta
                    # A persona's empty answer is no report: it must not enter the replayed
                    # transcript either (only completed attempts are memory).
                    outcome = await agent.followup(
                        text, deadline=deadline, require_text=flow == "persona",
                        meta=turn_meta(flow, trigger, persona=key.persona, head=pr.head.sha,
                                       **told))
                finally:
                    await acct.guard.end(sid)
        except TimeoutError:
            # Personas share the persona deadline; the coordinator has the turn's own
            # (review.turn_timeout_s): the message names the limit that was hit.
            limit = ("the persona deadline (review.team.persona_timeout_s) passed"
                     if flow == "persona" else
                     f"the {key.persona or 'review'}'s turn deadline (review.turn_timeout_s) "
                     "passed")
            return AttemptResult(False, error=limit), turn
        finally:
            await self.harness.agents.evict(sid)
        if not outcome.ok:
            return AttemptResult(False, outcome.text,
                                 f"turn ended: {outcome.reason}: {outcome.error}",
                                 failure=outcome.failure), turn
        return AttemptResult(True, outcome.text), turn

    async def _persona(self, acct: ConnectedAccount, key: PrKey, pr: PullRequest, trigger: Trigger,
                       instructions: TrustedInstructions | None, previous_head: str | None,
                       requested_by: str | None,
                       triggers: tuple[Trigger, ...]) -> Outcome:
        team = acct.config.review.team
        # A restart after a crash (or a CI re-run) runs the same review again: a persona that
        # already reported on this head for it keeps that report. Asking again would make it
        # say "nothing new" (its report is in its conversation), and the coordinator would
        # then post a review without those findings.
        earlier = await reported_before(self.harness, key.session_id, triggers, pr.head.sha)
        if earlier is not None:
            return Outcome(True, earlier, None, ["reused: reported before a restart"])

        async def message(agent: Agent, turn: GuardTurn) -> TurnMessage | None:
            # A persona reviews the same material as the single reviewer.
            prepared = await review_turn_message(acct, pr, previous_head, requested_by, agent,
                                                 turn, instructions, writer=False)
            if prepared.nothing_new and requested_by is None:
                # No code it has not seen (a merge of the base branch, an excluded file, the
                # same head): its last report stands, and a request would only bill its whole
                # conversation for "No findings.". The coordinator, who writes the review and
                # reads people's feedback, still runs; a person's /review asks everyone.
                return None
            return prepared

        async def attempt(model: str | None) -> AttemptResult:
            result, _ = await self.run_turn(acct, key, pr, instructions, model, "persona",
                                            trigger, message, team.persona_timeout_s)
            if result.ok and not result.idle and not (result.text or "").strip():
                result = AttemptResult(False, error="empty answer")
            return result
        return await run_attempts(key.session_id, self.models.candidates(),
                                  team.attempts_per_model, attempt)

    # -- the coordinator ------------------------------------------------------------------------

    async def _coordinate(self, acct: ConnectedAccount, key: PrKey, pr: PullRequest,
                          trigger: Trigger, instructions: TrustedInstructions | None,
                          previous_head: str | None, requested_by: str | None,
                          reports: list[Report], failed: list[str]) -> TeamResult:
        review = acct.config.review

        async def message(agent: Agent, turn: GuardTurn) -> TurnMessage:
            # The coordinator reads the same prepared input as the personas (and its own open
            # threads, so it can name the ones this push fixed), then the reports.
            prepared = await review_turn_message(acct, pr, previous_head, requested_by, agent,
                                                 turn, instructions)
            return TurnMessage(coordinator_message(prepared.text, reports), prepared.meta)
        ckey = key.with_persona(COORDINATOR)
        posted: list[GuardTurn] = []
        final_bodies: list[str] = []

        def finalize(body: str) -> str:
            final_bodies.append(verdict.finalize(body, failed))
            return final_bodies[-1]

        async def attempt(model: str | None) -> AttemptResult:
            result, turn = await self.run_turn(acct, ckey, pr, instructions, model, "review",
                                               trigger, message, review.turn_timeout_s,
                                               finalize, start_review=True)
            if turn is not None and turn.held_body is not None and turn.submitted is None:
                # The coordinator submitted: the second look checks its draft, then it posts.
                try:
                    await post_held(self.second_look, turn, acct, pr, trigger, instructions)
                except GitHubError as exc:
                    return AttemptResult(False, error=f"posting the review failed: {exc}")
            if turn is not None and turn.submitted is not None:
                posted.append(turn)
                return AttemptResult(True, result.text or "")
            if result.ok:
                return AttemptResult(False, error="the coordinator finished without "
                                                  "submitting a review")
            return result
        outcome = await run_attempts(ckey.session_id, self.models.candidates(),
                                     review.team.attempts_per_model, attempt,
                                     accept=lambda r: r.ok)
        if posted:
            turn = posted[-1]
            assert turn.submitted is not None
            return TeamResult(True, turn.submitted.id,
                              verdict.verdict_of(final_bodies[-1] if final_bodies else
                                                 turn.submitted.body), failed, reports,
                              {COORDINATOR: outcome}, posted_now=turn.posted_now)
        if outcome.failure == "storage":
            raise StorageError(f"{ckey.session_id}: {outcome.error}")
        if outcome.failure == "auth":
            return TeamResult(False, error=outcome.error, failure="auth",
                              outcomes={COORDINATOR: outcome})
        return await self._fallback(acct, pr, trigger, reports, [*failed, COORDINATOR],
                                    outcome)

    async def _fallback(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                        reports: list[Report], failed: list[str], outcome: Outcome) -> TeamResult:
        """The coordinator posted nothing: post the reports ourselves, failing closed."""
        base = pr.base.repo
        assert base is not None
        parts = ["The review team's coordinator did not complete, so the reviewers' reports "
                 "are posted as they are, without inline comments."]
        for r in reports:
            if r.idle:
                parts.append(f"### {r.persona}\n\nNothing new to review since its last report.")
            elif r.text is not None:
                parts.append(f"### {r.persona}\n\n{sanitize(r.text).strip()}")
        body = verdict.finalize("\n\n".join(parts), failed)
        try:
            review, now = await post_review(acct.client, base.owner.login, base.name,
                                            pr.number, Draft(commit_id=pr.head.sha), body,
                                            trigger, acct.identity)
        except Exception as exc:
            log.exception("%s#%d: posting the fallback review failed", base.full_name, pr.number)
            return TeamResult(False, None, verdict.failed_verdict(failed), failed, reports,
                              {COORDINATOR: outcome},
                              error=f"{type(exc).__name__}: {redact_secrets(str(exc))}")
        return TeamResult(True, review.id, verdict.verdict_of(body), failed, reports,
                          {COORDINATOR: outcome}, posted_now=now)


class TeamReviewer:
    """``review.team``: the team as the account's ``Reviewer`` (``reviewers.base``)."""

    def __init__(self, harness: Harness, models: ModelChoice):
        self.team = TeamReview(harness, models)

    async def review(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                     instructions: TrustedInstructions | None, previous_head: str | None,
                     requested_by: str | None = None,
                     same_review: tuple[Trigger, ...] = ()) -> TurnResult:
        """Personas read, the coordinator posts. A review that failed closed is still the
        trigger's one review: the verdict in it blocks the merge, and running the same trigger
        again would only find it posted."""
        # The repository config's personas replace the account's for this repository.
        repo = instructions.repo if instructions is not None else None
        personas = list(repo.config.personas) if repo is not None and repo.config.personas \
            else None
        result = await self.team.review(acct, pr, trigger, instructions, previous_head,
                                        requested_by, personas=personas,
                                        same_review=same_review)
        notes = {name: ("completed" if o.ok else "did not complete")
                 + f" ({'; '.join(o.attempts) or 'no attempt'})"
                 for name, o in result.outcomes.items()}
        if not result.posted:
            return TurnResult(False, result.error or "the review team posted no review",
                              failure=result.failure, notes=notes)
        if result.failed:
            log.warning("%s#%d: review posted but failed closed: %s did not complete",
                        pr.base.repo.full_name if pr.base.repo else "?", pr.number,
                        ", ".join(result.failed))
        return TurnResult(True, review_id=result.review_id, posted_now=result.posted_now,
                          text=result.verdict, verdict=result.verdict,
                          incomplete=list(result.failed), notes=notes)

    async def chat(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                   instructions: TrustedInstructions | None, author: str, message: str,
                   path: str | None, line: int | None) -> TurnResult:
        """The coordinator answers: it holds the reports (as in CI mode)."""
        answer = await self.team.chat(acct, pr, trigger, instructions,
                                      chat_message(facts(pr), author, message, path, line))
        result = TurnResult(answer.ok, answer.error, answer.text, failure=answer.failure)
        if result.ok:
            result.text = redact_secrets(result.text or "").strip()
        return result
