"""One process that writes a home at a time: an exclusive ``fcntl`` lock on ``<home>/run.lock``.

Two ``dsh run`` on one home would review every PR twice, answer every command twice and
interleave their session logs; a ``dsh storage copy`` under a running ``dsh run`` would replace
the store the run then writes its own state back into. Both take this lock for their whole life
(the kernel drops it when the process dies, even on SIGKILL, so a crash never leaves a stale
lock). The file records the holder's PID and command so a refused second process can name it,
and is removed on release, so a home nobody runs shows no lock file. ``dsh sessions copy``
takes it too. Read-only commands (``status``, ``sessions list|show``, ``web``,
``storage ls|dump``) never take it.
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
    def __init__(self, home: Path, what: str = "dsh run"):
        self.path = home / LOCK_NAME
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid, _, what = (os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
                                .partition("\n"))
                os.close(fd)
                # A second dsh run may get its own home; a copy must act on this one.
                advice = ("stop it first, or give this one its own home" if self.what == "dsh run"
                          else f"stop it first, then run {self.what} again")
                raise HomeLocked(
                    f"another {what.strip() or 'dsh run'} (pid {pid.strip() or 'unknown'}) is "
                    f"using the home {self.path.parent} (lock file {self.path}); {advice}"
                ) from None
            # The previous holder unlinks the file on release: if it did so between our open and
            # our flock, we locked a file nobody else will ever open again. Retry on the new one.
            try:
                current = os.stat(self.path)
            except FileNotFoundError:
                current = None
            mine = os.fstat(fd)
            if current is not None and (current.st_ino, current.st_dev) == (mine.st_ino,
                                                                            mine.st_dev):
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{self.what}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            # Unlinked while still held, so no other process can lock the name in between.
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> HomeLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
