"""Drive one turn of a PR's session: a review or a /bot chat.

The turn deadline covers agent set-up too: it starts before the session is opened and
the same absolute deadline bounds the agent's turn. The guard's per-turn state is registered
around the turn, so tools work only while the runner says so, and the MCP process it starts is
closed on every path.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from dsh_harness import Agent, Harness

from ..app import AccountRuntime, ReviewerApp
from ..core.failures import log_failure
from ..core.sanitizer import redact_secrets
from ..core.session_key import PrKey
from ..github.errors import GitHubError
from ..github.guard import GuardTurn
from ..github.guard_rules import Scope
from ..github.models import PullRequest
from ..github.review_submit import FindingLimits
from ..turn.answered import committed_answer
from ..turn.prompts import (
    PrFacts,
    TrustedInstructions,
    TurnMessage,
    chat_message,
    review_message,
    system_prompt,
    told_meta,
)
from ..turn.review_input import ReviewInput, prepare_review
from ..turn.told import Conversation

log = logging.getLogger(__name__)


@dataclass
class TurnResult:
    ok: bool
    error: str | None = None
    text: str | None = None
    review_id: int | None = None
    posted_now: bool = False
    # Why it failed when that is the account's problem, not the PR's: "auth" (the model
    # provider rejected the key), "rate_limit" (github-mcp-server was rate limited).
    failure: str | None = None


def pr_key(acct: AccountRuntime, pr: PullRequest) -> PrKey:
    return PrKey(acct.key, pr.base.repo.owner.login if pr.base.repo else "",
                 pr.base.repo.name if pr.base.repo else "", pr.number)


def facts(pr: PullRequest) -> PrFacts:
    base_repo = pr.base.repo
    return PrFacts(owner=base_repo.owner.login if base_repo else "",
                   repo=base_repo.name if base_repo else "", number=pr.number, title=pr.title,
                   url=pr.html_url, body=pr.body, base_ref=pr.base.ref, base_sha=pr.base.sha,
                   head_ref=pr.head.ref, head_sha=pr.head.sha, changed_files=pr.changed_files,
                   additions=pr.additions, deletions=pr.deletions, author=pr.user.login)


def finding_limits(acct: AccountRuntime) -> FindingLimits:
    review = acct.config.review
    return FindingLimits(min_severity=review.min_severity, max_findings=review.max_findings)


def scope_for(pr: PullRequest, flow: str, trigger: str) -> Scope:
    base, head = pr.base.repo, pr.head.repo or pr.base.repo
    assert base is not None and head is not None
    return Scope(owner=base.owner.login, repo=base.name, number=pr.number,
                 base_sha=pr.base.sha, base_ref=pr.base.ref, head_sha=pr.head.sha,
                 head_ref=pr.head.ref, head_owner=head.owner.login, head_repo=head.name,
                 flow=flow, trigger=trigger)


async def review_turn_message(acct: AccountRuntime, pr: PullRequest, previous_head: str | None,
                              requested_by: str | None, agent: Agent,
                              turn: GuardTurn) -> TurnMessage:
    """A review turn's user message (the single reviewer's and every persona's): per-turn facts
    only, so the system prompt stays byte-stable — the prepared diff or only what changed since
    the session's last completed review, and people's feedback on the bot's threads — and what
    it told the model, as data for the turn meta (``turn/told.py``)."""
    assert acct.client is not None
    pr_facts = facts(pr)

    async def build(seen: list) -> tuple[ReviewInput, str, Conversation]:
        conv = Conversation(seen)
        prepared = await prepare_review(acct.client, pr, acct.config.review, previous_head,
                                        conv)
        return (prepared, review_message(pr_facts, previous_head, requested_by, prepared, conv),
                conv)

    seen = agent.user_turns()
    prepared, text, conv = await build(seen)
    # A compaction at the start of this turn would summarize turns the message refers to
    # ("unchanged", "above"): then only the turns it keeps count (built again; the GitHub
    # reads are conditional, so this costs no rate limit).
    kept = agent.user_turns(upcoming_tokens=len(text.encode()) // 4 + 1)
    if len(kept) != len(seen):
        prepared, text, conv = await build(kept)
    if prepared.files is not None:
        turn.use_files(prepared.files)
    if prepared.kind != "first":
        turn.fixable = {i: where for i, (where, _) in prepared.open_threads.items()}
    return TurnMessage(text, told_meta(pr_facts, previous_head, prepared, conv))


class Runner:
    def __init__(self, harness: Harness, app: ReviewerApp):
        self.harness, self.app = harness, app

    async def _agent(self, acct: AccountRuntime, key: PrKey, pr: PullRequest,
                     instructions: TrustedInstructions | None) -> Agent:
        await self.app.resolve_model(acct)
        meta = {"plugin": "dsh-github-reviewer", "account": acct.key,
                "owner": key.owner, "repo": key.repo, "number": key.number, "url": pr.html_url}
        agent = await self.harness.agents.get_or_open(key.session_id, meta=meta)
        wanted = system_prompt(instructions)
        if agent.world.system_prompt != wanted and not agent.busy:
            # The trusted instructions changed: a new world (one prefix-cache miss, then stable).
            await self.harness.agents.evict(key.session_id)
            agent = await self.harness.agents.resume(key.session_id)
        return agent

    async def _turn(self, acct: AccountRuntime, pr: PullRequest, flow: str, trigger: str,
                    instructions: TrustedInstructions | None, message_for) -> tuple[
                        GuardTurn | None, TurnResult]:
        key = pr_key(acct, pr)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + acct.config.review.turn_timeout_s
        turn: GuardTurn | None = None
        try:
            async with asyncio.timeout_at(deadline):
                agent = await self._agent(acct, key, pr, instructions)
                assert acct.auth is not None and acct.client is not None and acct.mcp
                turn = GuardTurn(scope=scope_for(pr, flow, trigger), client=acct.client,
                                 runtime=acct.mcp, limits=finding_limits(acct),
                                 token=await acct.auth.token(valid_for_s=deadline - loop.time()))
                message = await message_for(pr, agent, turn)
                told = {}
                if isinstance(message, TurnMessage):
                    message, told = message.text, message.meta
                acct.guard.begin(key.session_id, turn)
                try:
                    # The PR as this turn saw it, for the web UI's PR pages (not sent to the
                    # model: turn meta never reaches the prompt).
                    about = {"title": pr.title, "author": pr.user.login, "state": pr.state,
                             "head": pr.head.sha}
                    outcome = await agent.followup(message, deadline=deadline,
                                                   meta={"flow": flow, "trigger": trigger,
                                                         "pr": about, **told})
                finally:
                    await acct.guard.end(key.session_id)
                    # A bot watches many PRs for months: keep no idle conversation in memory.
                    # The next turn resumes it byte-identically from its log.
                    await self.harness.agents.evict(key.session_id)
        except TimeoutError:
            return turn, TurnResult(False, "the turn deadline passed")
        except Exception as exc:
            log_failure(log, exc, "%s: %s turn failed", key.session_id, flow)
            return turn, TurnResult(False, f"{type(exc).__name__}: {redact_secrets(str(exc))}")
        if not outcome.ok:
            failure = "auth" if outcome.failure == "auth" else None
            if turn is not None and turn.rate_limited:
                failure = failure or "rate_limit"
            return turn, TurnResult(False, f"turn ended: {outcome.reason}: {outcome.error}",
                                    outcome.text, failure=failure)
        return turn, TurnResult(True, None, outcome.text)

    async def review(self, acct: AccountRuntime, pr: PullRequest, trigger: str,
                     instructions: TrustedInstructions | None, previous_head: str | None,
                     requested_by: str | None = None) -> TurnResult:
        """A review turn; ok only if a COMMENT review for ``trigger`` is on GitHub."""
        if acct.config.review.team.enabled:
            return await self._team_review(acct, pr, trigger, instructions, previous_head,
                                           requested_by)
        base = pr.base.repo
        assert acct.client is not None and base is not None
        # A review already posted for the trigger is looked for by the caller (work.review),
        # which also checks that it was posted on this head.

        async def message(p: PullRequest, agent: Agent, turn: GuardTurn) -> TurnMessage:
            return await review_turn_message(acct, p, previous_head, requested_by, agent, turn)

        turn, result = await self._turn(acct, pr, "review", trigger, instructions, message)
        if turn is not None and turn.submitted is None:
            await self._submit_unsubmitted(turn, result)
        if turn is not None and turn.submitted is not None:
            return TurnResult(True, review_id=turn.submitted.id, posted_now=turn.posted_now,
                              text=result.text)
        failure = result.failure
        if failure is None and turn is not None and turn.rate_limited:
            failure = "rate_limit"   # no review, and the MCP server's GitHub calls were refused
        return TurnResult(False, result.error or "the model finished without submitting a "
                          "review", result.text, failure=failure)

    async def _submit_unsubmitted(self, turn: GuardTurn, result: TurnResult) -> None:
        """A draft is never lost at the tool budget or the agent's step limit: the bot submits
        what the model drafted, saying what was cut (issue 21 item 4)."""
        if "did not finish within" in (result.error or ""):
            why = "the agent's step limit was reached"
        elif turn.budget_spent:
            why = "its tool budget, review.max_tool_calls, was spent"
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

    async def _team_review(self, acct: AccountRuntime, pr: PullRequest, trigger: str,
                           instructions: TrustedInstructions | None, previous_head: str | None,
                           requested_by: str | None) -> TurnResult:
        """``review.team``: personas read, the coordinator posts (``team/review.py``). A review
        that failed closed is still the trigger's one review: the verdict in it blocks the
        merge, and running the same trigger again would only find it posted."""
        from .team.review import TeamReview  # the team builds on this module

        result = await TeamReview(self.harness, self.app).review(
            acct, pr, trigger, instructions, previous_head, requested_by)
        if not result.posted:
            return TurnResult(False, result.error or "the review team posted no review",
                              failure=result.failure)
        if result.failed:
            log.warning("%s#%d: review posted but failed closed: %s did not complete",
                        pr.base.repo.full_name if pr.base.repo else "?", pr.number,
                        ", ".join(result.failed))
        return TurnResult(True, review_id=result.review_id, posted_now=result.posted_now,
                          text=result.verdict)

    async def chat(self, acct: AccountRuntime, pr: PullRequest, trigger: str,
                   instructions: TrustedInstructions | None, author: str, message: str,
                   path: str | None, line: int | None) -> TurnResult:
        async def text(p: PullRequest, _agent: Agent, _turn: GuardTurn) -> str:
            return chat_message(facts(p), author, message, path, line)

        if acct.config.review.team.enabled:
            # The team's coordinator answers: it holds the reports (as in CI mode).
            from .team.review import TeamReview

            answer = await TeamReview(self.harness, self.app).chat(
                acct, pr, trigger, instructions,
                chat_message(facts(pr), author, message, path, line))
            result = TurnResult(answer.ok, answer.error, answer.text, failure=answer.failure)
        else:
            # Answered in the log but never posted (the process died in between): post that
            # answer; asking again would put the same question in the history twice.
            answer = await committed_answer(
                self.harness, pr_key(acct, pr).session_id,
                lambda meta: meta.get("flow") == "chat" and meta.get("trigger") == trigger)
            if answer is not None:
                result = TurnResult(True, None, answer)
            else:
                _, result = await self._turn(acct, pr, "chat", trigger, instructions, text)
        if result.ok:
            result.text = redact_secrets(result.text or "").strip()
        return result
