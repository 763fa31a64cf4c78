"""Typed storage domains on pluggable backends."""

from .base import (
    Domain,
    DomainSpec,
    Migration,
    RawTables,
    StorageBackend,
    StoredDomain,
    Table,
    Transaction,
    WriteOp,
)
from .service import StorageService

__all__ = ["Domain", "DomainSpec", "Migration", "RawTables", "StorageBackend", "StorageService",
           "StoredDomain", "Table", "Transaction", "WriteOp"]
