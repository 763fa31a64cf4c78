"""The reviewer's hook implementations: the only place the harness calls into this package."""

from __future__ import annotations

from dsh_harness import hookimpl

from . import cursor
from .config import ReviewerConfig

PLUGIN_NAME = "dsh-github-reviewer"


@hookimpl
def dsh_storage_domains():
    return [cursor.domain_spec()]


@hookimpl
def dsh_plugin_config_models():
    return {PLUGIN_NAME: ReviewerConfig}
