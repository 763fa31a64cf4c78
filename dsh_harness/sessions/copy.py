"""``dsh sessions copy``: move session logs between stores as their exact bytes.

Each log is read whole from the source (``read_from(id, 0)``: the JSONL bytes), checked line by
line (a corrupted line stops the copy, naming it; a torn final line is left behind, as a resume
would cut it), written to the target with ``put_raw`` and read back: the copy is verified byte
for byte, so a copied session replays to the same request bytes. A target log that already holds
exactly those bytes, or a prefix of them (an earlier copy of a log that has grown since), is
brought up to date; a target log that differs otherwise is replaced only with ``force``, after
its bytes were saved to a backup file.

A shared target (``postgres``) may be written by replicas on other hosts, which the home lock
does not see: a copy onto it is refused while any replica is alive there (a recent heartbeat)
or holds a lease (``live_writers``): their turns since would be replaced or mixed with the copy.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..storage.json_backend import atomic_write
from .jsonl_store import SessionLogError, _parse, file_name
from .store import SessionStore


@dataclass
class SessionsCopyReport:
    copied: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # differed; backed up, then replaced
    backups: Path | None = None
    dropped_tails: int = 0  # torn final lines left behind


# A replica beats every 10 s (default_plugins/replicas.py): three missed beats and it is gone.
LIVE_HEARTBEAT_S = 30.0


async def live_writers(leases: Any) -> list[str]:
    """The replicas that may be writing on the shared database now: a heartbeat within
    ``LIVE_HEARTBEAT_S``, or an unexpired lease (``leases``: ``storage.leases.Leases``)."""
    if not leases.shared:
        return []
    now = datetime.now(UTC)
    alive = {r.id for r in await leases.replicas()
             if now - r.heartbeat_at < timedelta(seconds=LIVE_HEARTBEAT_S)}
    alive |= {lease.owner for lease in await leases.held("")}
    return sorted(alive)


async def _raw(store: SessionStore, session_id: str) -> bytes:
    raw = await store.read_from(session_id, 0)
    if raw is None:
        raise SessionLogError(f"the {store.name} session store cannot export logs")
    return raw


async def copy_sessions(source: SessionStore, target: SessionStore, *, ids: list[str] | None,
                        force: bool, backup_dir: Path, backups_keep: int = 5
                        ) -> SessionsCopyReport:
    if source.name == target.name:
        raise SessionLogError("sessions copy: --from and --to name the same store")
    wanted = ids if ids else await source.list_ids()
    report = SessionsCopyReport()
    plan: list[tuple[str, bytes, bytes | None]] = []
    conflicts: list[str] = []
    for sid in wanted:
        if not await source.exists(sid):
            raise SessionLogError(f"sessions copy: session {sid!r} is not in the {source.name} "
                                  "store")
        raw = await _raw(source, sid)
        parsed = _parse(f"{source.name} session {sid!r}", raw, first_line=1)
        if parsed.header is None or parsed.header.id != sid:
            raise SessionLogError(f"sessions copy: {source.name} session {sid!r} has no header "
                                  "naming it; nothing was copied")
        report.dropped_tails += parsed.dropped
        raw = raw[:parsed.good_len]
        existing = await _raw(target, sid) if await target.exists(sid) else None
        if existing == raw:
            report.unchanged.append(sid)
            continue
        if existing is not None and not raw.startswith(existing):
            conflicts.append(sid)
        plan.append((sid, raw, existing))
    if conflicts and not force:
        shown = ", ".join(repr(s) for s in conflicts[:5])
        more = f" and {len(conflicts) - 5} more" if len(conflicts) > 5 else ""
        raise SessionLogError(
            f"sessions copy: the {target.name} store holds {len(conflicts)} session(s) whose "
            f"log differs from the {source.name} one ({shown}{more}); nothing was copied. "
            "Pass --force to replace them (their logs are saved to a backup first)")
    for sid, raw, existing in plan:
        if existing is not None and not raw.startswith(existing):
            report.backups = _backup(backup_dir, target.name, sid, existing)
            report.replaced.append(sid)
        await target.put_raw(sid, raw)
        if await _raw(target, sid) != raw:
            raise SessionLogError(f"sessions copy: session {sid!r} did not verify in the "
                                  f"{target.name} store (its bytes differ after the write)")
        report.copied.append(sid)
    if report.backups is not None:
        _prune_backups(backup_dir, target.name, backups_keep)
    return report


def _prune_backups(directory: Path, store: str, keep: int) -> None:
    """Only the newest ``keep`` backup folders of a store stay (``storage.backups_keep``, as
    for storage copies): each holds whole session logs, so they would pile up forever."""
    folders = sorted(p for p in directory.glob(f"*.{store}") if p.is_dir())
    for old in folders[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _backup(directory: Path, store: str, session_id: str, data: bytes) -> Path:
    """``<dir>/<UTC time>.<store>/<session file name>``, durable before the log is replaced."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = directory / f"{stamp}.{store}"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(folder / file_name(session_id), data)
    return folder
