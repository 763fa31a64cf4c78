"""The shipped corpus is valid and as large as promised; a broken case is named."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.eval import CaseError, check_cases, load_case, load_cases
from dsh_github_reviewer.eval.validate import corpus_stats

from .kit import TWO_PUSH, case


def test_shipped_corpus_passes_the_validator_and_meets_the_issue():
    cases = load_cases()
    assert check_cases(cases) == []
    s = corpus_stats(cases)
    assert s["cases"] >= 40 and s["clean"] >= 8 and s["re_review"] >= 6
    assert s["with_decoys"] >= 5
    assert {"python", "go"} <= set(s["languages"])
    assert s["languages"].get("javascript", 0) + s["languages"].get("typescript", 0) >= 10
    assert set(s["categories"]) == {"off-by-one", "wrong-condition", "error-handling",
                                    "resource-leak", "injection", "secret", "race",
                                    "api-misuse", "edge-case", "performance"}
    # Re-reviews can repeat a finding only where a defect outlives the first push.
    assert sum(any(set(c.live(1)) & set(c.live(2))) for c in cases if len(c.push) > 1) >= 4
    for c in cases:  # a change carries 1-4 defects; every second push fixes and adds one
        assert len(c.defects) <= 4, c.id
        if len(c.push) > 1:
            assert c.push[1].fixes and c.push[1].defects, c.id


@pytest.mark.parametrize(("edit", "problem"), [
    (("lines = [6, 6]", "lines = [2, 2]"), "div: lines [2, 2] of app/calc.py hold no added line"),
    (('path = "app/calc.py"', 'path = "app/gone.py"'), "div: app/gone.py is not in the head"),
    (("lines = [6, 6]", "lines = [40, 41]"), "past the end of app/calc.py"),
    (('fixes = ["div"]', 'fixes = ["nope"]'), "push 2 fixes 'nope', not a defect present"),
    (('language = "python"', 'language = "go"'), "language go: no changed .go file"),
    (('lines = [13, 13]', 'lines = [12, 12]'), "decoy 'fstring' overlaps defect 'loop'"),
    (('id = "secret"', 'id = "loop"'), "id 'loop' used twice"),
])
def test_validator_names_what_is_wrong(edit, problem):
    text = TWO_PUSH.replace(*edit, 1)
    assert text != TWO_PUSH
    problems = check_cases([case(text)])
    assert any(problem in p and p.startswith("calc: ") for p in problems), problems


def test_other_locations_are_checked_and_companion_files_accepted():
    """A defect's ``also`` places obey the same rule as its own range; a SQL migration or a
    CI file may accompany code of any language, a second programming language may not."""
    text = TWO_PUSH.replace('description = "one past the end"',
                            'description = "one past the end"\nalso = [{path = "app/calc.py", '
                            'lines = [2, 2]}]', 1)
    assert check_cases([case(text)]) == [
        "calc: loop also.1: lines [2, 2] of app/calc.py hold no added line at push 1 (added in "
        "that hunk: [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])"]
    text = TWO_PUSH.replace('[push.files]\n', '[push.files]\n"db/001.sql" = "create table t();"\n'
                            '".ci/x.yml" = "on: push"\n', 1)
    assert check_cases([case(text)]) == []
    java = text.replace('"db/001.sql"', '"app/Calc.java"', 1)
    assert check_cases([case(java)]) == [
        "calc: language python: changed file app/Calc.java is another language"]
    sql = text.replace('language = "python"', 'language = "sql"', 1)
    assert "calc: language sql: changed file app/calc.py is another language" in check_cases(
        [case(sql)])


def test_a_range_without_an_added_line_is_refused():
    # Line 3 is context inside the hunk (the base's last line), not a change.
    text = TWO_PUSH.replace("lines = [6, 6]", "lines = [3, 3]", 1)
    assert check_cases([case(text)]) == [
        "calc: div: lines [3, 3] of app/calc.py hold no added line at push 1 (added in that "
        "hunk: [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])"]


def test_a_second_push_defect_must_be_new_in_that_push():
    # Line 12 (`s += xs[i]`) is unchanged from push 1: a reviewer that flagged it at the
    # first review was scored a false positive there, so it cannot be push 2's "new" defect.
    text = TWO_PUSH.replace("lines = [15, 15]", "lines = [12, 12]", 1)
    assert check_cases([case(text)]) == [
        "calc: push 2: new defect 'secret' (lines [12, 12] of app/calc.py) changes no line "
        "of push 1; it was already there, list it at the push that added it"]


def test_unreadable_cases_name_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('language = "cobol"\ntitle = "x"\n[base]\n"a" = "b"\n[[push]]\n')
    with pytest.raises(CaseError, match=r"bad\.toml: language: Input should be"):
        load_case(bad)
    bad.write_text("language = ")
    with pytest.raises(CaseError, match=r"bad\.toml: "):
        load_case(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CaseError, match=r"no \*\.toml eval cases"):
        load_cases(tmp_path / "empty")
    with pytest.raises(CaseError, match="not a directory"):
        load_cases(tmp_path / "missing")


def test_team_personas_are_checked_before_anything_runs():
    from dsh_github_reviewer.eval.command import check_team
    from dsh_github_reviewer.eval.run import EvalError

    check_team(("quality", "security"), "")
    check_team(("db",), "# Rules\n## Persona: DB\nLook at the queries.\n")
    for team, instructions, message in [
            ((), "", "name at least one persona"),
            (("coordinator",), "", "coordinator is always part of a team"),
            (("db",), "## Persona: api\n", "persona 'db' is not built in"),
            (("Bad Name",), "", "persona names must match")]:
        with pytest.raises(EvalError, match=message):
            check_team(team, instructions)


def test_scratch_config_keeps_the_users_providers_and_review_tuning_only(tmp_path):
    from types import SimpleNamespace

    import dsh_github_reviewer.plugin as reviewer_plugin
    from dsh_github_reviewer.config import ReviewerConfig
    from dsh_github_reviewer.eval.run import (
        EvalConfig,
        Options,
        scratch_config,
        user_review_settings,
    )
    from dsh_harness import Harness, parse_config

    text = ('home = "mine"\ndefault_model = "p/m"\n[storage]\nbackend = "sqlite"\n'
            '[providers.p]\nbase_url = "http://127.0.0.1:9"\napi_key = "sk-user"\n'
            '[plugins.github-reviewer]\nplugin = "dsh-github-reviewer"\n'
            '[[plugins.github-reviewer.accounts]]\nname = "main"\n'
            'personal_access_token = "ghp_' + "u" * 36 + '"\nrepositories = ["me/real"]\n'
            '[plugins.github-reviewer.accounts.review]\nexclude = ["*.lock"]\n'
            'max_tool_calls = 12\nrequire_instructions = true\nmax_reviews_per_pr = 1\n'
            'models = [{provider = "p", model = "other"}]\n')
    h = Harness(parse_config(text, "u.toml", tmp_path), load_entry_points=False,
                plugins=[("dsh-github-reviewer", reviewer_plugin)])
    sb = SimpleNamespace(api_url="http://127.0.0.9/api/v3", web_url="http://127.0.0.9")
    loaded = scratch_config(h.config, user_review_settings(h), tmp_path / "scratch" / "home", sb,
                            EvalConfig("p/m2", ("security",)), ["eval/a", "eval/b"],
                            Options(concurrency=3, instructions="Be strict."))
    cfg = loaded.config
    assert loaded.home == tmp_path / "scratch" / "home" and cfg.default_model == "p/m2"
    assert cfg.providers["p"].api_key.get_secret_value() == "sk-user"
    (account,) = ReviewerConfig.model_validate(
        cfg.plugins["github-reviewer"].settings).accounts
    assert account.repositories == ["eval/a", "eval/b"] and account.api_url == sb.api_url
    assert account.max_concurrent_reviews == 3
    r = account.review
    assert (r.exclude, r.max_tool_calls) == (["*.lock"], 12)  # the user's tuning is measured
    assert (r.require_instructions, r.max_reviews_per_pr, r.models) == (False, 0, [])
    assert r.team.personas == ["security"] and r.default_instructions == "Be strict."


def test_limit_takes_cases_in_turn_from_each_language():
    """A quick sample of the shipped corpus takes a case of each language in turn, not the
    first cases in alphabetical order (which are all Go): --limit 4 gives four languages, a
    limit of one case per language covers them all."""
    from dsh_github_reviewer.eval.command import select

    cases = load_cases()
    picked = select(cases, [], 4)
    assert len(picked) == 4 and len({c.language for c in picked}) == 4
    languages = {c.language for c in cases}
    assert {c.language for c in select(cases, [], len(languages))} == languages
    two = select(cases, ["go-*"], 2)
    assert [c.language for c in two] == ["go", "go"] and sorted(c.clean for c in two) == \
        [False, True]  # stratified: one clean, one with defects
    assert select(cases, [], None) == cases


def test_limit_keeps_the_clean_share():
    """--limit 5 used to pick 3 clean cases of 5 (ids sort ``*-clean-*`` early); a sample keeps
    roughly the corpus's clean share, and at least one of each kind (--limit 6 used to trade
    its one clean place away to cover a sixth language)."""
    from dsh_github_reviewer.eval.command import select

    cases = load_cases()
    share = sum(c.clean for c in cases) / len(cases)
    for n in range(2, 21):
        picked = select(cases, [], n)
        clean = sum(c.clean for c in picked)
        assert len(picked) == n and 1 <= clean <= max(1, round(n * share) + 1), (n, clean)
    assert select(cases, [], 1)[0].clean is False or share > 0.5


def _check_args(directory, *only, limit=None, json=False):
    import argparse

    return argparse.Namespace(cases=str(directory), only=list(only), limit=limit, json=json)


def test_check_cases_lists_every_problem_and_validates_the_rest(tmp_path, capsys):
    """An unparsable case no longer stops the check: every problem is listed, with 1-based
    positions as a person counts them in the file, the valid case is validated, exit 1."""
    from dsh_github_reviewer.eval.command import _check

    (tmp_path / "calc.toml").write_text(TWO_PUSH)
    (tmp_path / "bad.toml").write_text(TWO_PUSH.replace('severity = "major"',
                                                        'severity = "huge"', 1))
    (tmp_path / "broken.toml").write_text('language = "python"\ntitle = \n')
    (tmp_path / "wrong.toml").write_text(TWO_PUSH.replace("lines = [6, 6]", "lines = [2, 2]"))
    assert _check(_check_args(tmp_path)) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("bad: cannot be read: ") and "push 1, defect 1, severity" in out[0]
    assert out[1].startswith("broken: cannot be read: ") and "line 2" in out[1]
    assert out[2].startswith("wrong: div: lines [2, 2]")
    assert out[-1].startswith("1 of 4 cases valid")


def test_check_cases_matching_no_case_is_an_error(tmp_path, capsys):
    from dsh_github_reviewer.eval.command import _check

    (tmp_path / "calc.toml").write_text(TWO_PUSH)
    assert _check(_check_args(tmp_path, "typo*")) == 2
    assert "no case matches --only typo*" in capsys.readouterr().err
    assert _check(_check_args(tmp_path, "calc")) == 0
    assert "1 of 1 cases valid" in capsys.readouterr().out


@pytest.mark.parametrize("path", ["../../etc/x.py", "/etc/x.py", "a//b.py", "./a.py",
                                  ".git/config", "src/.GIT/hooks/x", "a\\b.py", ""])
def test_a_file_path_outside_the_repository_is_refused(tmp_path, path):
    """Before: a case (hand-made, mined or imported from a forged SWE-PRBench file) could name
    ``../../etc/x.py`` and passed --check-cases; a path a git tree cannot hold is refused."""
    for where in ("[base]", "[push.files]"):
        text = ('language = "python"\ntitle = "x"\n[base]\n"ok.py" = "a"\n[[push]]\n'
                '[push.files]\n"ok.py" = "b"\n')
        text = text.replace(f'{where}\n', f'{where}\n{_toml_key(path)} = "c"\n')
        (tmp_path / "bad.toml").write_text(text)
        with pytest.raises(CaseError, match="want a relative path inside the repository"):
            load_case(tmp_path / "bad.toml")
    text = ('language = "python"\ntitle = "x"\n[base]\n"ok.py" = "a"\n[[push]]\n'
            f'delete = [{_toml_key(path)}]\n')
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(CaseError, match="want a relative path inside the repository"):
        load_case(tmp_path / "bad.toml")


def _toml_key(path: str) -> str:
    import json

    return json.dumps(path)  # a TOML basic string is a JSON string for these characters


def test_a_case_file_name_must_be_a_repository_name(tmp_path):
    """Before: ``Bad Name&x.toml`` passed --check-cases, then stopped the whole run with
    "(eval scratch config): ...repositories[0]: must be owner/repo"."""
    text = ('language = "python"\ntitle = "x"\n[base]\n"ok.py" = "a"\n[[push]]\n'
            '[push.files]\n"ok.py" = "b"\n')
    (tmp_path / "Bad Name&x.toml").write_text(text)
    with pytest.raises(CaseError, match=r"'Bad Name&x' \(the file's name\) is not a repository"):
        load_case(tmp_path / "Bad Name&x.toml")
    (tmp_path / "py-ok_1.2.toml").write_text(text)
    assert load_case(tmp_path / "py-ok_1.2.toml").id == "py-ok_1.2"
