"""Error types the harness raises at its boundaries.

Each one carries a message that names what is wrong (file, field path, domain/table/key) so an
operator can act on it without a traceback. None of them ever embeds a secret value.
"""

from __future__ import annotations


class DshError(Exception):
    """Base of every error the harness reports to a user."""


class ConfigError(DshError):
    """The deployment config (or a plugin's config block) is invalid."""


class PluginError(DshError):
    """A plugin could not be loaded, or its manifest/hook results are invalid."""


class StorageError(DshError):
    """A storage domain could not be opened, read or written."""
