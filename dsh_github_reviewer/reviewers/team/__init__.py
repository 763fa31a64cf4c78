"""The review team: personas that read, a coordinator that writes, a verdict that fails closed.

Modules: ``personas`` (guides and system prompts), ``messages`` (what each session is told per
run), ``verdict`` (the verdict line code enforces), ``attempts`` (retries and model candidates),
``review`` (one team review of a PR). Imported by name, never from here, so the world hook can
use ``personas`` without pulling in the runner.
"""
