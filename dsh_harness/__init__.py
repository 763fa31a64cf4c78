"""dsh — a small agent harness. This module is its whole public API for plugins.

Plugins import only names listed in ``__all__`` (and the testing kit, ``dsh_harness.testing``,
in their tests); everything else is internal and may change.

Turns and attempts: ``Agent.followup`` returns a ``TurnOutcome``; one that is not ``ok`` was a
failed attempt, kept in the session log but never replayed to the model. Retrying is calling
``followup`` again with the same text: the new attempt starts from the same committed prefix
(a full prefix-cache hit), whether the agent stayed live or was evicted and resumed. A failed
session-log write ends the turn at once with reason ``error`` — except a failed flush after the
turn was committed to the log: that turn is ``ok`` (retrying it would repeat it in the history)
and ``TurnOutcome.error`` says the flush failed.
"""

from .agents import (
    Agent,
    AgentError,
    AgentWorld,
    BudgetExhausted,
    Tool,
    ToolContext,
    ToolRejected,
    ToolText,
    TurnOutcome,
)
from .config import ConfigBool, DeploymentConfig, LoadedConfig, load_config, parse_config
from .errors import ConfigError, DshError, PluginError, StorageError
from .harness import HARNESS_VERSION as __version__
from .harness import Harness
from .hookspecs import hookimpl
from .llm import LLMError
from .sessions import SessionHeader, SessionSummary, Usage
from .sessions.events import TurnEndReason
from .storage import (
    Domain,
    DomainSpec,
    Migration,
    RawTables,
    StorageBackend,
    StoredDomain,
    Table,
    Transaction,
)
from .storage.fence import OPEN_FENCE, Fence, FencedOut, LeaseFence, stop_point
from .storage.leases import Lease, LeaseLost, Leases, Replica
from .validation import error_lines, format_loc
from .web.catalog import IndexBuilding
from .web.serve import AsgiServer

__all__ = [
    "OPEN_FENCE",
    "Agent",
    "AgentError",
    "AgentWorld",
    "AsgiServer",
    "BudgetExhausted",
    "ConfigBool",
    "ConfigError",
    "DeploymentConfig",
    "Domain",
    "DomainSpec",
    "DshError",
    "Fence",
    "FencedOut",
    "Harness",
    "IndexBuilding",
    "LLMError",
    "Lease",
    "LeaseFence",
    "LeaseLost",
    "Leases",
    "LoadedConfig",
    "Migration",
    "PluginError",
    "RawTables",
    "Replica",
    "SessionHeader",
    "SessionSummary",
    "StorageBackend",
    "StorageError",
    "StoredDomain",
    "Table",
    "Tool",
    "ToolContext",
    "ToolRejected",
    "ToolText",
    "Transaction",
    "TurnEndReason",
    "TurnOutcome",
    "Usage",
    "__version__",
    "error_lines",
    "format_loc",
    "hookimpl",
    "load_config",
    "parse_config",
    "stop_point",
]
