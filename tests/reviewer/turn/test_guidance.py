"""The built-in review guidance: shipped in the package, short, covering what the brief names."""

from __future__ import annotations

from dsh_github_reviewer.turn.guidance import BUILTIN_SOURCE, builtin_guidance, builtin_text
from dsh_github_reviewer.turn.prompts import system_prompt


def test_builtin_guidance_is_shipped_and_covers_the_basics():
    text = builtin_text()
    for topic in ("Correctness", "Security", "Error handling", "Tests", "Readability"):
        assert f"- {topic}:" in text
    assert len(text) < 2_000, "short: it sits in every review's system prompt"


def test_builtin_guidance_in_the_system_prompt_is_stable():
    prompt = system_prompt(builtin_guidance())
    assert f"Source: {BUILTIN_SOURCE}" in prompt
    assert "@" not in BUILTIN_SOURCE, "no branch in the source: a retarget keeps the prefix"
    assert system_prompt(builtin_guidance()) == prompt
