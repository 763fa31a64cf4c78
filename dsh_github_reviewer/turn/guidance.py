"""The review guidance shipped with the package: what a repository without its own
instructions file is reviewed with, so the bot works out of the box (``review.require_
instructions = true`` restores the opt-in behaviour)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from .prompts import TrustedInstructions

# Names the text, never a branch or version: the system prompt must stay byte-identical while
# the guidance is unchanged (a retarget keeps the prefix).
BUILTIN_SOURCE = "built-in review guidance (dsh-github-reviewer)"


@cache
def builtin_text() -> str:
    return resources.files(__package__).joinpath("guidance.md").read_text(encoding="utf-8")


def builtin_guidance() -> TrustedInstructions:
    return TrustedInstructions(BUILTIN_SOURCE, builtin_text())
