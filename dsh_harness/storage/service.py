"""The harness storage service: backends by name, domains by declaration, routing, copies."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import StorageError
from .base import Domain, DomainSpec, StorageBackend

log = logging.getLogger(__name__)

BackendFactory = Callable[[Path], StorageBackend]
DEFAULT_BACKUPS_KEEP = 5
_STAMP = re.compile(r"^\d{8}T\d{6}\.\d{6}Z$")


@dataclass(frozen=True)
class CopyReport:
    records: int
    backup: Path | None  # where the destination's replaced records were saved, if it had any


class StorageService:
    """Opens declared domains on the configured backend (or a per-domain route)."""

    def __init__(self, directory: Path, default_backend: str, routes: dict[str, str],
                 factories: dict[str, BackendFactory], specs: dict[str, DomainSpec],
                 backups_keep: int = DEFAULT_BACKUPS_KEEP):
        self.directory = directory
        self.backups_keep = backups_keep
        self.default_backend = default_backend
        self.routes = dict(routes)
        self.factories = factories
        self.specs = specs
        self._backends: dict[str, StorageBackend] = {}
        self._domains: dict[str, Domain] = {}
        for label, name in [("storage.backend", default_backend),
                            *[(f"storage.routes.{d}", b) for d, b in routes.items()]]:
            if name not in factories:
                raise StorageError(f"{label}: unknown storage backend {name!r} "
                                   f"(available: {', '.join(sorted(factories))})")

    def backend(self, name: str) -> StorageBackend:
        if name not in self.factories:
            raise StorageError(f"unknown storage backend {name!r} "
                               f"(available: {', '.join(sorted(self.factories))})")
        if name not in self._backends:
            self._backends[name] = self.factories[name](self.directory)
        return self._backends[name]

    def backend_for(self, domain: str) -> str:
        return self.routes.get(domain, self.default_backend)

    def spec(self, domain: str) -> DomainSpec:
        try:
            return self.specs[domain]
        except KeyError:
            raise StorageError(f"no enabled plugin declares storage domain {domain!r} "
                               f"(declared: {', '.join(sorted(self.specs)) or 'none'})") from None

    async def domain(self, name: str) -> Domain:
        """The opened domain ``name`` on its routed backend (opened once, then shared)."""
        if name not in self._domains:
            self._domains[name] = await Domain.open(self.spec(name),
                                                    self.backend(self.backend_for(name)))
        return self._domains[name]

    async def open_on(self, name: str, backend: str) -> Domain:
        """Open ``name`` on a specific backend, outside the routing (for copy and dump)."""
        return await Domain.open(self.spec(name), self.backend(backend))

    async def copy(self, name: str, source: str, target: str, *,
                   force: bool = False) -> CopyReport:
        """Copy a domain between backends and verify it record by record.

        A destination that already holds records is replaced only with ``force``, and then
        its records are first written to a backup file (an empty source must never silently
        wipe a live destination).
        """
        if source == target:
            raise StorageError("storage copy: --from and --to name the same backend")
        src = await self.open_on(name, source)
        try:
            data = await src.export()
        finally:
            await src.close()
        dst = await self.open_on(name, target)
        backup: Path | None = None
        try:
            existing = await dst.export()
            held = sum(len(rows) for rows in existing.values())
            if held and not force:
                raise StorageError(
                    f"storage copy: {target} already holds {held} records of {name!r} (the "
                    f"source {source} holds {sum(len(r) for r in data.values())}); pass --force "
                    "to replace them (a backup of them is written first)")
            if held:
                backup = self._write_backup(name, target, dst.spec.version, existing)
            await dst.replace_all(data)
            copied = await dst.export()
        finally:
            await dst.close()
        for table, rows in data.items():
            got = copied.get(table, {})
            missing = sorted(set(rows) - set(got))
            differ = sorted(k for k in rows if k in got and got[k] != rows[k])
            extra = sorted(set(got) - set(rows))
            if missing or differ or extra:
                raise StorageError(
                    f"storage copy of {name!r} to {target} did not verify in table {table!r}: "
                    f"{len(missing)} missing, {len(differ)} different, {len(extra)} extra "
                    f"(first: {(missing or differ or extra)[0]!r})")
        return CopyReport(sum(len(rows) for rows in data.values()), backup)

    def _write_backup(self, name: str, backend: str, version: int,
                      tables: dict[str, dict[str, str]]) -> Path:
        """``storage/backups/<domain>.<backend>.<UTC time>.json``, the shape of
        ``dsh storage dump --json``; durable before the destination is touched.

        The records are the deployment's state (PR titles, comment texts): the directory is
        0700 and each file 0600, whatever the umask. Only the newest ``backups_keep`` backups of
        a domain and backend are kept, so repeated copies cannot fill the disk."""
        directory = self.directory / "backups"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask and skips old dirs
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        path = directory / f"{name}.{backend}.{stamp}.json"
        body = {"domain": name, "version": version, "backend": backend,
                "tables": {t: {k: json.loads(v) for k, v in rows.items()}
                           for t, rows in tables.items()}}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "w", encoding="utf-8") as fh:
            json.dump(body, fh, ensure_ascii=False, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        self._prune_backups(directory, name, backend)
        return path

    def backups(self, name: str, backend: str) -> list[Path]:
        """The backups of ``name`` taken from ``backend``, oldest first."""
        directory = self.directory / "backups"
        prefix = f"{name}.{backend}."
        if not directory.is_dir():
            return []
        found = [p for p in directory.iterdir()
                 if p.name.startswith(prefix) and p.name.endswith(".json")
                 and _STAMP.match(p.name[len(prefix):-len(".json")])]
        return sorted(found, key=lambda p: p.name)  # the UTC stamp sorts by time

    def _prune_backups(self, directory: Path, name: str, backend: str) -> None:
        old = self.backups(name, backend)[:-self.backups_keep]
        for path in old:
            path.unlink(missing_ok=True)
            log.info("storage copy: removed old backup %s (storage.backups_keep = %d)",
                     path, self.backups_keep)

    async def close(self) -> None:
        for domain in self._domains.values():
            await domain.close()
        self._domains.clear()
        for backend in self._backends.values():
            await backend.close()
        self._backends.clear()
