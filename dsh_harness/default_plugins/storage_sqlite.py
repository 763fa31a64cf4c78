"""Built-in plugin: the ``sqlite`` storage backend (aiosqlite, WAL)."""

from pathlib import Path

from ..hookspecs import hookimpl
from ..storage.sqlite_backend import SqliteBackend


@hookimpl
def dsh_register_storage_backends(register):
    register("sqlite", lambda directory: SqliteBackend(Path(directory)))
