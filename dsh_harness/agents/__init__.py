"""Agents: a session plus a world, driven turn by turn."""

from .agent import Agent, TurnOutcome
from .service import AgentError, AgentService
from .world import AgentWorld, BudgetExhausted, Tool, ToolContext, ToolRejected, ToolText

__all__ = ["Agent", "AgentError", "AgentService", "AgentWorld", "BudgetExhausted", "Tool",
           "ToolContext", "ToolRejected", "ToolText", "TurnOutcome"]
