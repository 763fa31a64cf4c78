"""Storage domains: typed key → record tables that plugins declare and backends persist.

A backend stores raw JSON text per (table, key); a ``Domain`` validates every record against
the declared pydantic model, at open and on every read, so callers always receive fresh copies
and never a half-valid object. Writes of one domain are serialized by one lock and return only
when the backend has made them durable.
"""

from __future__ import annotations

import asyncio
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import StorageError
from ..validation import error_lines

log = logging.getLogger(__name__)

R = TypeVar("R", bound=BaseModel)
PARSE_IN_THREAD = 500  # ``Domain.all`` of more records validates them in a worker thread

# One write operation: (table, key, JSON text) or (table, key, None) for a delete.
WriteOp = tuple[str, str, str | None]

# A migration step: the declared tables' records as plain JSON values (table -> key -> value)
# stored under version N, returned as they must be stored under version N + 1.
RawTables = dict[str, dict[str, Any]]
Migration = Callable[[RawTables], RawTables]


@dataclass(frozen=True)
class DomainSpec:
    """A plugin's declaration of a storage domain.

    ``version`` is stamped into storage. ``migrations[n]`` turns the records stored under
    version ``n`` into version ``n + 1``; opening a domain stored under an older version runs
    the chain and rewrites the domain in one atomic write (both backends), so a crash leaves
    the old or the new layout, never a mix. An older version without a complete chain, or a
    newer one, is an error: old records are never silently reinterpreted.
    """

    name: str
    version: int
    tables: dict[str, type[BaseModel]] = field(default_factory=dict)
    migrations: dict[int, Migration] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for label in (self.name, *self.tables):
            if not label or not all(c.isalnum() or c in "_-" for c in label):
                raise StorageError(
                    f"domain {self.name!r}: name {label!r} may only use letters, digits, _ and -"
                )
        if self.version < 1:
            raise StorageError(f"domain {self.name!r}: version must be >= 1")


class StoredDomain(ABC):
    """A backend's handle on one opened domain: raw JSON text per (table, key)."""

    @abstractmethod
    async def stored_version(self) -> int | None:
        """The version stamped in storage, or None for a domain never written."""

    @abstractmethod
    async def get(self, table: str, key: str) -> str | None: ...

    @abstractmethod
    async def items(self, table: str) -> list[tuple[str, str]]:
        """All (key, text) pairs of a table, sorted by key."""

    @abstractmethod
    async def write(self, version: int, ops: list[WriteOp]) -> None:
        """Apply ops atomically and durably, stamping ``version``."""

    @abstractmethod
    async def replace_all(self, version: int, data: dict[str, dict[str, str]]) -> None:
        """Replace the whole content of the declared tables (used by ``storage copy``)."""

    @asynccontextmanager
    async def atomic(self) -> AsyncIterator[StoredDomain]:
        """A view of the domain whose reads and (at most one) ``write`` are one transaction.

        A backend shared by several processes (a database server) overrides this so that a
        read-modify-write is one database transaction that also excludes the other processes'
        writers of the domain. The default is the handle itself: the domain's lock already
        serializes the writers of this process, and ``write`` is atomic on its own.
        """
        yield self

    async def close(self) -> None:  # noqa: B027 - optional for backends
        pass


class StorageBackend(ABC):
    """A named way to persist domains (``json``, ``sqlite``, or a plugin's own)."""

    name: str

    @abstractmethod
    async def open(self, spec: DomainSpec) -> StoredDomain: ...

    @abstractmethod
    async def list_domains(self) -> list[str]:
        """Names of the domains that exist in this backend."""

    def leases(self, owner: str) -> Any:
        """Leases shared by every process on this backend (``storage.leases.Leases``), or None
        when the backend belongs to one process (the harness then uses ``LocalLeases``)."""
        return None

    async def close(self) -> None:  # noqa: B027 - optional for backends
        pass


def dump_record(record: BaseModel) -> str:
    # Sorted keys make stored text deterministic (diffable files, stable copy verification).
    return json.dumps(record.model_dump(mode="json"), sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"))


class Table(Generic[R]):
    """Typed view of one table of a domain."""

    def __init__(self, domain: Domain, name: str, model: type[R]):
        self.domain, self.name, self.model = domain, name, model

    async def get(self, key: str) -> R | None:
        return await self.domain.get(self.name, key)  # type: ignore[return-value]

    async def put(self, key: str, record: R) -> None:
        await self.domain.put(self.name, key, record)

    async def delete(self, key: str) -> bool:
        return await self.domain.delete(self.name, key)

    async def all(self) -> dict[str, R]:
        return await self.domain.all(self.name)  # type: ignore[return-value]

    async def update(self, key: str,
                     fn: Callable[[R | None], R | Awaitable[R | None] | None]) -> R | None:
        return await self.domain.update(self.name, key, fn)  # type: ignore[arg-type,return-value]


class Domain:
    """An opened, validated domain on some backend."""

    def __init__(self, spec: DomainSpec, stored: StoredDomain, backend_name: str):
        self.spec, self._stored, self.backend_name = spec, stored, backend_name
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, spec: DomainSpec, backend: StorageBackend) -> Domain:
        stored = await backend.open(spec)
        domain = cls(spec, stored, backend.name)
        try:
            version = await stored.stored_version()
            if version is not None and version != spec.version:
                await domain._migrate(version, backend.name)
            for table in spec.tables:
                for key, text in await stored.items(table):
                    domain._parse(table, key, text)
        except BaseException:
            await stored.close()
            raise
        return domain

    async def _migrate(self, version: int, backend_name: str) -> None:
        spec = self.spec
        steps = list(range(version, spec.version))
        if version > spec.version or any(n not in spec.migrations for n in steps):
            raise StorageError(
                f"domain {spec.name!r} on {backend_name}: stored version {version} differs "
                f"from declared version {spec.version}; migrate it before starting"
            )
        data: RawTables = {}
        for table in spec.tables:
            data[table] = {}
            for key, text in await self._stored.items(table):
                try:
                    data[table][key] = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise StorageError(f"domain {spec.name!r} table {table!r} key {key!r}: "
                                       f"stored value is not JSON ({exc})") from None
        for n in steps:
            try:
                data = spec.migrations[n](data)
            except StorageError:
                raise
            except Exception as exc:
                raise StorageError(f"domain {spec.name!r}: migration from version {n} to "
                                   f"{n + 1} failed: {type(exc).__name__}: {exc}; the stored "
                                   "data was left untouched") from None
        texts: dict[str, dict[str, str]] = {}
        for table, rows in data.items():
            texts[table] = {}
            for key, value in rows.items():
                text = json.dumps(value, sort_keys=True, ensure_ascii=False,
                                  separators=(",", ":"))
                texts[table][key] = dump_record(self._parse(table, key, text))
        await self._stored.replace_all(spec.version, texts)
        log.info("storage domain %s on %s migrated from version %d to %d (%d records)",
                 spec.name, backend_name, version, spec.version,
                 sum(len(rows) for rows in texts.values()))

    def table(self, name: str) -> Table[Any]:
        return Table(self, name, self._model(name))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        """Read-modify-write of several records, committed as ONE atomic, durable write.

        Holds the domain's write lock for the block: reads inside see the block's own pending
        writes; an exception in the block writes nothing; a failed commit raises and writes
        nothing (one SQLite transaction; one temp-file-and-rename on JSON; on PostgreSQL the
        block's reads and its write are one database transaction).
        """
        async with self._lock, self._stored.atomic() as stored:
            tx = Transaction(self, stored)
            yield tx
            if tx.ops:
                await stored.write(self.spec.version, tx.ops)

    def _model(self, table: str) -> type[BaseModel]:
        try:
            return self.spec.tables[table]
        except KeyError:
            raise StorageError(f"domain {self.spec.name!r} has no table {table!r}") from None

    def _parse(self, table: str, key: str, text: str) -> BaseModel:
        where = f"domain {self.spec.name!r} table {table!r} key {key!r}"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StorageError(f"{where}: stored value is not JSON ({exc})") from None
        try:
            return self._model(table).model_validate(data)
        except ValidationError as exc:
            raise StorageError(f"{where}: invalid record: " + "; ".join(error_lines(exc))) from None

    async def get(self, table: str, key: str) -> BaseModel | None:
        self._model(table)
        text = await self._stored.get(table, key)
        return None if text is None else self._parse(table, key, text)

    async def texts(self, table: str) -> list[tuple[str, str]]:
        """Every (key, stored JSON text) of a table, sorted by key, unvalidated: for a reader
        that keeps validated copies and parses only the texts that changed since its last
        read (``parse`` validates one)."""
        self._model(table)
        return await self._stored.items(table)

    def parse(self, table: str, key: str, text: str) -> BaseModel:
        """A text ``texts`` returned, validated like every read (``StorageError`` if bad)."""
        return self._parse(table, key, text)

    async def all(self, table: str) -> dict[str, BaseModel]:
        self._model(table)
        items = await self._stored.items(table)
        if len(items) > PARSE_IN_THREAD:
            # 10,000 records take most of a second to validate: not on the event loop.
            return await asyncio.to_thread(
                lambda: {k: self._parse(table, k, t) for k, t in items})
        return {k: self._parse(table, k, t) for k, t in items}

    async def put(self, table: str, key: str, record: BaseModel) -> None:
        await self.write_many([(table, key, record)])

    async def delete(self, table: str, key: str) -> bool:
        async with self._lock, self._stored.atomic() as stored:
            existed = await stored.get(table, key) is not None
            if existed:
                await stored.write(self.spec.version, [(table, key, None)])
            return existed

    async def write_many(self, records: Iterable[tuple[str, str, BaseModel | None]]) -> None:
        ops: list[WriteOp] = []
        for table, key, record in records:
            ops.append((table, key, None if record is None else self._checked(table, record)))
        async with self._lock:
            await self._stored.write(self.spec.version, ops)

    def _checked(self, table: str, record: BaseModel) -> str:
        model = self._model(table)
        if not isinstance(record, model):
            raise StorageError(
                f"domain {self.spec.name!r} table {table!r}: expected {model.__name__}, "
                f"got {type(record).__name__}"
            )
        return dump_record(record)

    async def update(self, table: str, key: str,
                     fn: Callable[[Any], Any]) -> BaseModel | None:
        """Read-modify-write under the domain's write lock; ``fn`` returns None to delete."""
        async with self._lock, self._stored.atomic() as stored:
            text = await stored.get(table, key)
            current = None if text is None else self._parse(table, key, text)
            new = fn(current)
            if asyncio.iscoroutine(new):
                new = await new
            if new is None:
                if current is not None:
                    await stored.write(self.spec.version, [(table, key, None)])
                return None
            await stored.write(self.spec.version, [(table, key, self._checked(table, new))])
            return self._parse(table, key, dump_record(new))

    async def export(self) -> dict[str, dict[str, str]]:
        """Every table as key → stored JSON text (validated), for copies and dumps."""
        out: dict[str, dict[str, str]] = {}
        for table in self.spec.tables:
            out[table] = {}
            for key, text in await self._stored.items(table):
                out[table][key] = dump_record(self._parse(table, key, text))
        return out

    async def replace_all(self, data: dict[str, dict[str, str]]) -> None:
        for table, rows in data.items():
            for key, text in rows.items():
                self._parse(table, key, text)
        async with self._lock:
            await self._stored.replace_all(self.spec.version, data)

    async def close(self) -> None:
        await self._stored.close()


class Transaction:
    """The pending writes of one ``Domain.transaction()`` block."""

    def __init__(self, domain: Domain, stored: StoredDomain | None = None):
        self._domain = domain
        # The backend's view for this transaction (reads inside the database transaction).
        self._stored = stored if stored is not None else domain._stored
        self._pending: dict[tuple[str, str], str | None] = {}

    @property
    def ops(self) -> list[WriteOp]:
        return [(table, key, text) for (table, key), text in self._pending.items()]

    async def get(self, table: str, key: str) -> Any:
        d = self._domain
        d._model(table)
        if (table, key) in self._pending:
            text = self._pending[(table, key)]
        else:
            text = await self._stored.get(table, key)
        return None if text is None else d._parse(table, key, text)

    def put(self, table: str, key: str, record: BaseModel) -> None:
        self._pending[(table, key)] = self._domain._checked(table, record)

    def delete(self, table: str, key: str) -> None:
        self._domain._model(table)
        self._pending[(table, key)] = None

    async def update(self, table: str, key: str, fn: Callable[[Any], Any]) -> Any:
        """Like ``Domain.update`` but inside the transaction; ``fn`` returns None to delete."""
        new = fn(await self.get(table, key))
        if asyncio.iscoroutine(new):
            new = await new
        if new is None:
            self.delete(table, key)
            return None
        self.put(table, key, new)
        return await self.get(table, key)
