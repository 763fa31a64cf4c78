"""LLM providers behind one small interface."""

from .service import LLMService
from .types import LLMError, LLMProvider, LLMRequest, LLMResponse, RawUsage

__all__ = ["LLMError", "LLMProvider", "LLMRequest", "LLMResponse", "LLMService", "RawUsage"]
