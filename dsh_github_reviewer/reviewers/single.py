"""Drive one turn of a PR's session: a review or a /bot chat.

The turn deadline covers agent set-up too: it starts before the session is opened and
the same absolute deadline bounds the agent's turn. The guard's per-turn state is registered
around the turn, so tools work only while the runner says so, and the MCP process it starts is
closed on every path.
"""

from __future__ import annotations

import asyncio
import logging

from dsh_harness import Agent, Harness, StorageError

from ..core.failures import local_failure, log_failure
from ..core.sanitizer import redact_secrets
from ..core.session_key import PrKey
from ..core.triggers import Trigger, meta_trigger, turn_meta
from ..github.account import ConnectedAccount
from ..github.errors import GitHubError
from ..github.guard import GuardTurn
from ..github.models import PullRequest
from ..turn.answered import committed_answer
from ..turn.prompts import TrustedInstructions, TurnMessage, chat_message, system_prompt
from .base import TurnResult
from .inputs import (
    WorldInputs,
    facts,
    finding_limits,
    review_turn_message,
    scope_for,
    session_key,
)
from .models import ModelChoice
from .second_look import SecondLook, holds, post_held

log = logging.getLogger(__name__)


class SingleReviewer:
    """One session per PR reviews it and answers its ``/bot`` questions (``reviewers.base``)."""

    def __init__(self, harness: Harness, models: ModelChoice):
        self.harness, self.models = harness, models
        self.second_look = SecondLook(harness, models)

    async def _agent(self, acct: ConnectedAccount, key: PrKey, pr: PullRequest,
                     instructions: TrustedInstructions | None) -> Agent:
        inputs = WorldInputs(instructions, await self.models.resolve())
        meta = {"plugin": "dsh-github-reviewer", "account": acct.key,
                "owner": key.owner, "repo": key.repo, "number": key.number, "url": pr.html_url}
        # The PR lease's fence (replicas) guards the session's appends as it guards the writes.
        fence = acct.client.fence
        agent = await self.harness.agents.get_or_open(key.session_id, meta=meta, inputs=inputs,
                                                      fence=fence)
        wanted = system_prompt(instructions)
        if agent.world.system_prompt != wanted and not agent.busy:
            # The trusted instructions changed: a new world (one prefix-cache miss, then stable).
            await self.harness.agents.evict(key.session_id)
            agent = await self.harness.agents.resume(key.session_id, inputs=inputs,
                                                     fence=fence)
        return agent

    async def _turn(self, acct: ConnectedAccount, pr: PullRequest, flow: str, trigger: Trigger,
                    instructions: TrustedInstructions | None, message_for) -> tuple[
                        GuardTurn | None, TurnResult]:
        key = session_key(acct, pr)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + acct.config.review.turn_timeout_s
        turn: GuardTurn | None = None
        try:
            async with asyncio.timeout_at(deadline):
                agent = await self._agent(acct, key, pr, instructions)
                turn = GuardTurn(scope=scope_for(pr, flow, trigger), client=acct.client,
                                 runtime=acct.mcp, me=acct.identity,
                                 limits=finding_limits(acct, instructions),
                                 token=await acct.auth.token(valid_for_s=deadline - loop.time()),
                                 hold_post=holds(instructions, flow))
                message = await message_for(pr, agent, turn)
                told, states = {}, None
                if isinstance(message, TurnMessage):
                    message, told, states = message.text, message.meta, message.thread_states
                acct.guard.begin(key.session_id, turn)
                try:
                    # The PR as this turn saw it, for the web UI's PR pages (not sent to the
                    # model: turn meta never reaches the prompt).
                    about = {"title": pr.title, "author": pr.user.login, "state": pr.state,
                             "head": pr.head.sha, "draft": pr.draft,
                             "merged": pr.merged_at is not None}
                    outcome = await agent.followup(message, deadline=deadline,
                                                   meta=turn_meta(flow, trigger, pr=about, **told))
                finally:
                    await acct.guard.end(key.session_id)
                    # A bot watches many PRs for months: keep no idle conversation in memory.
                    # The next turn resumes it byte-identically from its log.
                    await self.harness.agents.evict(key.session_id)
        except TimeoutError:
            return turn, TurnResult(False, "the turn deadline passed")
        except Exception as exc:
            if local_failure(exc):
                raise   # storage, not the turn: held by the scheduler, no attempt counted
            log_failure(log, exc, "%s: %s turn failed", key.session_id, flow)
            return turn, TurnResult(False, f"{type(exc).__name__}: {redact_secrets(str(exc))}")
        if not outcome.ok and outcome.failure == "storage":
            # The session log could not be written (a full disk): a local failure, never a
            # failed attempt; the scheduler holds the PR and a posted review is found by its
            # marker (work/review.py).
            raise StorageError(f"{key.session_id}: {outcome.error}")
        if not outcome.ok:
            failure = "auth" if outcome.failure == "auth" else None
            if turn is not None and turn.rate_limited:
                failure = failure or "rate_limit"
            return turn, TurnResult(False, f"turn ended: {outcome.reason}: {outcome.error}",
                                    outcome.text, failure=failure)
        return turn, TurnResult(True, None, outcome.text, thread_states=states)

    async def review(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                     instructions: TrustedInstructions | None, previous_head: str | None,
                     requested_by: str | None = None,
                     same_review: tuple[Trigger, ...] = ()) -> TurnResult:
        """A review turn; ok only if a COMMENT review for ``trigger`` is on GitHub."""
        # A review already posted for the trigger is looked for by the caller (work.review),
        # which also checks that it was posted on this head.

        async def message(p: PullRequest, agent: Agent, turn: GuardTurn) -> TurnMessage:
            return await review_turn_message(acct, p, previous_head, requested_by, agent, turn,
                                             instructions)

        turn, result = await self._turn(acct, pr, "review", trigger, instructions, message)
        if turn is not None and turn.submitted is None and turn.held_body is None:
            # (With the second look on, this holds the bot's own submit of the draft too.)
            await self._submit_unsubmitted(turn, result)
        if turn is not None and turn.held_body is not None and turn.submitted is None:
            # Submitted (by the model, or by the bot for it): the second look checks the draft,
            # then it is posted (also when the turn failed after the submit, as a direct post
            # would have been).
            await post_held(self.second_look, turn, acct, pr, trigger, instructions)
        if turn is not None and turn.submitted is not None:
            return TurnResult(True, review_id=turn.submitted.id, posted_now=turn.posted_now,
                              text=result.text, thread_states=result.thread_states)
        failure = result.failure
        if failure is None and turn is not None and turn.rate_limited:
            failure = "rate_limit"   # no review, and the MCP server's GitHub calls were refused
        return TurnResult(False, result.error or "the model finished without submitting a "
                          "review", result.text, failure=failure)

    async def _submit_unsubmitted(self, turn: GuardTurn, result: TurnResult) -> None:
        """A draft is never lost at the tool budget or the agent's step limit: the bot submits
        what the model drafted, saying what was cut."""
        if "did not finish within" in (result.error or ""):
            why = "the agent's step limit was reached"
        elif turn.budget_spent:
            why = "its read budget, review.max_read_calls, was spent"
        elif result.ok:
            why = "the reviewer finished without submitting"
        else:
            return   # a failed turn (model error, deadline) is retried whole
        try:
            review = await turn.submit_draft(why)
        except GitHubError as exc:
            log.warning("%s: submitting the unsubmitted draft failed: %s", turn.scope.pr_label,
                        exc)
            return
        if review is not None:
            log.warning("%s: the model did not submit (%s); the bot submitted its draft of %d "
                        "finding(s) as review %s", turn.scope.pr_label, why,
                        len(turn.draft.comments) if turn.draft else 0, review.id)

    async def chat(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                   instructions: TrustedInstructions | None, author: str, message: str,
                   path: str | None, line: int | None) -> TurnResult:
        async def text(p: PullRequest, _agent: Agent, _turn: GuardTurn) -> TurnMessage:
            return chat_message(facts(p), author, message, path, line)

        # Answered in the log but never posted (the process died in between): post that
        # answer; asking again would put the same question in the history twice.
        answer = await committed_answer(
            self.harness, session_key(acct, pr).session_id,
            lambda meta: meta.get("flow") == "chat" and meta_trigger(meta) == trigger)
        if answer is not None:
            result = TurnResult(True, None, answer)
        else:
            _, result = await self._turn(acct, pr, "chat", trigger, instructions, text)
        if result.ok:
            result.text = redact_secrets(result.text or "").strip()
        return result
