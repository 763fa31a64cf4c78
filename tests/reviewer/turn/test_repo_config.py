"""The repository config's parsing and rules (pure)."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.core.globs import expand_braces
from dsh_github_reviewer.turn.diff_prep import excluded
from dsh_github_reviewer.turn.repo_config import (
    RepoConfigError,
    RepoSettings,
    parse,
    scoped_guideline,
    steering_edits,
)


def test_errors_name_the_key_and_never_pass_silently():
    with pytest.raises(RepoConfigError, match=r"max_findings: .*greater than or equal to 0"):
        parse("max_findings = -1")
    with pytest.raises(RepoConfigError, match=r"auto_review.nope: Extra inputs"):
        parse("[auto_review]\nnope = 1")
    with pytest.raises(RepoConfigError, match="not valid TOML"):
        parse("instructions = ")
    with pytest.raises(RepoConfigError, match=r"min_severity"):
        parse('min_severity = "blocker"')
    with pytest.raises(RepoConfigError, match=r"personas"):
        parse('personas = ["coordinator"]')
    # Booleans and numbers are TOML's own, as in dsh.toml (the deployment config's rule).
    for text in ('[auto_review]\nenabled = "yes"', "[auto_review]\ndrafts = 1"):
        with pytest.raises(RepoConfigError, match=r"auto_review\.(enabled|drafts): .*must be true"):
            parse(text)
    with pytest.raises(RepoConfigError, match=r"max_findings: "):
        parse('max_findings = "5"')
    with pytest.raises(RepoConfigError, match=r"instructions_file: .*relative path"):
        parse('instructions_file = "../secrets.md"')
    assert parse('instructions_file = "./docs/r.md"').instructions_file == "docs/r.md"


def test_path_instructions_use_the_exclude_globs():
    cfg = parse('[[path_instructions]]\npath = "api/**"\ninstructions = "auth"\n'
                '[[path_instructions]]\npath = "*.sql"\ninstructions = "sql"\n')
    s = RepoSettings(config=cfg)
    assert [p.instructions for p in s.path_instructions(["api/v1/users.py"])] == ["auth"]
    assert [p.instructions for p in s.path_instructions(["db/m/001.sql"])] == ["sql"]
    assert s.path_instructions(["web/app.py"]) == []


def test_auto_review_rules():
    s = RepoSettings(config=parse('[auto_review]\nbase_branches = ["main", "release/*"]\n'
                                  'ignore_title_keywords = ["WIP"]\nignore_labels = ["skip"]'))
    assert s.auto_review_refusal("main", "Fix", []) is None
    assert s.auto_review_refusal("release/1.2", "Fix", []) is None
    assert "base_branches" in s.auto_review_refusal("dev", "Fix", [])
    assert "ignore_title_keywords" in s.auto_review_refusal("main", "wip: stuff", [])
    assert "ignore_labels" in s.auto_review_refusal("main", "Fix", ["Skip"])
    off = RepoSettings(config=parse("[auto_review]\nenabled = false"))
    assert off.auto_review_refusal("main", "Fix", []) == "auto_review.enabled = false"


def test_scoped_guidelines_by_apply_to():
    g = scoped_guideline(".github/instructions/py.instructions.md",
                         '---\napplyTo: "**/*.py, *.pyi"\n---\nType hints.\n')
    assert g is not None and g.globs == ("**/*.py", "*.pyi") and g.text == "Type hints."
    assert scoped_guideline("x.instructions.md", "no front matter") is None
    s = RepoSettings(scoped=(g,))
    assert s.scoped_guidelines(["src/a.py"]) == [g] and s.scoped_guidelines(["a.md"]) == []


def test_a_pr_editing_the_steering_files_is_named():
    assert steering_edits(["src/a.py", ".github/dsh-review.toml", "AGENTS.md",
                           ".github/instructions/x.instructions.md"]) == [
        ".github/dsh-review.toml", ".github/instructions/x.instructions.md", "AGENTS.md"]


def test_brace_globs_match_each_alternative_everywhere_globs_are_read():
    """``{a,b}`` in a glob used never to match and nothing warned: it is expanded now, in
    path_instructions, exclude and applyTo alike."""
    cfg = parse('exclude = ["gen/*.{pb,g}.go"]\n'
                '[[path_instructions]]\npath = "src/**/*.{ts,tsx}"\ninstructions = "react"\n')
    s = RepoSettings(config=cfg)
    for path in ("src/a.ts", "src/ui/b.tsx"):
        assert [p.instructions for p in s.path_instructions([path])] == ["react"], path
    assert s.path_instructions(["src/a.js"]) == []
    assert excluded("gen/x.pb.go", cfg.exclude) and excluded("gen/x.g.go", cfg.exclude)
    assert not excluded("gen/x.go", cfg.exclude)
    g = scoped_guideline("t.instructions.md", '---\napplyTo: "**/*.{ts,tsx}, *.md"\n---\nT.\n')
    assert g is not None and g.globs == ("**/*.{ts,tsx}", "*.md")
    assert RepoSettings(scoped=(g,)).scoped_guidelines(["web/x.tsx"]) == [g]


def test_brace_expansion_nests_repeats_and_refuses_unpaired_braces():
    assert expand_braces("a{b,c{d,e}}f") == ("abf", "acdf", "acef")
    assert expand_braces("{a,b}{1,2}") == ("a1", "a2", "b1", "b2")
    assert expand_braces("{a}.py") == ("{a}.py",), "no comma: literal, as in the shells"
    with pytest.raises(RepoConfigError, match=r"path_instructions.0.path: .*'\{' without"):
        parse('[[path_instructions]]\npath = "src/*.{ts,tsx"\ninstructions = "x"\n')
    with pytest.raises(RepoConfigError, match=r"exclude: .*'a},b': a '\}' without"):
        parse('exclude = ["a},b"]')
    with pytest.raises(RepoConfigError, match=r"more than 256 alternatives"):
        parse('exclude = ["' + "{a,b}" * 9 + '"]')


def test_the_accounts_exclude_keeps_brace_commas_when_given_as_one_string():
    from dsh_github_reviewer.config import ReviewSettings

    r = ReviewSettings.model_validate({"exclude": "*.lock, gen/*.{pb,g}.go  vendor/"})
    assert r.exclude == ["*.lock", "gen/*.{pb,g}.go", "vendor/"]
    with pytest.raises(ValueError, match=r"'\{' without"):
        ReviewSettings.model_validate({"exclude": ["*.{ts"]})
