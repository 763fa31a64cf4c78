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
from ..core.sanitizer import redact_secrets
from ..core.triggers import (
    Trigger,
    answers_command,
    is_bot_review,
    posted_trigger,
    reply_marker,
)
from ..github.account import ConfiguredAccount, ConnectedAccount
from ..github.errors import GitHubError, NotFound
from ..github.models import PullRequest, Review
from ..reviewers.inputs import facts
from ..reviewers.team import verdict
from ..reviewers.team.personas import BUILT_IN, DEFAULT_TEAM, resolve
from ..reviewers.team.review import TeamReview
from ..turn.guidance import builtin_guidance
from ..turn.prompts import TrustedInstructions, chat_message
from .event import CiEnv, CiError, CiTask, load_payload, task_for
from .summary import StepSummary, restored, since, spent

log = logging.getLogger(__name__)

INSTRUCTIONS_PATH = ".github/review_instructions.md"
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


async def read_instructions(acct: ConnectedAccount, pr: PullRequest) -> TrustedInstructions | None:
    """From the BASE repository (branch, then SHA), else ``default_instructions``, else the
    built-in guidance (None only with ``review.require_instructions``)."""
    base = pr.base.repo
    assert base is not None
    for ref in (pr.base.ref, pr.base.sha):
        try:
            text = await acct.client.get_file_text(base.owner.login, base.name,
                                                   INSTRUCTIONS_PATH, ref)
        except NotFound:
            continue
        return TrustedInstructions(f"{base.full_name}@{ref}:{INSTRUCTIONS_PATH}", text)
    default = acct.config.review.default_instructions
    if default.strip():
        return TrustedInstructions(f"dsh.toml:plugins.{acct.instance}.accounts"
                                   f"[{acct.config.name}].review.default_instructions", default)
    if acct.config.review.require_instructions:
        return None
    return builtin_guidance()


async def previous_head(acct: ConnectedAccount, pr: PullRequest) -> str | None:
    """The head of the last review this bot posted (found by its marker): CI has no work record."""
    base = pr.base.repo
    assert base is not None
    ours = [r for r in await acct.client.list_reviews(base.owner.login, base.name, pr.number)
            if r.state != "PENDING" and is_bot_review(r, acct.identity)]
    return ours[-1].commit_id if ours else None


async def reviewed_head(acct: ConnectedAccount, pr: PullRequest) -> Review | None:
    """A complete team review of this head already on GitHub (checked there, as the daemon
    does: our marker and the review's commit), or None.

    Concurrent runs, a ``reopened`` event, a second trigger or a re-run of the job on a head
    that has one must not post another: one review per head, not per run. A review that failed
    closed (a persona or the coordinator did not complete) is not complete, so a re-run is
    still the way to retry it; an explicit ``/review`` always runs."""
    base = pr.base.repo
    assert base is not None
    found = None
    for r in await acct.client.list_reviews(base.owner.login, base.name, pr.number):
        answered = posted_trigger(r, acct.identity)
        if r.state == "PENDING" or r.commit_id != pr.head.sha or answered is None \
                or answered.account != acct.key:
            continue
        line = verdict.verdict_of(r.body)
        if line and "did not complete" not in line:
            found = r
    return found


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


async def _run(harness: Harness, app: ReviewerApp, acct: ConnectedAccount, env: CiEnv,
               task: CiTask, fail_on: str, summary: StepSummary) -> int:
    owner, name = env.repository.split("/", 1)
    try:
        pr = await acct.client.get_pull(owner, name, task.number)
    except GitHubError as exc:
        say(f"cannot read PR #{task.number}: {exc}")
        summary.add("Result", "failed: the PR could not be read")
        return 1
    summary.title = f"dsh-review: {env.repository}#{pr.number} at {pr.head.sha[:12]}"
    if pr.state != "open":
        say(f"PR #{task.number} is {pr.state}: nothing to review")
        summary.add("Result", f"nothing to do: the PR is {pr.state}")
        return 0
    instructions = await read_instructions(acct, pr)
    if instructions is None:
        say(f"no {INSTRUCTIONS_PATH} in the base repository and review.require_instructions ="
            " true: nothing is reviewed (add the file, set review.default_instructions, or unset"
            " require_instructions to review with the built-in guidance)")
        summary.add("Result", f"nothing to do: no {INSTRUCTIONS_PATH} (require_instructions)")
        return 0
    undefined = [n for n in acct.config.review.team.personas if resolve(n, instructions) is None]
    if undefined:
        # Every run would post a failed-closed review naming them: a configuration error.
        raise CiError(f"persona{'s' if len(undefined) > 1 else ''} {', '.join(undefined)} "
                      f"{'are' if len(undefined) > 1 else 'is'} not defined: built in are "
                      f"{', '.join(BUILT_IN)}; define others as '## Persona: <name>' sections "
                      f"of {instructions.source}")
    team = TeamReview(harness, app.models[acct.key])
    if task.kind == "chat":
        return await _chat(team, acct, pr, task, instructions)
    if task.comment_id is None:
        done = await reviewed_head(acct, pr)
        if done is not None:
            line = verdict.verdict_of(done.body)
            say(f"head {pr.head.sha[:12]} already has a complete team review ({done.id}): "
                f"not reviewing it again; {line}")
            await _findings(acct, pr, done.id, line, summary)
            summary.add("Result", f"already reviewed (review {done.id}); no new review")
            return _check(line, fail_on, summary)
    trigger = str(Trigger.cmd(acct.key, task.comment_id) if task.comment_id is not None
                  else Trigger.ci(acct.key, env.run_id, env.run_attempt))
    personas = acct.config.review.team.personas
    say(f"reviewing {env.repository}#{pr.number} at {pr.head.sha[:12]} with "
        f"{', '.join(personas)} and the coordinator")
    earlier = tuple(str(Trigger.ci(acct.key, env.run_id, n))
                    for n in range(1, int(env.run_attempt))) if task.comment_id is None else ()
    result = await team.review(acct, pr, trigger, instructions, await previous_head(acct, pr),
                               task.requested_by, same_review=earlier)
    for persona, outcome in result.outcomes.items():
        say(f"  {persona}: {'completed' if outcome.ok else 'did not complete'} "
            f"({'; '.join(outcome.attempts) or 'no attempt'})")
    if not result.posted or result.review_id is None:
        say(f"no review could be posted: {result.error}")
        summary.add("Result", "failed: no review could be posted")
        return 1
    say(f"review {result.review_id} {'posted' if result.posted_now else 'was already posted'}; "
        f"{result.verdict or 'no verdict'}")
    await _findings(acct, pr, result.review_id, result.verdict, summary)
    if result.failed:
        say(f"{', '.join(result.failed)} did not complete: the review failed closed")
        summary.add("Incomplete", f"{', '.join(result.failed)} did not complete")
    return _check(result.verdict, fail_on, summary)


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


async def _chat(team: TeamReview, acct: ConnectedAccount, pr: PullRequest, task: CiTask,
                instructions: TrustedInstructions) -> int:
    """A /bot question, answered by the coordinator, who holds the team's reports."""
    assert task.comment_id is not None and pr.base.repo
    result = await team.chat(acct, pr, str(Trigger.chat(acct.key, task.comment_id)), instructions,
                             chat_message(facts(pr), task.author, task.message, None, None))
    text = (result.text or "").strip()
    if not result.ok:
        say(f"the /bot answer failed: {result.error}")
        return 1
    if not text:
        say("the /bot answer was empty: nothing posted")
        return 0
    # The reply marker makes a re-run of this job find its earlier answer instead of posting
    # a second one (the same marker the daemon uses).
    base = pr.base.repo
    tag = reply_marker(task.comment_id)
    comments = await acct.client.list_issue_comments(base.owner.login, base.name, pr.number)
    if any(answers_command(c, acct.identity, task.comment_id) for c in comments):
        say("the answer was already posted")
        return 0
    await acct.client.post_issue_comment(base.owner.login, base.name, pr.number,
                                         f"{redact_secrets(text)}\n\n{tag}")
    say("answer posted")
    return 0
