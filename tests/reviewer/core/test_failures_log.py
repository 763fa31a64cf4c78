"""A local failure (storage: full disk, damaged or locked database) is one log line without a
traceback, not repeated by every PR and tick while it lasts; anything else
keeps its traceback."""

from __future__ import annotations

import logging

from dsh_github_reviewer.core import failures
from dsh_harness import StorageError

log = logging.getLogger("test.failures")


def test_a_storage_failure_is_one_line_once(caplog, monkeypatch):
    monkeypatch.setattr(failures, "_last_logged", {})
    caplog.set_level(logging.DEBUG, logger="test.failures")
    full = StorageError("/h/storage/dsh.sqlite3: the disk is full (SQLite: database or disk "
                        "is full); free space and the work resumes")
    for n in range(130):
        failures.log_failure(log, full, "%s: work not done", f"demo:o/r#{n}")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "demo:o/r#0: work not done: /h/storage/dsh.sqlite3: the disk is full (SQLite: database "
        "or disk is full); free space and the work resumes"]
    assert not any(r.exc_info for r in caplog.records)
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 129
    failures.log_failure(log, StorageError("another cause"), "tick failed")
    assert [r.levelno for r in caplog.records][-1] == logging.ERROR, "a new cause is said"


def test_any_other_exception_keeps_its_traceback(caplog):
    caplog.set_level(logging.ERROR, logger="test.failures")
    try:
        raise KeyError("bug")
    except KeyError as exc:
        failures.log_failure(log, exc, "tick failed")
    [record] = caplog.records
    assert record.exc_info is not None and record.getMessage() == "tick failed"
