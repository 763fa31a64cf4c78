"""Comment commands of one PR (spec §3): /review and /bot, each exactly once.

Mixed into ``AccountPoller`` (uses its ``client``, ``store``, ``runner``, ``acct``, ``cfg``,
``_key``, ``_trigger``, ``_entry`` and the review procedure). A command is marked processed and
recorded in flight (or queued while the PR is being reviewed) before it runs, so a crash
neither loses nor repeats it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from .commands import association_allowed
from .cursor import Command, PrEntry
from .prompts import TrustedInstructions
from .replies import post_reply

if TYPE_CHECKING:
    from .poller import PrWork

log = logging.getLogger(__name__)


class CommandFlow:
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
