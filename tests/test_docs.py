"""Docs and layering guards (datasette's test_docs idea): fail when code and docs drift."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dsh_harness import hookspecs

ROOT = Path(__file__).resolve().parents[1]
HOOKS = sorted(n for n in dir(hookspecs) if n.startswith("dsh_"))


@pytest.mark.parametrize("doc", ["docs/architecture.en.md", "docs/architecture.md"])
@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented(doc, hook):
    assert re.search(rf"`{hook}\b", (ROOT / doc).read_text(encoding="utf-8")), \
        f"{hook} is missing from {doc}"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_docstring(hook):
    doc = getattr(hookspecs, hook).__doc__ or ""
    assert len(doc.split()) > 15, f"{hook} needs a docstring saying when, args, return, combine"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_harness_never_imports_the_reviewer():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "dsh_harness").rglob("*.py")
                 if any(n.split(".")[0] == "dsh_github_reviewer" for n in _imports(p))]
    assert offenders == []


def test_reviewer_uses_only_the_public_harness_api():
    import dsh_harness

    public = set(dsh_harness.__all__)
    problems = []
    for path in (ROOT / "dsh_github_reviewer").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
                    "dsh_harness"):
                if node.module not in ("dsh_harness", "dsh_harness.testing"):
                    problems.append(f"{path.name}: from {node.module} import ...")
                elif node.module == "dsh_harness":
                    problems += [f"{path.name}: {a.name}" for a in node.names
                                 if a.name not in public]
            elif isinstance(node, ast.Import):
                problems += [f"{path.name}: import {a.name}" for a in node.names
                             if a.name.startswith("dsh_harness.")
                             and a.name != "dsh_harness.testing"]
    assert problems == []


def test_readme_has_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "scripts/run" in readme and "scripts/test" in readme
    assert "scripts/test" in (ROOT / ".ci/run").read_text(encoding="utf-8")
