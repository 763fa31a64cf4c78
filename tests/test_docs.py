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


# -- config keys, CLI commands: every one documented in both languages ---------------

def _model_of(annotation):
    """The pydantic model inside ``X``, ``X | None``, ``list[X]`` or ``dict[str, X]``."""
    import typing

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, None
    for arg in typing.get_args(annotation):
        inner, _ = _model_of(arg)
        if inner is not None:
            return inner, typing.get_origin(annotation)
    return None, None


def _config_keys(model, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted path, leaf name) of every field; list/dict items restart the path (the docs
    describe an account's fields or a provider's keys in their own table)."""
    out = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        inner, origin = _model_of(field.annotation)
        if inner is None:
            out.append((path, name))
        else:  # a table: its keys are what the docs list
            out += _config_keys(inner, "" if origin in (list, dict) else f"{path}.")
    return out


def _backticked_tokens(text: str) -> set[str]:
    tokens = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        tokens.update(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", span))
    return tokens


def _config_models():
    from dsh_github_reviewer.config import ReviewerConfig
    from dsh_harness import DeploymentConfig

    return [DeploymentConfig, ReviewerConfig]


@pytest.mark.parametrize("doc", ["docs/config.en.md", "docs/config.md"])
def test_every_config_key_is_documented(doc):
    tokens = _backticked_tokens((ROOT / doc).read_text(encoding="utf-8"))
    missing = sorted({path for model in _config_models()
                      for path, leaf in _config_keys(model)
                      if path not in tokens and leaf not in tokens})
    assert missing == [], f"config keys missing from {doc}: {missing}"


def _cli_tree():
    """Every (command path, long options) of the real parser, plugins' commands included."""
    return [(path, options) for path, options, _ in _cli_parsers()]


def _cli_parsers():
    """Every (command path, long options, parser) of the real parser, plugins' included."""
    import argparse

    from dsh_harness import load_config
    from dsh_harness.cli import build_parser
    from dsh_harness.harness import Harness

    harness = Harness(load_config(ROOT / "dsh.example.toml", env={}))
    parser, registry = build_parser(harness)
    harness.register_commands(registry)

    def walk(p: argparse.ArgumentParser, path: tuple[str, ...]):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        options = sorted(o for a in p._actions for o in a.option_strings
                         if o.startswith("--") and o not in ("--help", "--version", "--config",
                                                             "--verbose"))
        if path:
            yield path, options, p
        for action in subs:
            for name, child in action.choices.items():
                yield from walk(child, (*path, name))
    return list(walk(parser, ()))


def test_every_cli_command_and_option_is_in_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Commands", 1)[1].split("```", 2)[1]
    problems = []
    for path, options in _cli_tree():
        lines = [line for line in block.splitlines() if line.startswith(f"dsh {path[0]}")]
        words = set(re.findall(r"[\w.-]+", " ".join(lines)))
        for needed in (*path, *options):
            if needed not in words:
                problems.append(f"{' '.join(path)}: {needed}")
    assert problems == [], f"missing from README's command list: {problems}"


def test_every_command_says_what_it_does_in_its_help():
    """``dsh X --help`` opens with a description, not just the usage line."""
    bare = [" ".join(path) for path, _, parser in _cli_parsers() if not parser.description]
    assert bare == [], f"commands whose --help has no description: {bare}"


@pytest.mark.parametrize("doc", ["docs/architecture.en.md", "docs/architecture.md"])
def test_every_builtin_command_is_in_the_architecture_guide(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    section = text.split("dsh [--config PATH]", 1)[1][:1500]
    tokens = _backticked_tokens(section)
    top = sorted({path[0] for path, _ in _cli_tree()} - {"github-reviewer"})
    assert [c for c in top if c not in tokens] == []


def test_docs_link_nothing_outside_the_repository():
    """The design notes (spec, facts) are not shipped; the docs must stand on their own."""
    docs = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
    for doc in ["README.md", *docs]:
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert not re.search(r"spec §|规范 §|facts\.md", text), doc
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert ((ROOT / doc).parent / target).exists(), f"{doc} links to missing {target}"


def test_readme_mutation_examples_are_valid_command_lines():
    """Every `bash scripts/mutation ...` line the README shows parses (an
    example with `--tests` before the module exited 2: --tests swallowed the module)."""
    import importlib.util
    import shlex
    import sys

    spec = importlib.util.spec_from_file_location("mutation_script",
                                                  ROOT / "scripts" / "mutation.py")
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script   # its dataclasses look their module up there
    spec.loader.exec_module(script)
    text = (ROOT / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    examples = [line.split("#", 1)[0] for line in text.splitlines()
                if line.startswith("bash scripts/mutation")]
    assert examples, "the README shows how to run scripts/mutation"
    for line in examples:
        argv = shlex.split(line)[2:]
        try:
            args = script.build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"README example does not parse: {line.strip()}")
        assert args.modules and all(m.endswith(".py") for m in args.modules), line


def test_docs_state_what_the_code_does():
    """Figures and wordings that had drifted from the code."""
    from dsh_github_reviewer.github.guard import CHANGED_FILES_PAGE_CAP
    from dsh_github_reviewer.turn.review_input import FILES_PAGE_CAP

    en = (ROOT / "docs/deploy.en.md").read_text(encoding="utf-8")
    zh = (ROOT / "docs/deploy.md").read_text(encoding="utf-8")
    assert FILES_PAGE_CAP == CHANGED_FILES_PAGE_CAP
    assert f"a PR's files: {FILES_PAGE_CAP}" in en and f"PR 的文件：{FILES_PAGE_CAP}" in zh
    # The signature is checked over the raw body after it is read, before it is parsed.
    assert "before its body is read" not in en and "before anything parses it" in en
    assert "在读取正文之前" not in zh and "在解析正文之前" in zh
    # scripts/test reuses an existing venv, and says so; so does the README.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    script = (ROOT / "scripts/test").read_text(encoding="utf-8")
    assert '[ -x "$VENV/bin/python" ] ||' in script and "reuses it otherwise" in script
    assert "a fresh `.venv`" not in readme and "reuses it otherwise" in readme
    assert "builds a fresh virtualenv from nothing" not in script
    # github-mcp-server is a main dependency, not the test extra's.
    assert "test extra (which brings the real github-mcp-server" not in script


@pytest.mark.parametrize("doc", ["docs/config.en.md", "docs/config.md"])
def test_every_repository_config_key_is_documented(doc):
    """The keys of ``.github/dsh-review.toml`` (``RepoConfig``), which the deployment-config
    check above does not cover: each is named in the config guide (its example block counts)."""
    from dsh_github_reviewer.turn.repo_config import RepoConfig

    text = (ROOT / doc).read_text(encoding="utf-8")
    section = text[text.index("dsh-review.toml"):]
    missing = sorted({path for path, leaf in _config_keys(RepoConfig)
                      if not re.search(rf"(?<![\w.]){re.escape(leaf)}\b", section)})
    assert missing == [], f"repository config keys missing from {doc}: {missing}"
