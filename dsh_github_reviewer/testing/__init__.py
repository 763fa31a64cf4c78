"""Test doubles for the reviewer: the sandbox GitHub, scripted reviewer and team models, and a
whole deployment wired on them (``deployment``).

Test support beside the front ends: may import ``app`` and every layer below (and
``dsh_harness.testing``). Shipped commands that run the whole loop offline import it too: the
demo (``cli/demo.py``) and the quality eval (``eval/run.py``); nothing the daemon runs does.
"""

from .sandbox import LoopbackPortDenied, SandboxGitHub, free_loopback_address
from .sandbox_state import SandboxState

__all__ = ["LoopbackPortDenied", "SandboxGitHub", "SandboxState", "free_loopback_address"]
