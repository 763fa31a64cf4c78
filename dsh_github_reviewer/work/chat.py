"""A ``/bot`` command of one PR: one chat turn, one reply, exactly once.

The command stays in the PR record's queue until its reply is on GitHub (or the model had
nothing to say); a failure of the turn, of GitHub or of the runner counts an attempt with
backoff, and after ``review.max_attempts`` the bot gives up visibly. The reply carries a
marker naming the command; it is looked for before the turn (no second paid turn after a
crash between the post and the record) and again before the post.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from ..core.failures import local_failure
from ..core.sanitizer import redact_secrets
from ..core.session_key import PrRef
from ..core.triggers import Trigger
from ..github.errors import BadCredentials, GitHubError, RateLimited
from ..pr_output.replies import already_replied, post_reply
from ..turn.prompts import TrustedInstructions
from . import bot_commands
from . import pause as account_pause
from .context import WorkContext, short_error
from .records import Command, Notice, PrRecord, backoff
from .summary import update_summary

log = logging.getLogger(__name__)


class ChatFailed(Exception):
    pass


class CommandProcedure:
    def __init__(self, ctx: WorkContext):
        self.ctx = ctx

    async def run(self, ref: PrRef, rec: PrRecord, cmd: Command) -> None:
        try:
            await self._run(ref, rec, cmd)
        except BadCredentials as exc:
            await account_pause.pause(self.ctx.pause, "github", short_error(exc), self.ctx.clock())
        except RateLimited as exc:
            until = self.ctx.clock() + timedelta(seconds=exc.wait_s)
            error = short_error(exc)
            await self._update(ref, cmd, lambda c: _pause(c, until, error))
            log.warning("%s: /bot %d waits until %s: %s", ref, cmd.comment_id,
                        until.isoformat(), exc)
        except Exception as exc:
            if local_failure(exc):
                raise   # the store failed: retried later, no attempt counted (see review.py)
            if not isinstance(exc, GitHubError | ChatFailed):
                log.exception("%s: /bot %d failed with an exception", ref, cmd.comment_id)
            await self._failed(ref, cmd, short_error(exc))

    async def _run(self, ref: PrRef, rec: PrRecord, cmd: Command) -> None:
        ctx = self.ctx
        owner, name, number = ref.owner, ref.name, ref.number
        if cmd.action != "chat":
            # The bot's own commands: no model turn, no PR read (``bot_commands``).
            try:
                await bot_commands.answer(ctx, ref, cmd)
            except bot_commands.NotYet as why:
                await self._recheck(ref, cmd, str(why))
                return
            await self._done(ref, cmd)
            return
        if await already_replied(ctx.client, owner, name, number, cmd, ctx.acct.identity):
            log.info("%s: /bot %d was already answered", ref, cmd.comment_id)
            await self._done(ref, cmd)
            return
        pr = await ctx.client.get_pull(owner, name, number)
        if pr.draft:
            await ctx.store.mark_draft(ref)
            log.info("%s: is a draft; /bot %d waits until it is ready", ref, cmd.comment_id)
            return
        stored = await ctx.store.instructions(rec.instructions_key)
        instructions = TrustedInstructions(stored.source, stored.text) if stored else None
        chat = Trigger.chat(ctx.acct.key, cmd.comment_id)
        result = await ctx.runner.chat(ctx.acct, pr, chat, instructions,
                                       cmd.author, cmd.message, cmd.path, cmd.line)
        if not result.ok and result.failure == "auth":
            await account_pause.pause(ctx.pause, "model", "the model provider rejected the API "
                                      f"key: {redact_secrets(result.error or '')}"[:300],
                                      ctx.clock())
            return
        if not result.ok:
            raise ChatFailed(result.error or "chat failed")
        await account_pause.resume(ctx.pause, "model")
        if result.text:
            posted = await post_reply(ctx.client, owner, name, number, cmd, result.text,
                                      ctx.acct.identity)
            log.info("%s: /bot %d answered%s", ref, cmd.comment_id,
                     "" if posted else " (reply was already posted)")
        else:
            log.info("%s: /bot %d: empty answer; nothing posted", ref, cmd.comment_id)
        await self._done(ref, cmd)
        await update_summary(ctx, ref, reviewing=None, last_reviewed=rec.reviewed_head_sha)

    async def _update(self, ref: PrRef, cmd: Command, fn) -> None:
        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is not None:
                for i, c in enumerate(e.queued):
                    if c.comment_id == cmd.comment_id:
                        new = fn(c)
                        if new is None:
                            del e.queued[i]
                        break
            return e
        await self.ctx.store.update_pr(ref, apply)

    async def _recheck(self, ref: PrRef, cmd: Command, why: str) -> None:
        """A thread reply read again later (not a failed attempt): its author's 👎 may follow."""
        wait = max(bot_commands.TEACH_RECHECK_S, 3 * self.ctx.cfg.poll_interval_s)
        until = self.ctx.clock() + timedelta(seconds=wait)

        def later(c: Command) -> Command:
            c.rechecks += 1
            c.next_attempt_at = until
            return c
        await self._update(ref, cmd, later)
        log.info("%s: %s; read again at %s", ref, why, until.isoformat())

    async def _done(self, ref: PrRef, cmd: Command) -> None:
        await self._update(ref, cmd, lambda c: None)

    async def _failed(self, ref: PrRef, cmd: Command, error: str) -> None:
        now = self.ctx.clock()
        limit = self.ctx.cfg.review.max_attempts
        interval = self.ctx.cfg.poll_interval_s
        log.warning("%s: /bot %d failed: %s", ref, cmd.comment_id, error)

        def apply(e: PrRecord | None) -> PrRecord | None:
            if e is None:
                return None
            for c in list(e.queued):
                if c.comment_id != cmd.comment_id:
                    continue
                c.attempts += 1
                c.last_error, c.last_failed_at = error, now
                c.next_attempt_at = now + backoff(c.attempts, interval)
                if c.attempts >= limit and c.action == "teach":
                    # A reply nobody sent as a command: giving up on reading it for a lesson
                    # is logged, not announced on the PR.
                    e.queued.remove(c)
                    log.error("%s: gave up reading reply %d for a lesson after %d attempts",
                              ref, c.comment_id, c.attempts)
                elif c.attempts >= limit:
                    e.queued.remove(c)
                    e.add_notice(Notice(trigger=Trigger.bot(self.ctx.acct.key, c.comment_id),
                                        what=f"the /bot command {c.comment_id}", error=error,
                                        created_at=now))
                    log.error("%s: gave up on /bot %d after %d attempts", ref, c.comment_id,
                              c.attempts)
            return e
        await self.ctx.store.update_pr(ref, apply)


def _pause(c: Command, until, error: str) -> Command:
    c.next_attempt_at, c.last_error = until, error
    return c
