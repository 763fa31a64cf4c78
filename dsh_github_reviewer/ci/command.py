"""``dsh github-reviewer ci``: review one PR from inside a GitHub Actions job, then exit.

The home is the job's restored sessions directory (the same JSONL logs as the daemon, so a
session can move between modes); nothing else needs to survive the job. Credentials come from
the Actions environment (``GITHUB_TOKEN`` is an installation token, not a PAT, so it replaces
the account's credential here only). Exit codes: 0 = review posted and every persona
completed, or nothing to do; 1 = the review failed closed (a persona or the coordinator did not
complete, or nothing could be posted) so a required check blocks the merge; 2 = the run's
environment or configuration is unusable.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from pydantic import SecretStr, ValidationError

from dsh_harness import Harness, error_lines

from ..app import AccountRuntime, ReviewerApp
from ..config import TeamSettings
from ..core.sanitizer import redact_secrets
from ..core.triggers import Trigger, is_review_post, reply_marker, review_marker
from ..github.errors import GitHubError, NotFound
from ..github.models import PullRequest, Review
from ..reviewers.single import facts
from ..reviewers.team import verdict
from ..reviewers.team.personas import BUILT_IN, DEFAULT_TEAM, resolve
from ..reviewers.team.review import TeamReview
from ..turn.guidance import builtin_guidance
from ..turn.prompts import TrustedInstructions, chat_message
from .event import CiEnv, CiError, CiTask, load_payload, task_for

log = logging.getLogger(__name__)

INSTRUCTIONS_PATH = ".github/review_instructions.md"


def say(text: str) -> None:
    """One line for the job log (stdout: Actions shows it; never carries a secret)."""
    print(f"dsh-review: {text}", flush=True)


def pick_account(app: ReviewerApp, name: str | None) -> AccountRuntime:
    if name is not None:
        for acct in app.accounts.values():
            if acct.config.name == name or acct.key == name:
                return acct
        raise CiError(f"--account {name!r}: no such account in the config "
                      f"(configured: {', '.join(a.config.name for a in app.accounts.values())})")
    if len(app.accounts) != 1:
        raise CiError(f"the config has {len(app.accounts)} github-reviewer accounts; choose one "
                      "with --account")
    return next(iter(app.accounts.values()))


def ci_account(acct: AccountRuntime, env: CiEnv, personas: list[str] | None) -> None:
    """The account as this job runs it: the job's token, API and repository; a team always."""
    review = acct.config.review
    team = review.team
    names = personas if personas is not None else (team.personas or list(DEFAULT_TEAM))
    try:
        team = TeamSettings.model_validate({**team.model_dump(), "personas": names})
    except ValidationError as exc:
        raise CiError("--personas: " + "; ".join(error_lines(exc))) from None
    acct.config = acct.config.model_copy(update={
        "personal_access_token": SecretStr(env.token or ""), "app_id": None,
        "installation_id": None, "private_key_path": None, "api_url": env.api_url,
        "web_url": env.server_url, "repositories": [env.repository],
        "review": review.model_copy(update={"team": team})})


async def read_instructions(acct: AccountRuntime, pr: PullRequest) -> TrustedInstructions | None:
    """From the BASE repository (branch, then SHA), else ``default_instructions``, else the
    built-in guidance (None only with ``review.require_instructions``)."""
    base = pr.base.repo
    assert acct.client is not None and base is not None
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


async def previous_head(acct: AccountRuntime, pr: PullRequest) -> str | None:
    """The head of the last review this bot posted (found by its marker): CI has no work record."""
    base = pr.base.repo
    assert acct.client is not None and base is not None
    ours = [r for r in await acct.client.list_reviews(base.owner.login, base.name, pr.number)
            if r.state != "PENDING" and is_review_post(r.body)]
    return ours[-1].commit_id if ours else None


async def completed_by_earlier_attempt(acct: AccountRuntime, pr: PullRequest,
                                       env: CiEnv) -> Review | None:
    """A review an earlier attempt of this run posted with every persona complete.

    A re-run of the job (a new ``GITHUB_RUN_ATTEMPT``) after a crash or a cancel that came
    after the post must not review the PR twice; a re-run after a failed-closed review is the
    documented way to retry, so that one runs again."""
    base = pr.base.repo
    assert acct.client is not None and base is not None
    tags = [review_marker(Trigger.ci(acct.key, env.run_id, n))
            for n in range(1, int(env.run_attempt))]
    if not tags:
        return None
    for r in await acct.client.list_reviews(base.owner.login, base.name, pr.number):
        if r.state == "PENDING" or not r.body or not any(t in r.body for t in tags):
            continue
        found = verdict.verdict_of(r.body)
        if found and "did not complete" not in found:
            return r
    return None


async def run_ci(harness: Harness, environ: Mapping[str, str] | None = None,
                 account: str | None = None, personas: list[str] | None = None) -> int:
    env = CiEnv.from_env(os.environ if environ is None else environ)
    app = ReviewerApp.of(harness)
    acct = pick_account(app, account)
    payload = load_payload(env.event_path)
    task = task_for(env, payload, acct.config.review.command_author_associations)
    if task.kind == "skip":
        say(f"nothing to do: {task.reason}")
        return 0
    model_problem = harness.llm.problem(
        next((c.ref for c in acct.config.review.models), None))
    if task.fork and (env.token is None or model_problem):
        say(f"PR #{task.number} comes from a fork and this run has no secrets (GitHub does not "
            "pass them to pull_request runs from forks), so it is not reviewed and nothing is "
            "posted. A maintainer can comment /review to run the review with secrets.")
        return 0
    if env.token is None:
        raise CiError("GITHUB_TOKEN is not set: pass it to the step "
                      "(env: GITHUB_TOKEN: ${{ github.token }})")
    if model_problem:
        raise CiError(model_problem)
    ci_account(acct, env, personas)
    await app.connect()
    try:
        return await _run(harness, app, acct, env, task)
    finally:
        await app.close()


async def _run(harness: Harness, app: ReviewerApp, acct: AccountRuntime, env: CiEnv,
               task: CiTask) -> int:
    owner, name = env.repository.split("/", 1)
    assert acct.client is not None
    try:
        pr = await acct.client.get_pull(owner, name, task.number)
    except GitHubError as exc:
        say(f"cannot read PR #{task.number}: {exc}")
        return 1
    if pr.state != "open":
        say(f"PR #{task.number} is {pr.state}: nothing to review")
        return 0
    instructions = await read_instructions(acct, pr)
    if instructions is None:
        say(f"no {INSTRUCTIONS_PATH} in the base repository and review.require_instructions ="
            " true: nothing is reviewed (add the file, set review.default_instructions, or unset"
            " require_instructions to review with the built-in guidance)")
        return 0
    undefined = [n for n in acct.config.review.team.personas if resolve(n, instructions) is None]
    if undefined:
        # Every run would post a failed-closed review naming them: a configuration error.
        raise CiError(f"persona{'s' if len(undefined) > 1 else ''} {', '.join(undefined)} "
                      f"{'are' if len(undefined) > 1 else 'is'} not defined: built in are "
                      f"{', '.join(BUILT_IN)}; define others as '## Persona: <name>' sections "
                      f"of {instructions.source}")
    team = TeamReview(harness, app)
    if task.kind == "chat":
        return await _chat(team, acct, pr, task, instructions)
    if task.comment_id is None:
        earlier = await completed_by_earlier_attempt(acct, pr, env)
        if earlier is not None:
            say(f"review {earlier.id} was already posted by an earlier attempt of this run "
                f"and every persona completed; not posting again")
            return 0
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
    if not result.posted:
        say(f"no review could be posted: {result.error}")
        return 1
    say(f"review {result.review_id} {'posted' if result.posted_now else 'was already posted'}; "
        f"{result.verdict or 'no verdict'}")
    if result.failed:
        say(f"failing the check: {', '.join(result.failed)} did not complete")
        return 1
    return 0


async def _chat(team: TeamReview, acct: AccountRuntime, pr: PullRequest, task: CiTask,
                instructions: TrustedInstructions) -> int:
    """A /bot question, answered by the coordinator, who holds the team's reports."""
    assert task.comment_id is not None and acct.client is not None and pr.base.repo
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
    if any(c.body and tag in c.body for c in comments):
        say("the answer was already posted")
        return 0
    await acct.client.post_issue_comment(base.owner.login, base.name, pr.number,
                                         f"{redact_secrets(text)}\n\n{tag}")
    say("answer posted")
    return 0
