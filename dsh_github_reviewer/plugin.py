"""The reviewer's hook implementations: the only place the harness calls into this package."""

from __future__ import annotations

from dsh_harness import hookimpl

from . import cursor


@hookimpl
def dsh_storage_domains():
    return [cursor.domain_spec()]
