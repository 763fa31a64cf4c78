"""One ``dsh run`` per home: an exclusive ``fcntl`` lock on ``<home>/run.lock``.

Two processes on one home would review every PR twice, answer every command twice and
interleave their session logs. The lock is held for the life of the process (the kernel drops
it when the process dies, even on SIGKILL, so a crash never leaves a stale lock); the file
records the holder's PID so a refused second run can name it. Read-only commands (``status``,
``sessions``, ``web``) never take it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import DshError

LOCK_NAME = "run.lock"


class HomeLocked(DshError):
    pass


class HomeLock:
    def __init__(self, home: Path):
        self.path = home / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise HomeLocked(f"another dsh run (pid {holder}) is using the home {self.path.parent}"
                             f" (lock file {self.path}); stop it first, or give this one its "
                             "own home") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> HomeLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
