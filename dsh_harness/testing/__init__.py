"""The harness testing kit: a scripted OpenAI-compatible model server and helpers.

Plugin authors use it in their own tests (``from dsh_harness.testing import ...``).
"""

from .model_server import (
    Fault,
    ModelRequest,
    Reply,
    ScriptedModelServer,
    Served,
    is_compaction_request,
)
from .postgres import PostgresCluster, PostgresUnavailable, free_port
from .prefix_cache import PrefixCache, estimate_tokens, render_prompt
from .threaded_server import ThreadedServer

__all__ = ["Fault", "ModelRequest", "PostgresCluster", "PostgresUnavailable", "PrefixCache",
           "Reply", "ScriptedModelServer", "Served", "ThreadedServer", "estimate_tokens",
           "free_port", "is_compaction_request", "render_prompt"]
