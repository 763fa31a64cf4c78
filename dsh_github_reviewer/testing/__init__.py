"""Test doubles for the reviewer: the sandbox GitHub, scripted reviewer and team models, and a
whole deployment wired on them (``deployment``).

Test support beside the front ends: may import ``app`` and every layer below (and
``dsh_harness.testing``); production code imports it only lazily, from ``cli.demo``.
"""

from .sandbox import LoopbackPortDenied, SandboxGitHub, free_loopback_address
from .sandbox_state import SandboxState

__all__ = ["LoopbackPortDenied", "SandboxGitHub", "SandboxState", "free_loopback_address"]
