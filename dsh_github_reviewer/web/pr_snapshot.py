"""The PR list as last built, saved in ``<home>/web/prs.json`` so that a restart shows it at
once instead of waiting for the session index and 10,000 work records to be read and folded.

A restarted ``dsh web`` serves its first pages from this snapshot (rows, totals per repository
and account) while the real index is built behind; a page's own rows still read their work
records fresh (``states_of``), so only the totals and the order can be a few seconds old. The
file is written after the first build and then at most every ``SAVE_EVERY_S`` (best effort: a
read-only home just means a slower restart); a file of another version, or one that does not
parse, is ignored. Links are checked again on load like any link from data.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from .facts import web_url

log = logging.getLogger(__name__)

VERSION = 1   # bump when PrRow or the totals change shape: an old file is then ignored
SAVE_EVERY_S = 30.0


def _fields(row_type: type) -> list[str]:
    # ``days`` only feeds the totals, which the snapshot keeps already added up; ``saved`` is
    # the row's serialized form itself.
    return [f.name for f in dataclasses.fields(row_type) if f.name not in ("days", "saved")]


def _row_json(row: Any, names: list[str]) -> str:
    saved = row.saved
    if saved is None or saved[0] != row.record_state:   # the one field set in place
        saved = row.saved = (row.record_state, json.dumps(
            [getattr(row, n) for n in names], ensure_ascii=False, separators=(",", ":")))
    return saved[1]


class PrSnapshot:
    def __init__(self, path: Path):
        self.path = path
        self._saved_for: Any = None
        self._saved_at = 0.0

    def due(self, *version: Any) -> bool:
        """Whether the index built from ``version`` (the objects it came from, compared by
        identity) should be written now: the first build at once, then every SAVE_EVERY_S."""
        saved = self._saved_for
        if saved is not None and all(a is b for a, b in zip(version, saved, strict=True)):
            return False
        return saved is None or time.monotonic() - self._saved_at > SAVE_EVERY_S

    def take(self, index: Any, *version: Any) -> str:
        """What to write, taken on the loop (rows change after); ``write`` it in a thread."""
        self._saved_for, self._saved_at = version, time.monotonic()
        names = _fields(type(index.rows[0])) if index.rows else []
        head = json.dumps({"version": VERSION, "fields": names, "repos": index.repos,
                           "accounts": index.accounts}, ensure_ascii=False,
                          separators=(",", ":"))
        return (head[:-1] + ',"rows":['
                + ",".join(_row_json(r, names) for r in index.rows) + "]}")

    def write(self, text: str) -> None:
        """In a worker thread: a temporary file renamed over the old one."""
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp.write_bytes(text.encode())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.debug("PR list snapshot not saved: %s", exc)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def load(self, row_type: type) -> dict[str, Any] | None:
        """``{"rows": [...], "repos": {...}, "accounts": {...}}`` or None (no usable file)."""
        try:
            data = json.loads(self.path.read_bytes())
            names = _fields(row_type)
            if data.get("version") != VERSION or data.get("fields") != names:
                return None
            rows = []
            for values in data["rows"]:
                row = row_type(**dict(zip(names, values, strict=True)))
                row.key = tuple(row.key)
                row.url = web_url(row.url)
                rows.append(row)
            if not isinstance(data["repos"], dict) or not isinstance(data["accounts"], dict):
                return None
        except FileNotFoundError:
            return None
        except Exception as exc:  # a torn or foreign file: the real index is built instead
            log.warning("the saved PR list %s is not usable (%s); building it instead",
                        self.path.name, exc)
            return None
        return {"rows": rows, "repos": data["repos"], "accounts": data["accounts"]}
