"""``dsh github-reviewer ci``: review one PR from inside a GitHub Actions job, then exit.

The home is the job's restored sessions directory (the same JSONL logs as the daemon, so a
session can move between modes); nothing else needs to survive the job. Credentials come from
the Actions environment (``GITHUB_TOKEN`` is an installation token, not a PAT, so it replaces
the account's credential here only). Exit codes: 0 = the check passes (a review whose verdict
is "can merge", any verdict with ``--fail-on never``, or nothing to do); 1 = the check fails:
the verdict is "cannot merge" (including the forced one of a review that failed closed) with
``--fail-on cannot-merge``, or nothing could be posted; 2 = the run's environment or
configuration is unusable.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import replace

from pydantic import SecretStr, ValidationError

from dsh_harness import DshError, Harness, error_lines

from ..app import ReviewerApp
from ..config import TeamSettings
from ..core.session_key import PrRef
from ..core.triggers import Trigger, answers_command
from ..github.account import ConfiguredAccount, ConnectedAccount
from ..github.errors import GitHubError
from ..github.models import PullRequest
from ..pr_output.replies import reply_body
from ..reviewers.team import verdict
from ..reviewers.team.personas import BUILT_IN, DEFAULT_TEAM, resolve
from ..turn.extras import TurnExtras
from ..turn.prompts import TrustedInstructions
from ..turn.repo_config import RepoSettings
from ..work.context import ReviewDeps
from ..work.procedure import (
    INSTRUCTIONS_PATH,
    AlreadyPosted,
    Closed,
    DraftWaits,
    Failed,
    Hooks,
    MissingInstructions,
    Outcome,
    Posted,
    Refused,
    ReviewJob,
    ReviewPr,
    last_reviewed_head,
    missing_message,
)
from ..work.turn_extras import verify_enabled
from .event import CiEnv, CiError, CiTask, load_payload, task_for
from .summary import StepSummary, restored, since, spent

log = logging.getLogger(__name__)

FAIL_ON = ("cannot-merge", "never")


def say(text: str) -> None:
    """One line for the job log (stdout: Actions shows it; never carries a secret)."""
    print(f"dsh-review: {text}", flush=True)


def pick_account(app: ReviewerApp, name: str | None) -> ConfiguredAccount:
    if name is not None:
        for acct in app.configured.values():
            if acct.config.name == name or acct.key == name:
                return acct
        raise CiError(f"--account {name!r}: no such account in the config "
                      f"(configured: {', '.join(a.config.name for a in app.configured.values())})")
    if len(app.configured) != 1:
        raise CiError(f"the config has {len(app.configured)} github-reviewer accounts; choose one "
                      "with --account")
    return next(iter(app.configured.values()))


def ci_account(acct: ConfiguredAccount, env: CiEnv, personas: list[str] | None
               ) -> ConfiguredAccount:
    """The account as this job runs it: the job's token, API and repository; a team always."""
    review = acct.config.review
    team = review.team
    names = personas if personas is not None else (team.personas or list(DEFAULT_TEAM))
    try:
        team = TeamSettings.model_validate({**team.model_dump(), "personas": names})
    except ValidationError as exc:
        raise CiError("--personas: " + "; ".join(error_lines(exc))) from None
    return replace(acct, config=acct.config.model_copy(update={
        "personal_access_token": SecretStr(env.token or ""), "app_id": None,
        "installation_id": None, "private_key_path": None, "api_url": env.api_url,
        "web_url": env.server_url, "repositories": [env.repository],
        "review": review.model_copy(update={"team": team})}))


def exit_for(line: str | None, fail_on: str) -> int:
    """The check follows the verdict: "cannot merge" (or none) fails it unless fail-on never."""
    if fail_on == "never":
        return 0
    return 0 if verdict.can_merge(line) else 1


async def run_ci(harness: Harness, environ: Mapping[str, str] | None = None,
                 account: str | None = None, personas: list[str] | None = None,
                 fail_on: str = "cannot-merge") -> int:
    environ = os.environ if environ is None else environ
    if fail_on not in FAIL_ON:
        raise CiError(f"--fail-on {fail_on!r}: use one of {', '.join(FAIL_ON)}")
    env = CiEnv.from_env(environ)
    app = ReviewerApp.of(harness)
    acct = pick_account(app, account)
    payload = load_payload(env.event_path)
    task = task_for(env, payload, acct.config.review.command_author_associations)
    title = f"dsh-review: {env.repository}#{task.number}" if task.number else "dsh-review"
    summary = StepSummary(title)
    if task.kind == "skip":
        say(f"nothing to do: {task.reason}")
        summary.add("Result", f"nothing to do: {task.reason}").write(env.step_summary)
        return 0
    model_problem = harness.llm.problem(
        next((c.ref for c in acct.config.review.models), None))
    if task.fork and (env.token is None or model_problem):
        say(f"PR #{task.number} comes from a fork and this run has no secrets (GitHub does not "
            "pass them to pull_request runs from forks), so it is not reviewed and nothing is "
            "posted. A maintainer can comment /review to run the review with secrets.")
        summary.add("Result", "not reviewed: a fork PR run has no secrets").write(
            env.step_summary)
        return 0
    if task.dependabot and model_problem:
        # Neutral, not red: GitHub gives Dependabot's PR runs no Actions secrets. One line,
        # as an Actions notice so it shows on the run's page.
        print(f"::notice title=dsh-review::Dependabot PR #{task.number} not reviewed: its "
              "runs get no Actions secrets, so the model key is unset", flush=True)
        summary.add("Result", "not reviewed: Dependabot PR runs get no secrets").write(
            env.step_summary)
        return 0
    if env.token is None:
        raise CiError("GITHUB_TOKEN is not set: pass it to the step "
                      "(env: GITHUB_TOKEN: ${{ github.token }})")
    if model_problem:
        raise CiError(model_problem)
    app.configure(ci_account(acct, env, personas))
    summary.add("Session memory", restored(environ.get("DSH_RESTORED_KEY")))
    before = await spent(harness)
    await app.connect()
    try:
        code = await _run(harness, app, app.connected[acct.key], env, task, fail_on, summary)
    finally:
        await app.close()
        summary.usage(since(before, await spent(harness))).write(env.step_summary)
        await bound_sessions(harness)
    return code


async def bound_sessions(harness: Harness) -> None:
    """Before the cache saves them: each log without what its latest compaction summarized,
    so the PR's cache entry stays near the prompt budget however many runs it has."""
    for s in await harness.sessions.summaries():
        try:
            dropped = await harness.sessions.drop_compacted(s.id)
        except DshError as exc:
            log.warning("session %s: compacted turns kept: %s", s.id, exc)
            continue
        if dropped:
            say(f"session {s.id}: {dropped} events of compacted turns left out of the cache")


class _CiHooks(Hooks):
    """CI's steps inside the procedure: a team whose personas are not defined is a
    configuration error (every run would post a failed-closed review naming them); the second
    look as the daemon decides it. CI keeps no store: the findings it drops are listed in the
    review body, and there are no lessons."""

    def __init__(self, acct: ConnectedAccount):
        self.acct = acct

    async def extras(self, pr: PullRequest, settings: RepoSettings | None) -> TurnExtras | None:
        if not verify_enabled(self.acct.config.review, settings):
            return None
        return TurnExtras(verify=True)

    async def starting(self, pr: PullRequest, instructions: TrustedInstructions,
                       trigger: Trigger) -> None:
        repo = instructions.repo
        names = list(repo.config.personas) if repo is not None and repo.config.personas \
            else self.acct.config.review.team.personas
        undefined = [n for n in names if resolve(n, instructions) is None]
        if undefined:
            raise CiError(f"persona{'s' if len(undefined) > 1 else ''} {', '.join(undefined)} "
                          f"{'are' if len(undefined) > 1 else 'is'} not defined: built in are "
                          f"{', '.join(BUILT_IN)}; define others as '## Persona: <name>' "
                          f"sections of {instructions.source}")
        say(f"reviewing {pr.base.repo.full_name if pr.base.repo else '?'}#{pr.number} at "
            f"{pr.head.sha[:12]} with {', '.join(names)} and the coordinator")


async def _run(harness: Harness, app: ReviewerApp, acct: ConnectedAccount, env: CiEnv,
               task: CiTask, fail_on: str, summary: StepSummary) -> int:
    """The review through the one procedure (``work/procedure.py``), its outcome mapped to
    the exit code and the step summary."""
    owner, name = env.repository.split("/", 1)
    deps = ReviewDeps(acct, app.reviewers[acct.key])
    procedure = ReviewPr(deps)
    if task.kind == "chat":
        return await _chat(procedure, acct, owner, name, task, summary)
    if task.comment_id is not None:
        trigger = Trigger.cmd(acct.key, task.comment_id)
        earlier: tuple[Trigger, ...] = ()
    else:
        trigger = Trigger.ci(acct.key, env.run_id, env.run_attempt)
        earlier = tuple(Trigger.ci(acct.key, env.run_id, n)
                        for n in range(1, int(env.run_attempt)))
    try:
        previous = await last_reviewed_head(deps, owner, name, task.number)
    except GitHubError as exc:
        say(f"cannot read PR #{task.number}: {exc}")
        summary.add("Result", "failed: the PR could not be read")
        return 1
    ref = PrRef(acct.key, env.repository, task.number)
    job = ReviewJob(ref, trigger, previous_head=previous, requested_by=task.requested_by,
                    same_review=earlier)
    outcome = await procedure.run(job, _CiHooks(acct))
    return await _outcome(acct, outcome, fail_on, summary, env)


async def _outcome(acct: ConnectedAccount, outcome: Outcome, fail_on: str,
                   summary: StepSummary, env: CiEnv) -> int:
    """Exit code and step summary of each outcome (docs/ci.en.md, "What applies in CI")."""
    pr = getattr(outcome, "pr", None)
    if pr is not None:
        summary.title = f"dsh-review: {env.repository}#{pr.number} at {pr.head.sha[:12]}"
    match outcome:
        case Closed(merged=merged):
            state = "merged" if merged else "closed"
            say(f"the PR is {state}: nothing to review")
            summary.add("Result", f"nothing to do: the PR is {state}")
            return 0
        case DraftWaits():
            say("the PR is a draft: not reviewed (auto_review.drafts is not true)")
            summary.add("Result", "nothing to do: draft pull requests are not reviewed")
            return 0
        case MissingInstructions():
            say(missing_message(acct.instance) + ": nothing is reviewed")
            summary.add("Result", f"nothing to do: no {INSTRUCTIONS_PATH} "
                                  "(require_instructions)")
            return 0
        case Refused():
            say(outcome.note)
            summary.add("Result", outcome.note)
            return 0
        case Failed():
            say(f"no review could be posted: {outcome.error}")
            summary.add("Result", "failed: no review could be posted"
                        if outcome.pr is not None else "failed: the PR could not be read")
            return 1
        case AlreadyPosted(review=review):
            say(f"head {review.commit_id and review.commit_id[:12]} already has a complete team "
                f"review ({review.id}): not reviewing it again; {outcome.verdict}")
            await _findings(acct, outcome.pr, review.id, outcome.verdict, summary)
            summary.add("Result", f"already reviewed (review {review.id}); no new review")
            return _check(outcome.verdict, fail_on, summary)
        case Posted(review=review):
            for member, note in outcome.notes.items():
                say(f"  {member}: {note}")
            say(f"review {review.id} {'posted' if outcome.posted_now else 'was already posted'}"
                f"; {outcome.verdict or 'no verdict'}")
            await _findings(acct, outcome.pr, review.id, outcome.verdict, summary)
            if outcome.fix_error:
                say(f"the fixed threads could not all be resolved: {outcome.fix_error}")
            if outcome.incomplete:
                say(f"{', '.join(outcome.incomplete)} did not complete: the review failed "
                    "closed")
                summary.add("Incomplete", f"{', '.join(outcome.incomplete)} did not complete")
            return _check(outcome.verdict, fail_on, summary)
    raise AssertionError(f"unhandled outcome {outcome!r}")


async def _findings(acct: ConnectedAccount, pr: PullRequest, review_id: int, line: str | None,
                    summary: StepSummary) -> None:
    """The verdict and the number of inline findings of the review, for the summary."""
    base = pr.base.repo
    assert base is not None
    summary.add("Verdict", (line or "none").removeprefix("Verdict:").strip())
    try:
        comments = await acct.client.list_review_comments(base.owner.login, base.name,
                                                          pr.number)
    except GitHubError as exc:
        log.warning("cannot count the review's comments: %s", exc)
        summary.add("Findings", "unknown (the review's comments could not be read)")
        return
    n = sum(1 for c in comments if c.pull_request_review_id == review_id)
    summary.add("Findings", f"{n} inline comment{'' if n == 1 else 's'}")


def _check(line: str | None, fail_on: str, summary: StepSummary) -> int:
    code = exit_for(line, fail_on)
    if code:
        say(f"failing the check: the verdict is not \"can merge\" (fail-on: {fail_on})")
    summary.add("Check", ("fails" if code else "passes") + f" (fail-on: {fail_on})")
    return code


async def _chat(procedure: ReviewPr, acct: ConnectedAccount, owner: str, name: str,
                task: CiTask, summary: StepSummary) -> int:
    """A /bot question, answered by the reviewer (the team's coordinator holds its reports),
    under the same instructions a review reads."""
    assert task.comment_id is not None
    try:
        pr = await acct.client.get_pull(owner, name, task.number)
        instructions = await procedure.instructions(pr)
    except GitHubError as exc:
        say(f"cannot read PR #{task.number}: {exc}")
        summary.add("Result", "failed: the PR could not be read")
        return 1
    if instructions is None:
        say(missing_message(acct.instance) + ": the question is not answered")
        return 0
    result = await procedure.deps.runner.chat(acct, pr, Trigger.chat(acct.key, task.comment_id),
                                              instructions, task.author, task.message, None,
                                              None)
    text = (result.text or "").strip()
    if not result.ok:
        say(f"the /bot answer failed: {result.error}")
        return 1
    if not text:
        say("the /bot answer was empty: nothing posted")
        return 0
    # The reply marker makes a re-run of this job find its earlier answer instead of posting
    # a second one (the same marker the daemon uses).
    comments = await acct.client.list_issue_comments(owner, name, pr.number)
    if any(answers_command(c, acct.identity, task.comment_id) for c in comments):
        say("the answer was already posted")
        return 0
    await acct.client.post_issue_comment(owner, name, pr.number,
                                         reply_body(text, task.comment_id))
    say("answer posted")
    return 0
