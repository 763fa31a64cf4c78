"""dsh — a small agent harness. This module is its whole public API for plugins.

Plugins import only names listed in ``__all__``; everything else is internal and may change.
"""

from .config import DeploymentConfig, LoadedConfig, load_config, parse_config
from .errors import ConfigError, DshError, PluginError, StorageError
from .harness import HARNESS_VERSION as __version__
from .harness import Harness
from .hookspecs import hookimpl
from .storage import Domain, DomainSpec, StorageBackend, StoredDomain, Table
from .validation import error_lines, format_loc

__all__ = [
    "ConfigError",
    "DeploymentConfig",
    "Domain",
    "DomainSpec",
    "DshError",
    "Harness",
    "LoadedConfig",
    "PluginError",
    "StorageBackend",
    "StorageError",
    "StoredDomain",
    "Table",
    "__version__",
    "error_lines",
    "format_loc",
    "hookimpl",
    "load_config",
    "parse_config",
]
