"""Storage domains: typed key → record tables that plugins declare and backends persist.

A backend stores raw JSON text per (table, key); a ``Domain`` validates every record against
the declared pydantic model, at open and on every read, so callers always receive fresh copies
and never a half-valid object. Writes of one domain are serialized by one lock and return only
when the backend has made them durable.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import StorageError
from ..validation import error_lines

R = TypeVar("R", bound=BaseModel)

# One write operation: (table, key, JSON text) or (table, key, None) for a delete.
WriteOp = tuple[str, str, str | None]


@dataclass(frozen=True)
class DomainSpec:
    """A plugin's declaration of a storage domain.

    ``version`` is stamped into storage; opening a domain stored under another version is an
    error (a migration is the owner's job, never a silent reinterpretation of old records).
    """

    name: str
    version: int
    tables: dict[str, type[BaseModel]] = field(default_factory=dict)

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
                raise StorageError(
                    f"domain {spec.name!r} on {backend.name}: stored version {version} differs "
                    f"from declared version {spec.version}; migrate it before starting"
                )
            for table in spec.tables:
                for key, text in await stored.items(table):
                    domain._parse(table, key, text)
        except BaseException:
            await stored.close()
            raise
        return domain

    def table(self, name: str) -> Table[Any]:
        return Table(self, name, self._model(name))

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

    async def all(self, table: str) -> dict[str, BaseModel]:
        self._model(table)
        return {k: self._parse(table, k, t) for k, t in await self._stored.items(table)}

    async def put(self, table: str, key: str, record: BaseModel) -> None:
        await self.write_many([(table, key, record)])

    async def delete(self, table: str, key: str) -> bool:
        async with self._lock:
            existed = await self._stored.get(table, key) is not None
            if existed:
                await self._stored.write(self.spec.version, [(table, key, None)])
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
        async with self._lock:
            text = await self._stored.get(table, key)
            current = None if text is None else self._parse(table, key, text)
            new = fn(current)
            if asyncio.iscoroutine(new):
                new = await new
            if new is None:
                if current is not None:
                    await self._stored.write(self.spec.version, [(table, key, None)])
                return None
            await self._stored.write(self.spec.version, [(table, key, self._checked(table, new))])
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
