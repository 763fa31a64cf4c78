"""A local storage failure is never a failed attempt: the store refuses one
write (``database is locked``) right after the bot's review or reply is on GitHub; nothing is
recorded as failed, the work is retried after the scheduler's hold and found done by its marker.
"""

from __future__ import annotations

import pytest

from dsh_github_reviewer.testing.scenario import REPO, build_shop
from dsh_github_reviewer.work.store import WorkStore
from dsh_harness import StorageError
from dsh_harness.sessions.jsonl_store import JsonlSessionStore

from .conftest import Deployment
from .fault_kit import Clock, replies_to

pytestmark = pytest.mark.slow


class LockedOnce:
    """``update_pr`` fails once, the first time it runs after ``armed()`` turns true."""

    def __init__(self, monkeypatch, armed):
        self.armed, self.failed = armed, 0
        real = WorkStore.update_pr

        async def update_pr(store, key, fn):
            if not self.failed and self.armed():
                self.failed += 1
                raise StorageError("dsh.sqlite3 is locked by another process (SQLite: "
                                   "database is locked)")
            return await real(store, key, fn)
        monkeypatch.setattr(WorkStore, "update_pr", update_pr)


async def test_a_store_failure_after_the_post_counts_no_attempt(tmp_path, sandbox80, model,
                                                                monkeypatch):
    build_shop(sandbox80)
    clock = Clock(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
    try:
        fault = LockedOnce(monkeypatch, lambda: bool(dep.reviews()))
        await dep.tick()
        assert fault.failed == 1 and len(dep.reviews()) == 1
        rec = await dep.entry()
        assert rec.status == "reviewing", "the record could not say 'reviewed' yet"
        assert (rec.fail_count, rec.last_failed_at, rec.last_error) == (0, None, None), \
            "a review on GitHub recorded as a failed attempt"
        clock.skip(600)                      # past the scheduler's in-memory hold
        await dep.tick()
        rec = await dep.entry()
        assert (rec.status, rec.fail_count, rec.reviews_done) == ("reviewed", 0, 1)
        assert len(dep.reviews()) == 1 and len(model.served) > 0

        cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot why?")
        fault = LockedOnce(monkeypatch, lambda: bool(replies_to(sandbox80, cmd.id)))
        await dep.tick()
        assert fault.failed == 1 and len(replies_to(sandbox80, cmd.id)) == 1
        [queued] = (await dep.entry()).queued
        assert (queued.attempts, queued.last_error) == (0, None)
        clock.skip(600)
        await dep.tick()
        rec = await dep.entry()
        assert rec.queued == [] and rec.notices == []
        assert len(replies_to(sandbox80, cmd.id)) == 1
    finally:
        await dep.stop()


async def test_a_session_log_that_cannot_be_written_counts_no_attempt(tmp_path, sandbox80, model,
                                                                      monkeypatch):
    """The session log refuses one write (a full disk) in the middle of a review turn: the turn
    fails, but that is this machine's failure, not the review's: no attempt is counted and the
    review runs again after the scheduler's hold."""
    build_shop(sandbox80)
    clock = Clock(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
    real = JsonlSessionStore.append
    state = {"appends": 0, "failed": 0}

    async def append(store, session_id, events, **kw):
        state["appends"] += 1
        if state["appends"] == 4 and not state["failed"]:   # inside the turn
            state["failed"] += 1
            raise OSError(28, "No space left on device")
        return await real(store, session_id, events, **kw)
    monkeypatch.setattr(JsonlSessionStore, "append", append)
    try:
        await dep.tick()
        assert state["failed"] == 1 and dep.reviews() == []
        rec = await dep.entry()
        assert rec.status == "reviewing"
        assert (rec.fail_count, rec.last_error) == (0, None), "a full disk is no failed attempt"
        clock.skip(600)
        await dep.tick()
        assert len(dep.reviews()) == 1 and (await dep.entry()).status == "reviewed"
    finally:
        await dep.stop()


async def test_a_database_connection_lost_during_a_poll_is_one_log_line(tmp_path, sandbox80,
                                                                        model, monkeypatch,
                                                                        caplog):
    """A terminated database connection while a repository is polled: one
    line naming the cause, no traceback, and the next tick polls again."""
    import logging

    from dsh_github_reviewer.sources.poll import AccountPoller

    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model).start()
    real = AccountPoller._poll_repo
    state = {"failed": 0}

    async def poll_repo(self, full, account, now):
        if not state["failed"]:
            state["failed"] += 1
            raise StorageError("storage domain 'reviewer' on postgresql://db/dsh: "
                               "terminating connection due to administrator command")
        return await real(self, full, account, now)
    monkeypatch.setattr(AccountPoller, "_poll_repo", poll_repo)
    try:
        with caplog.at_level(logging.INFO):
            await dep.tick()
        lines = [r for r in caplog.records if "administrator command" in r.getMessage()]
        assert len(lines) == 1 and lines[0].exc_info is None, "one line, no traceback"
        await dep.tick()
        assert await dep.entry() is not None, "the next tick polled again"
    finally:
        await dep.stop()


async def test_a_full_disk_while_polling_is_one_log_line_not_one_per_tick(tmp_path, sandbox80,
                                                                          model, monkeypatch,
                                                                          caplog):
    """Every write fails (a full disk): the expected storage error is one ERROR line for the
    whole outage — no traceback, no second line about failing to record the first, none
    repeated at every tick."""
    import logging

    from dsh_github_reviewer.work.inbox import Inbox

    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model).start()
    full = StorageError("home/storage/dsh.sqlite3: the disk is full (SQLite: database or "
                        "disk is full); free space and the work resumes")

    async def refuse(*_a, **_kw):
        raise full
    monkeypatch.setattr(Inbox, "record", refuse)
    monkeypatch.setattr(WorkStore, "update_account", refuse)
    try:
        with caplog.at_level(logging.INFO):
            for _ in range(3):
                await dep.tick()
        errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert [r.getMessage() for r in errors] == [f"account demo: tick failed: {full}"]
        assert all(r.exc_info is None for r in caplog.records), "no traceback"
    finally:
        await dep.stop()
