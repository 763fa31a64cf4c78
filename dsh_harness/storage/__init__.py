"""Typed storage domains on pluggable backends."""

from .base import Domain, DomainSpec, StorageBackend, StoredDomain, Table, WriteOp
from .service import StorageService

__all__ = ["Domain", "DomainSpec", "StorageBackend", "StorageService", "StoredDomain", "Table",
           "WriteOp"]
