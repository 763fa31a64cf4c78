"""Where session event logs persist. Stores are registered by plugins (built-in: ``jsonl``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from ..errors import DshError
from ..storage.fence import OPEN_FENCE, Fence, FencedOut
from .events import SessionHeader


class StaleAppend(FencedOut):
    """An append from a writer whose view of the log is out of date: the log holds more (or
    fewer) lines than the writer has seen, because another writer appended since (a replica
    that lost the session's lease writing after the new holder). Refused, never retried."""


@dataclass
class LoadedLog:
    header: SessionHeader
    events: list
    # Bytes of a torn final line that loading dropped (a crash mid-append).
    dropped_tail: int = 0
    notes: list[str] = field(default_factory=list)


class SessionStore(ABC):
    """Persists one append-only event log per session id."""

    name: str
    #: True when every process that uses the store's database sees the same logs (replicas
    #: on several hosts may resume each other's sessions), False for files of one home.
    shared: bool = False

    @abstractmethod
    async def create(self, header: SessionHeader) -> None:
        """Start a new log; an existing log with that id is an error."""

    @abstractmethod
    async def exists(self, session_id: str) -> bool: ...

    @abstractmethod
    async def load(self, session_id: str, *, repair: bool = False) -> LoadedLog:
        """Read a log. ``repair`` (only when resuming) cuts a torn final line off the file."""

    @abstractmethod
    async def append(self, session_id: str, events: list, *, expected: int | None = None,
                     fence: Fence = OPEN_FENCE) -> None:
        """Hand events to the OS (they survive a process kill); durable after ``flush``.

        Optimistic concurrency: ``expected`` is how many lines (header included) the writer
        has seen in the log; a log that holds another count refuses the append
        (``StaleAppend``). ``fence`` is the writer's lease fence, checked before the append
        (and inside its transaction where the lease lives in the same database): a stale
        writer's append is refused (``FencedOut``). Stores check ``expected`` where they know
        the log's length (a log opened for writing)."""

    @abstractmethod
    async def flush(self, session_id: str) -> None: ...

    @abstractmethod
    async def list_ids(self) -> list[str]: ...

    async def list_stamped(self) -> list[tuple[str, object | None]]:
        """Session ids with a change stamp (None = unknown: readers must reload)."""
        return [(sid, None) for sid in await self.list_ids()]

    async def stamp(self, session_id: str) -> object | None:
        """A value that changes whenever the session's log changes (None = unknown)."""
        return None

    async def read_from(self, session_id: str, offset: int) -> bytes | None:
        """The log's bytes from ``offset`` to its end, for readers that follow a growing log
        (the web UI); None = not supported, readers ``load`` the whole log instead."""
        return None

    async def mark(self, session_id: str) -> object | None:
        """Where this store's view of a log opened for writing ends, for ``load_after``
        (None = the store cannot resume incrementally). Asked just before ``release``."""
        return None

    async def load_after(self, session_id: str, mark: object, *,
                         repair: bool = False) -> list | None:
        """The events appended after ``mark``, or None when the log does not continue from it
        (the caller then loads it whole). ``repair`` as in ``load``; the store then tracks
        the session as if loaded."""
        return None

    async def put_raw(self, session_id: str, raw: bytes) -> None:
        """Store ``raw`` (whole, validated JSONL lines: header first) as the log of
        ``session_id``, replacing any log of that id in one atomic step (``dsh sessions
        copy``). What ``read_from(session_id, 0)`` returns afterwards is exactly ``raw``."""
        raise DshError(f"the {self.name} session store cannot import logs")

    async def release(self, session_id: str) -> None:  # noqa: B027 - optional
        """Flush and drop any open handle on a session (agent evicted from memory)."""

    async def close(self) -> None:  # noqa: B027 - optional
        pass
