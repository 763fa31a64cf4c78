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
from .command_flow import CommandFlow
from .commands import author_ignored, parse_command
from .cursor import Command, PrEntry
from .github.errors import GitHubError, RateLimited
from .github.feeds import FeedMarks, poll_repository
from .github.models import IssueComment, PullSummary, ReviewComment
from .review_procedure import ReviewProcedure
from .runner import Runner

log = logging.getLogger(__name__)

MAX_PARALLEL_PRS = 4


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class PrWork:
    full: str
    summary: PullSummary
    comments: list[Command]
    # The PR's cursor entry as this tick's poll left it; re-read only after the PR's own steps.
    entry: PrEntry | None = None


class AccountPoller(ReviewProcedure, CommandFlow):
    def __init__(self, app: ReviewerApp, acct: AccountRuntime, runner: Runner,
                 clock: Callable[[], datetime] = utcnow):
        self.app, self.acct, self.runner, self.clock = app, acct, runner, clock
        assert acct.client is not None and acct.cursor is not None
        self.client, self.store = acct.client, acct.cursor
        self.cfg = acct.config
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._tick_lock = asyncio.Lock()
        self._logged: set[tuple[str, str, str]] = set()

    # -- loop ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"poller:{self.acct.key}")

    def wake(self) -> None:
        """Tick now instead of at the next interval (a webhook delivery arrived)."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop after the running tick (never in the middle of a review)."""
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.acct.tick_interval_s
        due = loop.time()
        while not self._stop.is_set():
            self._wake.clear()  # whatever woke us is seen by this tick
            await self.tick()
            # A tick that overran skips the slots it covered; one a delivery woke early keeps
            # the schedule (reconciliation stays at its interval).
            while due <= loop.time():
                due += interval
            wait = due - loop.time()
            next_at = self.clock() + timedelta(seconds=wait)
            await self.store.update(lambda c, at=next_at: setattr(c, "next_tick_at", at))
            await self._sleep(wait)

    async def _sleep(self, wait: float) -> None:
        """Until the next tick is due, a wake-up, or stop."""
        waits = [asyncio.ensure_future(self._stop.wait()),
                 asyncio.ensure_future(self._wake.wait())]
        try:
            await asyncio.wait(waits, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

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
        saved = await self.store.update(save)
        for item in work:
            item.entry = saved.prs.get(self._key(full, item.summary.number))
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
        # An idle PR costs no cursor read beyond the tick's; each step that changed the
        # entry is followed by a fresh read.
        key = self._key(item.full, item.summary.number)
        entry = item.entry
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
