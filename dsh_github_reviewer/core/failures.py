"""Logging a failure so that it says something, once.

A local failure the operator must fix outside dsh (a full disk, a damaged or locked database:
``dsh_harness.StorageError``, whose message already names the file and the cause) is one log
line without a traceback, and the same line is not repeated by every PR and every tick while
the cause lasts: the first is an error, repeats within ``REPEAT_AFTER_S`` go to debug. Any other
exception is a bug or an unknown failure and keeps its traceback.
"""

from __future__ import annotations

import logging
import time

from dsh_harness import StorageError

REPEAT_AFTER_S = 600.0
_last_logged: dict[str, float] = {}


def local_failure(exc: BaseException) -> bool:
    """A failure of this machine (storage), never of the work: it counts no attempt."""
    return isinstance(exc, StorageError)


def log_failure(logger: logging.Logger, exc: BaseException, msg: str, *args: object) -> None:
    """``msg % args`` followed by the error: one line for a local failure, else a traceback."""
    if not local_failure(exc):
        logger.error(msg, *args, exc_info=exc)
        return
    text = str(exc)
    now = time.monotonic()
    last = _last_logged.get(text)
    if last is not None and now - last < REPEAT_AFTER_S:
        logger.debug(msg + ": %s", *args, text)
        return
    _last_logged[text] = now
    logger.error(msg + ": %s", *args, text)
