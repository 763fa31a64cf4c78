"""``eval mine`` end to end on a repository history built here: three bugs, each introduced by
one change and fixed by a later one, among refactors, whitespace and unrelated commits. Each
fix yields one valid case whose PR is the introducing change and whose defect is the lines the
fix touched."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dsh_github_reviewer.eval import check_cases, load_cases
from dsh_github_reviewer.eval.mine import guess_category, is_fix, mine

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": "/dev/null",
       "GIT_CONFIG_NOSYSTEM": "1"}


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={**os.environ, **ENV, **(env or {})}).stdout.strip()


def _commit(repo: Path, message: str, files: dict[str, str | None]) -> str:
    day = len(_git(repo, "rev-list", "--all").split()) + 1  # one commit a day from Jan 1
    when = {"GIT_AUTHOR_DATE": f"2024-01-{day:02d}T12:00:00Z",
            "GIT_COMMITTER_DATE": f"2024-01-{day:02d}T12:00:00Z"}
    for path, text in files.items():
        target = repo / path
        if text is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message, env=when)
    return _git(repo, "rev-parse", "HEAD")


PAGES_OK = """def page(items, n, size):
    start = n * size
    return items[start:start + size]


def pages(items, size):
    return (len(items) + size - 1) // size
"""
PAGES_BUG = PAGES_OK.replace("    return (len(items) + size - 1) // size",
                             "    return len(items) // size + 1")
STORE = """import sqlite3


def open_db(path):
    return sqlite3.connect(path)
"""
STORE_BUG = STORE + """

def find(db, name):
    rows = db.execute("select * from users where name = '" + name + "'")
    return rows.fetchall()
"""
STORE_FIX = STORE + """

def find(db, name):
    rows = db.execute("select * from users where name = ?", (name,))
    return rows.fetchall()
"""
JS = """export function total(items) {
  let sum = 0;
  for (const item of items) {
    sum += item.price;
  }
  return sum;
}
"""
JS_BUG = JS + """
export function average(items) {
  return total(items) / items.length;
}
"""
JS_FIX = JS + """
export function average(items) {
  if (items.length === 0) {
    return 0;
  }
  return total(items) / items.length;
}
"""


@pytest.fixture
def history(tmp_path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    c: dict[str, str] = {}
    _commit(repo, "Initial import", {"README.md": "# shop\n", "shop/pages.py": PAGES_OK,
                                      "shop/store.py": STORE, "web/cart.js": JS})
    c["pages_bug"] = _commit(repo, "Simplify the page count", {"shop/pages.py": PAGES_BUG})
    c["sql_bug"] = _commit(repo, "Find users by name", {"shop/store.py": STORE_BUG})
    _commit(repo, "Add a changelog", {"CHANGELOG.md": "0.1\n"})
    c["js_bug"] = _commit(repo, "Average price in the cart", {"web/cart.js": JS_BUG})
    # Not fixes: a refactor and a whitespace-only "fix".
    _commit(repo, "Refactor: fix naming in pages", {"shop/pages.py": PAGES_BUG.replace(
        "def page(", "def page (").replace("def page (", "def page(")
        + "\n\ndef first(items):\n    return items[:1]\n"})
    _commit(repo, "Fix indentation", {"web/cart.js": JS_BUG.replace("  let sum", "  let  sum")
                                      .replace("  let  sum", "  let sum") + "\n"})
    c["pages_fix"] = _commit(repo, "Fix the page count for exact multiples", {
        "shop/pages.py": PAGES_OK + "\n\ndef first(items):\n    return items[:1]\n"})
    c["sql_fix"] = _commit(repo, "Fix SQL injection in find", {"shop/store.py": STORE_FIX})
    c["js_fix"] = _commit(repo, "Fix crash on an empty cart (division by zero)", {
        "web/cart.js": JS_FIX + "\n"})
    return repo, c


def test_three_seeded_bugs_become_three_valid_cases(history, tmp_path):
    repo, c = history
    out = tmp_path / "drafts"
    result = mine(repo, "acme/shop", out)
    assert len(result.written) == 3, [(s.fix[:8], s.why) for s in result.skipped]
    cases = {x.id: x for x in load_cases(out)}
    assert check_cases(list(cases.values())) == []
    by_intro = {cid.rsplit("-", 1)[1]: x for cid, x in cases.items()}
    assert set(by_intro) == {c["pages_bug"][:8], c["sql_bug"][:8], c["js_bug"][:8]}

    pages = by_intro[c["pages_bug"][:8]]
    assert pages.language == "python" and pages.title == "Simplify the page count"
    assert pages.base == {"shop/pages.py": PAGES_OK}
    assert pages.push[0].files == {"shop/pages.py": PAGES_BUG}
    (d,) = pages.defects
    # The fix changed line 7 of the introducing change's version: the defect.
    assert (d.path, d.lines) == ("shop/pages.py", (7, 7))
    assert PAGES_BUG.splitlines()[6] == "    return len(items) // size + 1"
    assert c["pages_fix"][:12] in d.description

    sql = by_intro[c["sql_bug"][:8]]
    (d,) = sql.defects
    assert (d.path, d.lines, d.category) == ("shop/store.py", (9, 9), "injection")
    assert "select * from users where name = '\"" in STORE_BUG.splitlines()[8]

    js = by_intro[c["js_bug"][:8]]
    (d,) = js.defects
    # An insertion-only fix: the lines on either side of the insertion (the function's head
    # and the division it guards).
    assert js.language == "javascript" and d.path == "web/cart.js" and d.lines == (9, 10)
    assert d.category == "edge-case"
    # The refactor and the whitespace "fix" were not taken for fixes; nothing was skipped.
    assert result.skipped == []
    text = next(out.glob("*.toml")).read_text()
    assert text.startswith("# Draft mined from acme/shop: introduced by ")


def test_limit_and_since(history, tmp_path):
    repo, _ = history
    assert len(mine(repo, "acme/shop", tmp_path / "one", limit=1).written) == 1
    assert mine(repo, "acme/shop", tmp_path / "none", since="2024-02-01").written == []
    # The last fix (Jan 10) only.
    (last,) = mine(repo, "acme/shop", tmp_path / "last", since="2024-01-10").written
    assert "Average price" in last.read_text()


def test_what_counts_as_a_fix():
    assert is_fix("Fix crash on empty input") and is_fix("Resolves #12: wrong total")
    assert not is_fix("Refactor: fix naming") and not is_fix("Fix typo in docs")
    assert not is_fix("Fix indentation") and not is_fix("Add search")
    assert guess_category("Fix off-by-one in paging") == "off-by-one"
    assert guess_category("Close the file on error paths (leak)") == "resource-leak"


@pytest.mark.slow
def test_the_command_writes_drafts_check_cases_accepts(history, tmp_path):
    from ...cli_kit import dsh

    repo, _ = history
    out = tmp_path / "drafts"
    proc = dsh("github-reviewer", "eval", "mine", "--repo", "acme/shop", "--clone", str(repo),
               "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 3 and "3 draft case(s)" in proc.stderr
    proc = dsh("github-reviewer", "eval", "--check-cases", "--cases", str(out), cwd=tmp_path)
    assert proc.returncode == 0 and "3 of 3 cases valid" in proc.stdout, proc.stdout


def test_two_fixes_of_one_change_give_one_case_with_both_defects(tmp_path):
    """Before: the second fix of the same introducing change was skipped ("already drafted"),
    so the case held one of its two known bugs and a reviewer finding the other one was
    scored a false positive."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, "Initial import", {"calc.py": "def add(a, b):\n    return a + b\n"})
    helpers = ("def add(a, b):\n    return a + b\n\n\ndef mean(xs):\n    total = 0\n"
               "    for x in xs:\n        total += x\n    return total / len(xs)\n\n\n"
               "def first(xs):\n    return xs[1]\n")
    intro = _commit(repo, "Add mean and first helpers", {"calc.py": helpers})
    _commit(repo, "Add clamp", {"util.py": "def clamp(x, lo, hi):\n    return max(lo, x)\n"})
    one = _commit(repo, "Fix off-by-one in first()",
                  {"calc.py": helpers.replace("xs[1]", "xs[0]")})
    two = _commit(repo, "Fix crash on an empty list in mean", {"calc.py": helpers.replace(
        "xs[1]", "xs[0]").replace("/ len(xs)\n", "/ len(xs) if xs else 0.0\n")})
    result = mine(repo, "acme/calc", tmp_path / "out")
    (path,) = result.written
    assert result.skipped == [], result.skipped
    (case,) = load_cases(tmp_path / "out")
    assert case.id.endswith(intro[:8]) and check_cases([case]) == []
    assert sorted(((d.id, d.lines) for d in case.defects), key=lambda x: x[1]) == [
        (f"fixed-{two[:8]}", (9, 9)), (f"fixed-{one[:8]}", (13, 13))]
    assert f"Also fixed by {one}" in path.read_text()


def test_a_control_character_in_a_commit_message_keeps_the_draft_readable(tmp_path):
    """Before: a fix subject with an ANSI colour (ESC) went into the draft's header comment
    as is, and TOML refuses control characters in comments: the draft could not be read."""
    from dsh_github_reviewer.eval import load_case
    from dsh_github_reviewer.eval.case_toml import dumps_case

    data = {"language": "python", "title": "t\x1bx", "base": {"a.py": "x\n"},
            "push": [{"message": "m", "files": {"a.py": "y\n"}}]}
    (tmp_path / "c.toml").write_text(dumps_case(data, "fixed by \x1b[31mred\x1b[0m\x7f"))
    case = load_case(tmp_path / "c.toml")
    assert case.title == "t\x1bx"
    assert "# fixed by \\x1b[31mred\\x1b[0m\\x7f" in (tmp_path / "c.toml").read_text()


def test_no_fix_found_is_said_as_such(history, tmp_path, capsys):
    """Before: a --since that git reads as "now" (or a history without fixes) ended with
    "0 draft case(s) in DIR; review them, then ..." as if there were drafts to review."""
    import argparse

    from dsh_github_reviewer.eval.mine import cmd_mine

    repo, _ = history
    args = argparse.Namespace(repo="acme/shop", clone=str(repo), since="2030-01-01",
                              limit=None, out=str(tmp_path / "none"))
    assert cmd_mine(args) == 1
    err = capsys.readouterr().err
    assert "no bug-fix commit on the checked-out branch's first-parent history since " \
           "'2030-01-01'" in err and "review them" not in err
