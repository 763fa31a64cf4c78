"""Session event logs, their persistence and the history derived from them."""

from .events import SessionHeader, ToolCall, Usage
from .log import Session
from .service import SessionService
from .store import LoadedLog, SessionStore
from .summary import SessionSummary

__all__ = ["LoadedLog", "Session", "SessionHeader", "SessionService", "SessionStore",
           "SessionSummary", "ToolCall", "Usage"]
