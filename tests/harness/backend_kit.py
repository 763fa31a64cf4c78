"""The storage backends the contract tests run on: json, sqlite, and postgres on the test
run's throwaway PostgreSQL cluster (a fresh database per test, from the ``pg_dsn`` fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_harness.storage import StorageBackend
from dsh_harness.storage.json_backend import JsonBackend
from dsh_harness.storage.sqlite_backend import SqliteBackend

NAMES = ["json", "postgres", "sqlite"]


def make_backend(request: pytest.FixtureRequest, name: str, directory: Path) -> StorageBackend:
    directory.mkdir(parents=True, exist_ok=True)
    if name == "postgres":
        from dsh_harness.storage.postgres_backend import PostgresBackend

        return PostgresBackend(request.getfixturevalue("pg_dsn"))
    return {"json": JsonBackend, "sqlite": SqliteBackend}[name](directory)
