"""What a turn of either strategy is given: the PR's facts, its session key, the guard's scope,
a review turn's user message, and the per-turn world inputs handed to the world hook.

The single reviewer and every team session build their turns from these, so neither imports
the other.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from dsh_harness import Agent

from ..core.sanitizer import sanitize_line
from ..core.session_key import PrKey
from ..core.triggers import Trigger
from ..github.account import ConnectedAccount
from ..github.guard import GuardTurn
from ..github.guard_rules import Scope
from ..github.models import PullRequest
from ..github.review_submit import FindingLimits
from ..turn.extras import extras_of
from ..turn.lessons import LESSONS_META, lessons_part
from ..turn.lessons import known as known_lessons
from ..turn.prompts import PrFacts, TrustedInstructions, TurnMessage, review_message, told_meta
from ..turn.repo_config import REPO_CONFIG_PATH, steering_edits
from ..turn.review_input import ReviewInput, prepare_review
from ..turn.told import Conversation


@dataclass(frozen=True)
class WorldInputs:
    """Handed to ``harness.agents.get_or_open(..., inputs=...)`` for one turn and from there to
    the world hook: the trusted instructions this turn runs under and the model of this attempt
    (``None``: the deployment's default)."""

    instructions: TrustedInstructions | None
    model: str | None


def session_key(acct: ConnectedAccount, pr: PullRequest) -> PrKey:
    """The key of the PR's conversation (its session id), in the base repository."""
    return PrKey(acct.key, pr.base.repo.owner.login if pr.base.repo else "",
                 pr.base.repo.name if pr.base.repo else "", pr.number)


def facts(pr: PullRequest) -> PrFacts:
    base_repo = pr.base.repo
    return PrFacts(owner=base_repo.owner.login if base_repo else "",
                   repo=base_repo.name if base_repo else "", number=pr.number, title=pr.title,
                   url=pr.html_url, body=pr.body, base_ref=pr.base.ref, base_sha=pr.base.sha,
                   head_ref=pr.head.ref, head_sha=pr.head.sha, changed_files=pr.changed_files,
                   additions=pr.additions, deletions=pr.deletions, author=pr.user.login)


def finding_limits(acct: ConnectedAccount, instructions: TrustedInstructions | None = None
                   ) -> FindingLimits:
    """The account's min_severity/max_findings (overridden by the repository config) and its
    read and posting budgets."""
    review = acct.config.review
    repo = instructions.repo.config if instructions is not None and instructions.repo else None
    return FindingLimits(
        min_severity=(repo.min_severity if repo and repo.min_severity else review.min_severity),
        max_findings=(repo.max_findings if repo and repo.max_findings is not None
                      else review.max_findings),
        read_calls=review.read_calls, comment_calls=review.max_comment_calls)


def repo_turn_notes(instructions: TrustedInstructions | None, paths: list[str]
                    ) -> tuple[str, str | None]:
    """(text for the user message, note for the review body): the path instructions of the
    repository config whose glob matches a changed file, and a PR editing the files that steer
    the review (reviewed with the base's version, and the review says so)."""
    parts: list[str] = []
    note = None
    repo = instructions.repo if instructions is not None else None
    if repo is not None:
        lines = [f"- {p.path}: {p.instructions.strip()}" for p in repo.path_instructions(paths)]
        lines += [f"- {g.path} (applyTo {', '.join(g.globs)}):\n{g.text}"
                  for g in repo.scoped_guidelines(paths)]
        if lines:
            parts.append("<path_instructions>\nTrusted instructions from the base branch "
                         f"({REPO_CONFIG_PATH}, .github/instructions/) for files this pull "
                         "request changes:\n" + "\n".join(lines) + "\n</path_instructions>")
    edits = steering_edits(paths)
    if edits:
        names = ", ".join(f"`{sanitize_line(e, 200)}`" for e in edits)
        note = (f"This pull request edits {names}; it was reviewed with the base branch's "
                "version of these files, not the pull request's.")
        parts.append(note + " Say so in your summary.")
    return "\n\n".join(parts), note


def scope_for(pr: PullRequest, flow: str, trigger: Trigger) -> Scope:
    base, head = pr.base.repo, pr.head.repo or pr.base.repo
    assert base is not None and head is not None
    return Scope(owner=base.owner.login, repo=base.name, number=pr.number,
                 base_sha=pr.base.sha, base_ref=pr.base.ref, head_sha=pr.head.sha,
                 head_ref=pr.head.ref, head_owner=head.owner.login, head_repo=head.name,
                 flow=flow, trigger=trigger)


async def review_turn_message(acct: ConnectedAccount, pr: PullRequest, previous_head: str | None,
                              requested_by: str | None, agent: Agent,
                              turn: GuardTurn,
                              instructions: TrustedInstructions | None = None,
                              writer: bool = True) -> TurnMessage:
    """A review turn's user message (the single reviewer's and every persona's): per-turn facts
    only, so the system prompt stays byte-stable — the prepared diff or only what changed since
    the session's last completed review, and people's feedback on the bot's threads — and what
    it told the model, as data for the turn meta (``turn/told.py``). ``writer``: the session
    posts the review (the single reviewer, the coordinator) and is shown its open threads to
    name the fixed ones; a persona only reports and is not (a re-review's message is paid
    uncached by every session)."""
    pr_facts = facts(pr)
    extras = extras_of(instructions)

    async def build(seen: list) -> tuple[ReviewInput, str, Conversation]:
        conv = Conversation(seen)
        settings = acct.config.review
        repo = instructions.repo if instructions is not None else None
        if repo is not None and repo.config.exclude:
            settings = settings.model_copy(update={
                "exclude": [*settings.exclude, *repo.config.exclude]})
        prepared = await prepare_review(acct.client, pr, settings, previous_head, conv,
                                        acct.identity, full=extras.full)
        if not writer:
            prepared = dataclasses.replace(prepared, open_threads={})
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
        # Each thread as people know it: its place and its first words (a review body that
        # says what it fixed names these, never the internal thread id).
        turn.fixable = dict(prepared.open_threads)
    extra, note = repo_turn_notes(instructions, [f.filename for f in prepared.files or []])
    if extra:
        text += "\n\n" + extra
    if note:
        turn.body_notes.append(note)
    meta = told_meta(pr_facts, previous_head, prepared, conv)
    # The repository's lessons go last: appended, they leave the prefix of every message
    # before them (and the system prompt) as it was.
    taught, given = lessons_part(extras.lessons, known_lessons(kept))
    if taught:
        text += "\n\n" + taught
        meta[LESSONS_META] = given
    return TurnMessage(text, meta, nothing_new=prepared.nothing_new,
                       thread_states=prepared.thread_states)
