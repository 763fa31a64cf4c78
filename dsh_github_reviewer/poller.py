"""One account's poll loop (spec §2, §3): which PRs to review, which commands to run.

A tick polls each repository with three conditional requests (``github.feeds``), then works
per PR — reviews and commands of different PRs run concurrently, those of one PR in order:
the in-flight command a crash left, the review if the head needs one, queued commands, then new
comments. The cursor says ``reviewing`` before a model runs and ``reviewed`` only after the
review is on GitHub and the session is flushed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .app import AccountRuntime, ReviewerApp
from .commands import association_allowed, author_ignored, parse_command
from .cursor import Command, Instructions, PrEntry
from .github.errors import GitHubError, NotFound, RateLimited
from .github.feeds import FeedMarks, poll_repository
from .github.models import IssueComment, PullRequest, PullSummary, ReviewComment
from .prompts import TrustedInstructions
from .replies import post_reply
from .runner import Runner
from .sanitizer import sanitize_line

log = logging.getLogger(__name__)

INSTRUCTIONS_PATH = ".github/review_instructions.md"
MAX_PARALLEL_PRS = 4


def utcnow() -> datetime:
    return datetime.now(UTC)


class Missing:
    """No instructions file and no default instructions."""


@dataclass
class PrWork:
    full: str
    summary: PullSummary
    comments: list[Command]


class AccountPoller:
    def __init__(self, app: ReviewerApp, acct: AccountRuntime, runner: Runner,
                 clock: Callable[[], datetime] = utcnow):
        self.app, self.acct, self.runner, self.clock = app, acct, runner, clock
        assert acct.client is not None and acct.cursor is not None
        self.client, self.store = acct.client, acct.cursor
        self.cfg = acct.config
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._tick_lock = asyncio.Lock()
        self._logged: set[tuple[str, str, str]] = set()

    # -- loop ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"poller:{self.acct.key}")

    async def stop(self) -> None:
        """Stop after the running tick (never in the middle of a review)."""
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.cfg.poll_interval_s
        due = loop.time()
        while not self._stop.is_set():
            await self.tick()
            due += interval
            while due <= loop.time():
                due += interval  # a tick that overran skips the slots it covered
            wait = due - loop.time()
            next_at = self.clock() + timedelta(seconds=wait)
            await self.store.update(lambda c, at=next_at: setattr(c, "next_tick_at", at))
            try:
                async with asyncio.timeout(wait):
                    await self._stop.wait()
            except TimeoutError:
                pass

    async def tick(self) -> None:
        if self._tick_lock.locked():
            log.info("account %s: a tick is still running; skipping", self.acct.key)
            return
        async with self._tick_lock:
            try:
                await self._tick()
            except Exception as exc:
                log.exception("account %s: tick failed", self.acct.key)
                message = str(exc)[:500]
                await self.store.update(lambda c: setattr(c, "last_error", message))

    async def _tick(self) -> None:
        now = self.clock()
        cursor = await self.store.load()
        if cursor.rate_limited_until and cursor.rate_limited_until > now:
            log.info("account %s: rate limited until %s", self.acct.key,
                     cursor.rate_limited_until.isoformat())
            return
        if not self.cfg.repositories:
            return  # an idle account makes no GitHub calls
        error: str | None = None
        try:
            work: list[PrWork] = []
            for full in self.cfg.repositories:
                work += await self._poll_repo(full, now)
            sem = asyncio.Semaphore(MAX_PARALLEL_PRS)

            async def run(item: PrWork) -> None:
                async with sem:
                    await self._work_pr(item, now)
            results = await asyncio.gather(*(run(w) for w in work), return_exceptions=True)
            for r in results:
                if isinstance(r, RateLimited):
                    raise r
                if isinstance(r, Exception):
                    log.error("account %s: %s", self.acct.key, r)
                    error = str(r)[:500]
        except RateLimited as exc:
            until = self.clock() + timedelta(seconds=exc.wait_s)
            log.warning("account %s: %s; pausing until %s", self.acct.key, exc, until)
            message = str(exc)

            def limited(c) -> None:
                c.rate_limited_until, c.last_error = until, message
            await self.store.update(limited)
            return
        except GitHubError as exc:
            error = str(exc)[:500]
            log.error("account %s: %s", self.acct.key, exc)
        gone = await self.store.prune(now)
        if gone:
            log.info("account %s: pruned %d closed PR(s)", self.acct.key, len(gone))

        def done(c) -> None:
            c.last_tick_at, c.last_error, c.rate_limited_until = now, error, None
        await self.store.update(done)

    # -- one repository -------------------------------------------------------------------------

    async def _poll_repo(self, full: str, now: datetime) -> list[PrWork]:
        owner, name = full.split("/")
        cursor = await self.store.load()
        marks = cursor.feeds.get(full.lower()) or FeedMarks(issue_comments_since=now,
                                                           review_comments_since=now)
        snap = await poll_repository(self.client, owner, name, marks)
        by_number: dict[int, list[Command]] = {}
        for c in [*snap.issue_comments, *snap.review_comments]:
            cmd = self._command_of(c)
            if cmd is not None:
                by_number.setdefault(c.number, []).append(cmd)
        work = []
        seen = [self._key(full, pr.number) for pr in snap.pulls]  # drafts too: still open
        for pr in snap.pulls:
            key = self._key(full, pr.number)
            if pr.draft:
                self._log_once(key, pr.head.sha, "draft", "%s is a draft; not reviewed", key)
                continue
            if author_ignored(pr.user.login, self.cfg.ignore_authors):
                self._log_once(key, pr.head.sha, "ignored", "%s: author %s is ignored", key,
                               pr.user.login)
                continue
            comments = sorted(by_number.get(pr.number, []),
                              key=lambda c: (c.created_at, c.comment_id))
            work.append(PrWork(full, pr, comments))

        def save(c) -> None:
            c.feeds[full.lower()] = snap.marks
            for key in seen:
                if key in c.prs:
                    c.prs[key].last_seen_open_at = now
        await self.store.update(save)
        return work

    def _trigger(self, kind: str, ident: object) -> str:
        """What one review answers; the account is part of it, so two accounts reviewing the
        same PR never take each other's review for their own."""
        return f"{self.acct.key}:{kind}:{ident}"

    def _key(self, full: str, number: int) -> str:
        return f"{full.lower()}#{number}"

    def _log_once(self, key: str, sha: str, what: str, msg: str, *args: object) -> None:
        if (key, sha, what) not in self._logged:
            self._logged.add((key, sha, what))
            log.info(msg, *args)

    def _command_of(self, c: IssueComment | ReviewComment) -> Command | None:
        parsed = parse_command(c.body)
        if parsed is None or c.user.is_bot:
            return None
        is_review = isinstance(c, ReviewComment)
        return Command(comment_id=c.id, kind=parsed.kind,
                       source="review" if is_review else "issue", author=c.user.login,
                       association=c.author_association.upper(), message=parsed.message,
                       path=c.path if is_review else None,
                       line=(c.line or c.original_line) if is_review else None,
                       thread_root=(c.in_reply_to_id or c.id) if is_review else None,
                       created_at=c.created_at)

    # -- one PR ---------------------------------------------------------------------------------

    async def _entry(self, key: str) -> PrEntry | None:
        return (await self.store.load()).prs.get(key)

    async def _work_pr(self, item: PrWork, now: datetime) -> None:
        key = self._key(item.full, item.summary.number)
        entry = await self._entry(key)
        if entry is not None and entry.inflight is not None:
            await self._run_command(item, entry.inflight, now)
        entry = await self._entry(key)
        if self._needs_review(key, entry, item.summary, now):
            trigger = (entry.trigger if entry and entry.status == "reviewing" and entry.trigger
                       and entry.head_sha == item.summary.head.sha
                       else self._trigger("auto", item.summary.head.sha))
            await self._review(item, trigger, None, automatic=True, now=now)
        entry = await self._entry(key)
        if entry is not None and entry.status != "reviewing":
            for cmd in list(entry.queued):
                await self._start_command(item, cmd, now, from_queue=True)
        for cmd in item.comments:
            await self._handle_comment(item, cmd, now)

    def _needs_review(self, key: str, entry: PrEntry | None, pr: PullSummary,
                      now: datetime) -> bool:
        if entry is not None and entry.head_sha == pr.head.sha:
            if entry.status != "reviewing":
                return False
            until = entry.backoff_until(self.cfg.poll_interval_s)
            if entry.last_failed_sha == pr.head.sha and until and until > now:
                return False
        cap = self.cfg.review.max_reviews_per_pr
        if cap and entry is not None and entry.reviews_done >= cap:
            self._log_once(key, pr.head.sha, "cap", "%s: %d automatic reviews done (cap); "
                           "not reviewing head %s", key, entry.reviews_done, pr.head.sha)
            return False
        return True

    async def _instructions(self, pr: PullRequest) -> TrustedInstructions | Missing | None:
        """Trusted instructions from the base repo (branch, then SHA); None = transient error."""
        base = pr.base.repo
        assert base is not None
        for ref in (pr.base.ref, pr.base.sha):
            try:
                text = await self.client.get_file_text(base.owner.login, base.name,
                                                       INSTRUCTIONS_PATH, ref)
            except NotFound:
                continue
            except RateLimited:
                raise
            except GitHubError as exc:
                log.warning("%s#%d: cannot read review instructions: %s", base.full_name,
                            pr.number, exc)
                return None
            return TrustedInstructions(f"{base.full_name}@{ref}:{INSTRUCTIONS_PATH}", text)
        default = self.cfg.review.default_instructions
        if default.strip():
            return TrustedInstructions(f"dsh.toml:plugins.{self.acct.instance}.accounts"
                                       f"[{self.cfg.name}].review.default_instructions", default)
        return Missing()

    async def _review(self, item: PrWork, trigger: str, requested_by: str | None,
                      automatic: bool, now: datetime) -> None:
        owner, name = item.full.split("/")
        key = self._key(item.full, item.summary.number)
        pr = await self.client.get_pull(owner, name, item.summary.number)
        instructions = await self._instructions(pr)
        if instructions is None:
            return  # transient: cursor untouched, retried next tick
        if isinstance(instructions, Missing):
            def missing(e: PrEntry | None) -> PrEntry:
                e = e or PrEntry(head_sha=pr.head.sha, status="missing_instructions",
                                 updated_at=now)
                e.head_sha, e.status, e.updated_at = pr.head.sha, "missing_instructions", now
                e.title, e.base_sha, e.last_seen_open_at = sanitize_line(pr.title), pr.base.sha, now
                e.last_error = f"no {INSTRUCTIONS_PATH} in the base repository"
                return e
            await self.store.update_pr(key, missing)
            log.info("%s: no review instructions; marked missing_instructions", key)
            return
        # Whole seconds, like GitHub's timestamps: a /review posted in the same second as
        # this start is not treated as covered by it.
        started = self.clock().replace(microsecond=0)

        def reviewing(e: PrEntry | None) -> PrEntry:
            e = e or PrEntry(head_sha=pr.head.sha, status="reviewing", updated_at=now)
            if e.head_sha != pr.head.sha:
                e.fail_count, e.last_failed_sha, e.last_failed_at = 0, None, None
            e.head_sha, e.status, e.updated_at, e.trigger = pr.head.sha, "reviewing", now, trigger
            e.title, e.base_sha, e.last_seen_open_at = sanitize_line(pr.title), pr.base.sha, now
            e.last_review_started_at = started
            e.instructions = Instructions(source=instructions.source, text=instructions.text)
            return e
        entry = await self.store.update_pr(key, reviewing)
        assert entry is not None
        log.info("%s: reviewing head %s (trigger %s)", key, pr.head.sha, trigger)
        result = await self.runner.review(self.acct, pr, trigger, instructions,
                                          entry.reviewed_head_sha, requested_by)
        finished = self.clock()

        def after(e: PrEntry | None) -> PrEntry:
            assert e is not None
            e.updated_at = finished
            if result.ok:
                e.status, e.reviewed_head_sha, e.trigger = "reviewed", pr.head.sha, None
                e.fail_count, e.last_failed_sha, e.last_failed_at = 0, None, None
                e.last_error = None
                if automatic:
                    e.reviews_done += 1
            else:
                e.fail_count = (e.fail_count if e.last_failed_sha == pr.head.sha else 0) + 1
                e.last_failed_sha, e.last_failed_at = pr.head.sha, finished
                e.last_error = (result.error or "review failed")[:500]
            return e
        await self.store.update_pr(key, after)
        if result.ok:
            log.info("%s: review posted (review id %s)", key, result.review_id)
        else:
            log.warning("%s: review failed: %s", key, result.error)

    # -- commands -------------------------------------------------------------------------------

    async def _handle_comment(self, item: PrWork, cmd: Command, now: datetime) -> None:
        key = self._key(item.full, item.summary.number)
        entry = await self._entry(key)
        if entry is not None and entry.processed(cmd.comment_id):
            return
        if not association_allowed(cmd.association, self.cfg.review.command_author_associations):
            log.info("%s: ignoring /%s from %s (%s)", key, cmd.kind, cmd.author, cmd.association)
            await self._mark(key, cmd.comment_id)
            return
        if entry is None:
            if cmd.kind == "review":
                await self._mark_or_create(key, item, cmd, now)
                await self._review(item, self._trigger("cmd", cmd.comment_id), cmd.author,
                                   False, now)
            else:
                log.info("%s: /bot before the first review; ignored", key)
            return
        if cmd.kind == "review" and entry.last_review_started_at \
                and cmd.created_at < entry.last_review_started_at:
            log.info("%s: /review %d is older than the last review; already covered", key,
                     cmd.comment_id)
            await self._mark(key, cmd.comment_id)
            return
        await self._start_command(item, cmd, now, from_queue=False)

    async def _mark(self, key: str, comment_id: int) -> None:
        def apply(e: PrEntry | None) -> PrEntry | None:
            if e is not None:
                e.mark_processed(comment_id)
            return e
        await self.store.update_pr(key, apply)

    async def _mark_or_create(self, key: str, item: PrWork, cmd: Command, now: datetime) -> None:
        def apply(e: PrEntry | None) -> PrEntry:
            e = e or PrEntry(head_sha=item.summary.head.sha, status="reviewing", updated_at=now)
            e.mark_processed(cmd.comment_id)
            return e
        await self.store.update_pr(key, apply)

    async def _start_command(self, item: PrWork, cmd: Command, now: datetime,
                             from_queue: bool) -> None:
        key = self._key(item.full, item.summary.number)
        runnable: list[bool] = [False]

        def record(e: PrEntry | None) -> PrEntry | None:
            if e is None:
                return None
            if from_queue:
                e.queued = [q for q in e.queued if q.comment_id != cmd.comment_id]
            elif e.processed(cmd.comment_id):
                return e
            e.mark_processed(cmd.comment_id)
            if e.status == "reviewing" or e.inflight is not None:
                e.queued.append(cmd)  # runs once the PR is reviewed [fix: not lost]
            else:
                e.inflight = cmd  # recorded before running [fix: crash-safe]
                runnable[0] = True
            return e
        await self.store.update_pr(key, record)
        if runnable[0]:
            await self._run_command(item, cmd, now)

    async def _run_command(self, item: PrWork, cmd: Command, now: datetime) -> None:
        key = self._key(item.full, item.summary.number)
        owner, name = item.full.split("/")
        try:
            if cmd.kind == "review":
                await self._review(item, self._trigger("cmd", cmd.comment_id), cmd.author,
                                   False, now)
            else:
                await self._chat(item, cmd, key, owner, name)
        finally:
            def clear(e: PrEntry | None) -> PrEntry | None:
                if e is not None and e.inflight and e.inflight.comment_id == cmd.comment_id:
                    e.inflight = None
                return e
            await self.store.update_pr(key, clear)

    async def _chat(self, item: PrWork, cmd: Command, key: str, owner: str, name: str) -> None:
        pr = await self.client.get_pull(owner, name, item.summary.number)
        entry = await self._entry(key)
        stored = entry.instructions if entry else None
        instructions = TrustedInstructions(stored.source, stored.text) if stored else None
        result = await self.runner.chat(self.acct, pr, self._trigger("chat", cmd.comment_id),
                                        instructions,
                                        cmd.author, cmd.message, cmd.path, cmd.line)
        if not result.ok:
            log.warning("%s: /bot %d failed: %s", key, cmd.comment_id, result.error)
            await self.store.update_pr(key, _with_error(result.error or "chat failed"))
            return
        if not result.text:
            log.info("%s: /bot %d: empty answer; nothing posted", key, cmd.comment_id)
            return
        posted = await post_reply(self.client, owner, name, pr.number, cmd, result.text)
        log.info("%s: /bot %d answered%s", key, cmd.comment_id,
                 "" if posted else " (reply was already posted)")


def _with_error(message: str) -> Callable[[PrEntry | None], PrEntry | None]:
    def apply(e: PrEntry | None) -> PrEntry | None:
        if e is not None:
            e.last_error = message[:500]
        return e
    return apply
