"""The inbox rule: work is recorded before the watermark that hides it moves.

Everything a poll (or a webhook delivery) observes that needs work — a new head, each
``/review`` or ``/bot`` comment — is written into its PR's record in the SAME atomic write that
advances the repository's feed marks. A crash before that write loses nothing (the feeds are
read again from the old marks); a crash after it loses nothing either (the work is in the
records, and workers run only from the records, never from memory).

Entry point for other sources of observations (webhooks)::

    inbox = Inbox(store, account_config, acct.identity)
    keys = await inbox.record(Observations(repo="o/r", pulls=[...], comments=[...], marks=None))
    scheduler.wake(account_key, keys)

``pulls`` are ``PullSummary`` items of open PRs (one PR is fine); ``comments`` are issue or
review comments; ``marks`` (optional) are the new feed marks of the repository. Recording is
idempotent: a comment id already processed or a head already recorded changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from ..config import AccountConfig
from ..core.clock import utcnow
from ..core.commands import association_allowed, author_ignored, parse_command
from ..core.sanitizer import sanitize_line
from ..core.session_key import PrRef
from ..core.triggers import BotIdentity, Trigger
from ..github.feeds import FeedMarks
from ..github.models import IssueComment, PullSummary, ReviewComment
from .records import ACCOUNTS, PRS, AccountRecord, Command, PrRecord, RepoState
from .store import WorkStore, stored_key

log = logging.getLogger(__name__)

@dataclass
class Observations:
    repo: str
    pulls: Sequence[PullSummary] = ()
    comments: Sequence[IssueComment | ReviewComment] = ()
    marks: FeedMarks | None = None
    at: datetime | None = None
    # PRs seen closed or merged (a poll that read only what changed): noted in the same write,
    # so a command posted just before the close is not taken as work.
    closed: Sequence[int] = ()
    merged: Sequence[int] = ()   # those of ``closed`` closed by a merge
    # True when every comment whose PR is open comes with that PR in ``pulls`` (a poll's
    # full listing), so commands on PRs missing from it are on closed PRs and refused; a poll
    # that read only what changed, or a webhook delivery of one PR, leaves it False.
    complete: bool = False


@dataclass
class Inbox:
    store: WorkStore
    config: AccountConfig
    # Who the bot is (learned at connect): its own comments never command.
    me: BotIdentity
    _logged: set[tuple[PrRef, str, str]] = field(default_factory=set)

    @property
    def account(self) -> str:
        return self.store.account

    def _log_once(self, key: PrRef, sha: str, msg: str, *args: object) -> None:
        """Log ``msg`` once per PR and head: a poll sees the same draft every tick."""
        if (key, sha, msg) not in self._logged:
            self._logged.add((key, sha, msg))
            log.info(msg, *args)

    def is_own(self, c: IssueComment | ReviewComment) -> bool:
        """The bot's own comments (and other bots') never command. Decided by the author
        alone: a person's command holding a bot marker is a command like any other."""
        return c.user.is_bot or self.me.wrote(c)

    async def record(self, obs: Observations) -> list[PrRef]:
        """Record observations in one atomic write; the PRs that now owe work."""
        now = obs.at or utcnow()
        repo = obs.repo.lower()
        open_prs = {p.number: p for p in obs.pulls}
        touched: list[PrRef] = []
        async with self.store.domain.transaction() as tx:
            records: dict[PrRef, PrRecord | None] = {}
            before: dict[PrRef, str | None] = {}

            async def load(number: int) -> PrRecord | None:
                key = PrRef(self.account, repo, number)
                if key not in records:
                    rec = await tx.get(PRS, stored_key(key))
                    records[key] = rec
                    before[key] = rec.model_dump_json() if rec else None
                return records[key]

            for pr in obs.pulls:
                key = PrRef(self.account, repo, pr.number)
                records[key] = self._observe_pull(key, await load(pr.number), pr, now)
            for number in obs.closed:
                rec = await load(number)
                if rec is not None and rec.closed_seen_at is None:
                    rec.closed(now, merged=number in obs.merged)
            for c in sorted(obs.comments, key=lambda c: (c.created_at, c.id)):
                number = c.number
                key = PrRef(self.account, repo, number)
                rec = await load(number)
                pull = open_prs.get(number)
                if (obs.complete and pull is None) or (
                        pull is None and rec is not None and rec.closed_seen_at is not None):
                    self._refuse(rec, c, "closed")   # a command on a closed PR
                    continue
                if pull is not None and pull.draft:
                    records[key] = self._refuse(rec or self._new_draft(pull, now), c, "draft")
                    continue
                if pull is not None and not self._reviewable(key, pull):
                    continue
                records[key] = self._observe_comment(key, rec, c, now)
            for key, rec in records.items():
                if rec is not None and rec.model_dump_json() != before.get(key):
                    tx.put(PRS, stored_key(key), rec)
                    if rec.due_at(self.config.poll_interval_s, now) is not None:
                        touched.append(key)
            if obs.marks is not None:
                account = await tx.get(ACCOUNTS, self.account) or AccountRecord()
                account.feeds[repo] = obs.marks
                state = account.repos.setdefault(repo, RepoState())
                state.last_ok_at, state.last_error, state.last_error_at = now, None, None
                tx.put(ACCOUNTS, self.account, account)
        return touched

    def _reviewable(self, key: PrRef, pr: PullSummary) -> bool:
        # A draft's head is owed a review like any other: the review procedure reads
        # whether the base reviews drafts (auto_review.drafts), once per head.
        if author_ignored(pr.user.login, self.config.ignore_authors):
            self._log_once(key, pr.head.sha, "%s: author %s is ignored", key,
                           pr.user.login)
            return False
        return True

    def _observe_pull(self, key: PrRef, rec: PrRecord | None, pr: PullSummary,
                      now: datetime) -> PrRecord | None:
        if rec is not None:
            rec.reopened()
            if rec.draft != pr.draft:
                # Turned draft: whatever is owed waits. Ready again: it is owed again.
                rec.draft = pr.draft
        if not self._reviewable(key, pr):
            return rec
        head = pr.head.sha
        if pr.draft:
            self._log_once(key, head, "%s is a draft; reviewed only if its base says "
                           "auto_review.drafts = true", key)
        if rec is None:
            return self._new_draft(pr, now) if pr.draft else self._new_record(pr, now)
        if rec.head_sha == head:
            return self._retargeted(key, rec, pr, now)
        cap = self.config.review.max_reviews_per_pr
        if cap and rec.reviews_done >= cap:
            self._log_once(key, head, "%s: %d automatic reviews done (cap); not "
                           "reviewing head %s", key, rec.reviews_done, head)
            return rec
        rec.seen_at(head_sha=head, title=sanitize_line(pr.title), base_sha=pr.base.sha,
                    base_ref=pr.base.ref)
        if rec.paused_by is not None and rec.status == "reviewing" \
                and rec.trigger is not None and not rec.trigger.automatic:
            # Paused with a /review owed: it reviews the new head. Replacing it with the
            # push's automatic review would leave it waiting for /bot resume — a command
            # that got its 👀 and never ran.
            return rec
        rec.owe_review(Trigger.auto(self.account, head), now)
        return rec

    def _new_record(self, pr: PullSummary, now: datetime) -> PrRecord:
        return PrRecord.owing(head_sha=pr.head.sha, title=sanitize_line(pr.title),
                              base_sha=pr.base.sha, base_ref=pr.base.ref,
                              trigger=Trigger.auto(self.account, pr.head.sha), now=now)

    def _retargeted(self, key: PrRef, rec: PrRecord, pr: PullSummary,
                    now: datetime) -> PrRecord:
        """The same head on another base branch is another diff: a reviewed PR owes a review.

        A poll and an ``edited`` delivery both land here, so a lost delivery is caught by the
        next poll. The trigger names head and base SHA: a redelivery, or a crash after the
        post, finds the review on GitHub by its marker instead of posting another. The branch
        name is compared, not the SHA: the base branch moving on (a merge into main) is no
        retarget. A record written before base refs were kept adopts the current one.
        """
        if rec.base_ref is None:
            rec.base_ref = pr.base.ref
            return rec
        if rec.base_ref == pr.base.ref or rec.status == "reviewing":
            return rec
        cap = self.config.review.max_reviews_per_pr
        if cap and rec.reviews_done >= cap:
            # A retarget's review is automatic like a new head's: the same cap applies. The
            # base stays recorded as reviewed, so the next poll logs nothing new.
            self._log_once(key, f"{pr.head.sha}:{pr.base.ref}",
                           "%s: %d automatic reviews done (cap); not reviewing the retarget "
                           "to %s", key, rec.reviews_done, pr.base.ref)
            return rec
        log.info("%s: base branch %s -> %s; reviewing head %s again", key, rec.base_ref,
                 pr.base.ref, pr.head.sha)
        rec.base_sha, rec.base_ref = pr.base.sha, pr.base.ref
        rec.owe_review(Trigger.retarget(self.account, pr.head.sha, pr.base.sha), now)
        return rec

    def _new_draft(self, pr: PullSummary, now: datetime) -> PrRecord:
        rec = self._new_record(pr, now)
        rec.draft = True   # nothing runs while it is a draft, except the reaction
        return rec

    def _observe_reply(self, rec: PrRecord | None, c: IssueComment | ReviewComment
                       ) -> PrRecord | None:
        """A reply (not a command) on a review thread by a person allowed to command the bot
        may teach a lesson: queued to be checked against the thread (is its root a finding of
        the bot? does the reply dismiss it?). Others' replies are never looked at again."""
        if rec is None or not isinstance(c, ReviewComment) or c.in_reply_to_id is None \
                or rec.processed(c.id) or not (c.body or "").strip():
            return rec
        if not association_allowed(c.author_association,
                                   self.config.review.command_author_associations):
            return rec
        rec.mark_processed(c.id)
        rec.queued.append(_reply_command(c))
        return rec

    def _refuse(self, rec: PrRecord | None, c: IssueComment | ReviewComment,
                why: str) -> PrRecord | None:
        """A command the bot will not run (closed or draft PR): 😕, once, and nothing else.
        A reply that is no command may still teach a lesson: people often dismiss a finding
        after the merge (on a draft it waits with the PR's other work)."""
        if rec is None or self.is_own(c):
            return rec
        if parse_command(c.body) is None:
            return self._observe_reply(rec, c)
        if rec.processed(c.id):
            return rec
        log.info("refusing command comment %d on a %s pull request (#%d)", c.id, why, c.number)
        rec.mark_processed(c.id)
        rec.owe_reaction(c.id, _source(c), "confused")
        return rec

    def _observe_comment(self, key: PrRef, rec: PrRecord | None, c: IssueComment | ReviewComment,
                         now: datetime) -> PrRecord | None:
        if self.is_own(c):
            return rec
        parsed = parse_command(c.body)
        if parsed is None:
            return self._observe_reply(rec, c)
        if rec is not None and rec.processed(c.id):
            return rec
        if not association_allowed(c.author_association,
                                   self.config.review.command_author_associations):
            log.info("%s: refusing /%s from %s (%s)", key, parsed.kind, c.user.login,
                     c.author_association)
            if rec is not None:
                rec.mark_processed(c.id)
                rec.owe_reaction(c.id, _source(c), "confused")
            return rec
        if rec is None:
            # A PR this account does not know and did not list (one it listed has a record
            # by now: the pulls are observed first): ignore.
            return None
        rec.mark_processed(c.id)
        rec.owe_reaction(c.id, _source(c), "eyes")
        if parsed.kind == "review":
            started = rec.last_review_started_at
            if started is not None and c.created_at < started and rec.status != "reviewing":
                log.info("%s: /review %d is older than the last review; already covered",
                         key, c.id)
                return rec
            rec.owe_review(Trigger.cmd(self.account, c.id), now, requested_by=c.user.login)
            rec.full_review = rec.full_review or parsed.full
            return rec
        if parsed.action == "pause":
            rec.pause(c.user.login, c.created_at)
            log.info("%s: automatic reviews paused by %s", key, c.user.login)
        elif parsed.action == "resume":
            rec.resume()
            log.info("%s: automatic reviews resumed by %s", key, c.user.login)
        is_review = isinstance(c, ReviewComment)
        rec.queued.append(Command(
            comment_id=c.id, kind="bot", action=parsed.action,
            source="review" if is_review else "issue",
            author=c.user.login, association=c.author_association.upper(),
            message=parsed.message,
            path=c.path if is_review else None,
            line=(c.line or c.original_line) if is_review else None,
            thread_root=(c.in_reply_to_id or c.id) if is_review else None,
            created_at=c.created_at))
        return rec


def _reply_command(c: ReviewComment) -> Command:
    """A reply on a review thread, to be checked for a lesson (``work/teach.py``)."""
    return Command(comment_id=c.id, kind="bot", action="teach", source="review",
                   author=c.user.login, association=c.author_association.upper(),
                   message=c.body or "", path=c.path, line=c.line or c.original_line,
                   thread_root=c.in_reply_to_id, created_at=c.created_at)


def _source(c: IssueComment | ReviewComment) -> Literal["issue", "review"]:
    return "review" if isinstance(c, ReviewComment) else "issue"
