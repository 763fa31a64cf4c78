"""Test doubles for the reviewer: the sandbox GitHub (and, later, a scripted reviewer model)."""

from .sandbox import LoopbackPortDenied, SandboxGitHub, free_loopback_address
from .sandbox_state import SandboxState

__all__ = ["LoopbackPortDenied", "SandboxGitHub", "SandboxState", "free_loopback_address"]
