"""The ``json`` storage backend: one JSON file per domain under ``<home>/storage/``.

Every write rewrites the whole file through a temp file, fsync, rename and a directory fsync,
so a crash leaves either the old or the new file, never a mix. A file that does not parse is
reported and never overwritten. Reads notice when another process replaced the file (``dsh
web`` reading while ``dsh run`` writes) and reload it.

``.dsh-domains`` in the directory lists every domain that has ever written its file there, so a
domain file that is missing although it was written before (deleted, lost in a copy) is told
apart from a first start: it starts empty all the same, with a warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

from ..errors import StorageError
from .base import DomainSpec, StorageBackend, StoredDomain, WriteOp

log = logging.getLogger(__name__)

_Signature = tuple[int, int, int]
INDEX_NAME = ".dsh-domains"


def _written_before(directory: Path) -> set[str]:
    try:
        return set((directory / INDEX_NAME).read_text(encoding="utf-8").split())
    except FileNotFoundError:
        return set()


def _remember(directory: Path, domain: str) -> None:
    known = _written_before(directory)
    if domain not in known:
        atomic_write(directory / INDEX_NAME, "".join(f"{d}\n" for d in sorted(known | {domain}))
                     .encode("utf-8"))


def _signature(path: Path) -> _Signature | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably, mode 0600."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


class JsonStoredDomain(StoredDomain):
    def __init__(self, path: Path, spec: DomainSpec):
        """Reads the file (blocking: construct it in a thread); a handle is always loaded."""
        self.path, self.spec = path, spec
        self._version: int | None = None
        # table -> key -> canonical JSON text; undeclared tables are kept so no data is lost.
        self._tables: dict[str, dict[str, str]]
        self._seen: _Signature | None
        self._load()

    def _load(self) -> None:
        sig = _signature(self.path)
        if sig is None:
            if self._version is None and self.spec.name in _written_before(self.path.parent):
                log.warning("domain %r: %s is missing although it was written before; starting "
                            "empty - if it held data, stop dsh and restore it from a backup",
                            self.spec.name, self.path)
            self._version, self._tables, self._seen = None, {}, None
            return
        try:
            raw = self.path.read_bytes()
            doc = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise StorageError(
                f"domain {self.spec.name!r}: {self.path} is corrupted or truncated ({exc}); "
                "it was left untouched - restore it from a backup or move it away"
            ) from None
        if (not isinstance(doc, dict) or doc.get("domain") != self.spec.name
                or not isinstance(doc.get("version"), int)
                or not isinstance(doc.get("tables"), dict)
                or not all(isinstance(t, dict) for t in doc["tables"].values())):
            raise StorageError(
                f"domain {self.spec.name!r}: {self.path} is not a dsh domain file for this "
                "domain (expected keys domain, version, tables); it was left untouched"
            )
        self._version = doc["version"]
        self._tables = {
            table: {key: json.dumps(value, sort_keys=True, ensure_ascii=False,
                                    separators=(",", ":"))
                    for key, value in rows.items()}
            for table, rows in doc["tables"].items()
        }
        self._seen = sig

    def _fresh(self) -> None:
        if _signature(self.path) != self._seen:
            self._load()

    def _render(self, version: int, tables: dict[str, dict[str, str]]) -> bytes:
        parts = []
        for table in sorted(tables):
            rows = tables[table]
            body = ",\n".join(f"  {json.dumps(k, ensure_ascii=False)}: {rows[k]}"
                              for k in sorted(rows))
            parts.append(f"{json.dumps(table)}: {{\n{body}\n}}" if rows else
                         f"{json.dumps(table)}: {{}}")
        doc = (f'{{"domain": {json.dumps(self.spec.name)}, "version": {version}, "tables": {{\n'
               + ",\n".join(parts) + "\n}}\n")
        return doc.encode("utf-8")

    def _commit(self, version: int, tables: dict[str, dict[str, str]]) -> None:
        # Created on the first write, not at open: reading an empty home must not create it.
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(self.path, self._render(version, tables))
        _remember(self.path.parent, self.spec.name)
        self._version, self._tables, self._seen = version, tables, _signature(self.path)

    async def stored_version(self) -> int | None:
        self._fresh()
        return self._version

    async def get(self, table: str, key: str) -> str | None:
        self._fresh()
        return self._tables.get(table, {}).get(key)

    async def items(self, table: str) -> list[tuple[str, str]]:
        self._fresh()
        return sorted(self._tables.get(table, {}).items())

    async def write(self, version: int, ops: list[WriteOp]) -> None:
        self._fresh()
        tables = {t: dict(rows) for t, rows in self._tables.items()}
        for table in self.spec.tables:
            tables.setdefault(table, {})
        for table, key, text in ops:
            rows = tables.setdefault(table, {})
            if text is None:
                rows.pop(key, None)  # deleting a missing key is no error
            else:
                rows[key] = text
        await asyncio.to_thread(self._commit, version, tables)

    async def replace_all(self, version: int, data: dict[str, dict[str, str]]) -> None:
        self._fresh()
        tables = {t: rows for t, rows in self._tables.items() if t not in self.spec.tables}
        for table in self.spec.tables:
            tables[table] = dict(data.get(table, {}))
        await asyncio.to_thread(self._commit, version, tables)


class JsonBackend(StorageBackend):
    name = "json"

    def __init__(self, directory: Path):
        self.directory = directory

    async def open(self, spec: DomainSpec) -> JsonStoredDomain:
        return await asyncio.to_thread(JsonStoredDomain, self.directory / f"{spec.name}.json",
                                       spec)

    async def list_domains(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json") if not p.name.startswith("."))
