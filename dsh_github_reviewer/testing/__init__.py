"""Test doubles for the reviewer: the sandbox GitHub (and, later, a scripted reviewer model)."""

from .sandbox import SandboxGitHub, free_loopback_address
from .sandbox_state import SandboxState

__all__ = ["SandboxGitHub", "SandboxState", "free_loopback_address"]
