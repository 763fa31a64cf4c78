"""The second look: before a drafted review is posted, a verifier checks each finding against
the code and keeps, drops or lowers it (``review.verify``, or ``verify`` in the repository
config).

Where it sits: with the second look on, the guard holds the review the model submits
(``GuardTurn.hold_post``) and answers the model exactly as a post would, so the review
session's requests are byte-identical with or without the verifier. After the review turn (or
the team's coordinator turn) ends, ``post_held`` runs one verifier turn, applies its verdicts
to the draft, keeps the outcome (``TurnExtras.save_second_look``: the summary comment lists
the dropped findings from it), and posts what is left — once, by the trigger's marker, like
any review.

The verifier has its own persistent session per PR (``…:pr:<n>:persona:verifier``, title
pinned by the session key, world rebuilt only when the trusted instructions change), replayed
byte-for-byte like the review's, so its prefix cache hits on every re-review; its tokens and
cost are in its own session log, apart from the review's. It may read the PR's files with the
same guarded read tools (read-only flow ``verify``). If its turn fails, every drafted finding is
posted (the second look never loses a finding) and the outcome says why.
"""

from __future__ import annotations

import asyncio
import logging

from dsh_harness import Harness, StorageError

from ..core.failures import local_failure
from ..core.sanitizer import redact_secrets
from ..core.triggers import Trigger, turn_meta
from ..github.account import ConnectedAccount
from ..github.guard import GuardTurn
from ..github.models import PullRequest, Review
from ..github.review_submit import DraftComment, find_posted
from ..pr_output.second_look import DroppedFinding, render_second_look
from ..turn.extras import extras_of
from ..turn.lessons import LESSONS_META, lessons_part
from ..turn.lessons import known as known_lessons
from ..turn.prompts import TrustedInstructions
from ..turn.second_look import (
    Checked,
    Drafted,
    SecondLookOutcome,
    parse_verdicts,
    verifier_system_prompt,
    verify_message,
)
from .inputs import WorldInputs, scope_for, session_key
from .models import ModelChoice
from .team.personas import RESERVED

log = logging.getLogger(__name__)

VERIFIER = RESERVED[1]   # the session's persona segment: …:pr:<n>:persona:verifier


def holds(instructions: TrustedInstructions | None, flow: str) -> bool:
    """Whether a turn of ``flow`` holds its review for the second look."""
    return flow == "review" and extras_of(instructions).verify


def _first_line(body: str) -> str:
    return body.strip().split("\n", 1)[0]


class SecondLook:
    def __init__(self, harness: Harness, models: ModelChoice):
        self.harness, self.models = harness, models

    async def check(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                    instructions: TrustedInstructions | None,
                    comments: list[DraftComment]) -> SecondLookOutcome:
        """The verdicts on ``comments`` (one verifier turn; every finding kept on failure)."""
        outcome = SecondLookOutcome(trigger=trigger, head=pr.head.sha)
        if not comments:
            return outcome
        try:
            text = await self._turn(acct, pr, trigger, instructions, comments)
        except Exception as exc:
            if local_failure(exc):
                raise   # the session log could not be written: retried, nothing posted
            error = f"{type(exc).__name__}: {redact_secrets(str(exc))}"[:300]
            log.warning("%s#%d: the second look failed, every finding is posted: %s",
                        pr.base.repo.full_name if pr.base.repo else "?", pr.number, error)
            outcome.error = error
            text = ""
        verdicts = parse_verdicts(text, len(comments), [c.severity for c in comments])
        outcome.checked = [
            Checked(path=c.path, line=c.line, severity=c.severity, text=_first_line(c.body),
                    action=v.action, reason=v.reason, new_severity=v.severity)
            for c, v in zip(comments, verdicts, strict=True)]
        return outcome

    async def _turn(self, acct: ConnectedAccount, pr: PullRequest, trigger: Trigger,
                    instructions: TrustedInstructions | None,
                    comments: list[DraftComment]) -> str:
        key = session_key(acct, pr).with_persona(VERIFIER)
        sid = key.session_id
        loop = asyncio.get_running_loop()
        deadline = loop.time() + acct.config.review.turn_timeout_s
        inputs = WorldInputs(instructions, await self.models.resolve())
        base = pr.base.repo
        assert base is not None
        async with asyncio.timeout_at(deadline):
            meta = {"plugin": "dsh-github-reviewer", "account": acct.key, "owner": key.owner,
                    "repo": key.repo, "number": key.number, "persona": VERIFIER,
                    "url": pr.html_url}
            # The PR lease's fence (replicas) guards the verifier's appends like the review's.
            fence = acct.client.fence
            agent = await self.harness.agents.get_or_open(sid, meta=meta, inputs=inputs,
                                                          fence=fence)
            if agent.world.system_prompt != verifier_system_prompt(instructions) \
                    and not agent.busy:
                # The trusted instructions changed: a new world (one cache miss, then stable).
                await self.harness.agents.evict(sid)
                agent = await self.harness.agents.resume(sid, inputs=inputs, fence=fence)
            turn = GuardTurn(scope=scope_for(pr, "verify", trigger), client=acct.client,
                             runtime=acct.mcp, me=acct.identity,
                             token=await acct.auth.token(valid_for_s=deadline - loop.time()))
            message = verify_message(base.owner.login, base.name, pr.number, pr.head.sha,
                                     pr.base.sha, [Drafted(c.location, c.severity, c.body)
                                                   for c in comments])
            told: dict[str, object] = {}
            taught, given = lessons_part(extras_of(instructions).lessons,
                                         known_lessons(agent.user_turns()))
            if taught:
                message += "\n\n" + taught
                told[LESSONS_META] = given
            acct.guard.begin(sid, turn)
            try:
                outcome = await agent.followup(
                    message, deadline=deadline, require_text=True,
                    meta=turn_meta("verify", trigger, persona=VERIFIER, head=pr.head.sha,
                                   findings=len(comments), **told))
            finally:
                await acct.guard.end(sid)
                await self.harness.agents.evict(sid)
        if not outcome.ok:
            if outcome.failure == "storage":
                raise StorageError(f"{sid}: {outcome.error}")
            raise RuntimeError(f"turn ended: {outcome.reason}: {outcome.error}")
        return outcome.text or ""


def body_note(outcome: SecondLookOutcome, *, summary: bool) -> str:
    """What the review body says of its second look: how many findings it dropped or lowered,
    and where the dropped ones are listed — the summary comment, or (``review.summary =
    false``) the body itself, collapsed."""
    dropped, lowered = outcome.dropped, outcome.lowered
    if outcome.error is not None and outcome.checked:
        return (f"The second look could not check the {len(outcome.checked)} drafted "
                "finding(s), so all of them were posted unchecked.")
    if not dropped and not lowered:
        return ""
    parts = [f"A second look checked the {len(outcome.checked)} drafted finding(s) before "
             "posting"]
    if dropped:
        parts.append(f"dropped {len(dropped)}" + (" (listed with the reason in the summary "
                                                  "comment)" if summary else ""))
    if lowered:
        parts.append(f"lowered the severity of {len(lowered)}")
    text = ": ".join([parts[0], ", ".join(parts[1:])]) + "."
    if dropped and not summary:
        text += "\n\n" + render_second_look([DroppedFinding(c.path, c.line, c.severity,
                                                             c.text, c.reason)
                                              for c in dropped])
    return text


def apply(turn: GuardTurn, outcome: SecondLookOutcome) -> None:
    """Drop and lower the draft's findings as the verdicts say (same order as checked)."""
    assert turn.draft is not None
    kept: list[DraftComment] = []
    for c, v in zip(turn.draft.comments, outcome.checked, strict=True):
        if v.action == "drop":
            continue
        if v.action == "lower" and v.new_severity:
            c.severity = v.new_severity
        kept.append(c)
    turn.draft.comments = kept


async def post_held(look: SecondLook, turn: GuardTurn, acct: ConnectedAccount,
                    pr: PullRequest, trigger: Trigger,
                    instructions: TrustedInstructions | None) -> Review:
    """The held review, checked and posted (an earlier post for the trigger is reused)."""
    assert turn.held_body is not None and turn.draft is not None
    s = turn.scope
    already = await find_posted(acct.client, s.owner, s.repo, s.number, trigger,
                                acct.identity)
    if already is not None:
        turn.submitted, turn.posted_now = already, False
        return already
    outcome = await look.check(acct, pr, trigger, instructions, list(turn.draft.comments))
    save = extras_of(instructions).save_second_look
    if save is not None:
        await save(outcome)   # before the post: a crash after it still lists the dropped
    apply(turn, outcome)
    # Dropped findings go to the summary comment only where they were saved for it (the
    # daemon's store); otherwise (CI, or no summary comment) the body lists them.
    note = body_note(outcome, summary=acct.config.review.summary and save is not None)
    if note:
        turn.body_notes.append(note)
    log.info("%s: second look kept %d, dropped %d, lowered %d finding(s)", s.pr_label,
             len(turn.draft.comments), len(outcome.dropped), len(outcome.lowered))
    return await turn.submit(turn.held_body)
