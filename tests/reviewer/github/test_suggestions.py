"""Suggestions: parsed like GitHub, accepted by the guard only on RIGHT lines inside one hunk."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.github.diff import commentable_lines
from dsh_github_reviewer.github.guard_rules import ChangedFiles, Rejected, Scope, check_comment
from dsh_github_reviewer.github.suggestions import SuggestionError, one_suggestion, suggestions

SCOPE = Scope(owner="o", repo="r", number=1, base_sha="b" * 40, base_ref="main",
              head_sha="h" * 40, head_ref="f", head_owner="o", head_repo="r")
# Two hunks: new lines 1-5 and 25-30.
PATCH = ("@@ -1,5 +1,5 @@\n line 1\n-line 2\n+LINE 2\n line 3\n line 4\n line 5\n"
         "@@ -25,6 +25,6 @@\n line 25\n line 26\n line 27\n-line 28\n+LINE 28\n line 29\n"
         " line 30")
CHANGED = ChangedFiles(paths={"big.py"}, lines={"big.py": commentable_lines(PATCH)})
BASE = {"owner": "o", "repo": "r", "pullNumber": 1, "path": "big.py", "severity": "minor",
        "subjectType": "LINE", "side": "RIGHT"}
FIX = "Wrong case.\n\n```suggestion\nline 2\n```"
RANGES = "Lines of big.py a suggestion may replace (RIGHT side, one hunk each): 1-5, 25-30"


def test_blocks_are_found_like_github_renders_them():
    assert suggestions("x\n```suggestion\na\nb\n```\ny")[0].lines == ["a", "b"]
    assert suggestions("~~~~ suggestion\n\n~~~~")[0].lines == [""], "an empty line deletes"
    assert suggestions("```python\nx\n```") == []
    assert one_suggestion("no block") is None
    with pytest.raises(SuggestionError, match="not closed"):
        suggestions("```suggestion\nx")
    with pytest.raises(SuggestionError, match="2 ```suggestion blocks"):
        one_suggestion("```suggestion\na\n```\n```suggestion\nb\n```")


def test_hunks_of_a_patch():
    assert commentable_lines(PATCH).right_hunks == [(1, 5), (25, 30)]
    deletion_only = commentable_lines("@@ -3,2 +2,0 @@\n-a\n-b")
    assert deletion_only.hunk_ranges() == "none" and deletion_only.right_hunk(2, 2) is None


@pytest.mark.parametrize("args", [
    {**BASE, "line": 2, "body": FIX},
    {**BASE, "startLine": 1, "startSide": "RIGHT", "line": 5, "body": FIX},
    {**BASE, "startLine": 25, "startSide": "RIGHT", "line": 30, "body": FIX},
])
def test_a_suggestion_inside_one_hunk_is_accepted(args):
    assert check_comment(args, SCOPE, CHANGED)["body"] == FIX


@pytest.mark.parametrize(("args", "error"), [
    ({**BASE, "startLine": 4, "startSide": "RIGHT", "line": 25, "body": FIX},
     f"a ```suggestion must replace lines inside one diff hunk; lines 4-25 is not. {RANGES}"),
    ({**BASE, "side": "LEFT", "line": 2, "body": FIX},
     f"a ```suggestion replaces new code: side (and startSide) must be RIGHT. {RANGES}"),
    ({**BASE, "startLine": 2, "startSide": "LEFT", "line": 3, "body": FIX},
     f"a ```suggestion replaces new code: side (and startSide) must be RIGHT. {RANGES}"),
    ({**BASE, "subjectType": "FILE", "body": FIX}, "a ```suggestion replaces lines: use "
     "subjectType LINE with side RIGHT and the line (or startLine..line) it replaces"),
    ({**BASE, "line": 2, "body": FIX + "\n" + FIX}, "2 ```suggestion blocks in one comment; "
     "GitHub applies one per comment: put one in each comment, or one block covering the "
     "whole commented range"),
    ({**BASE, "line": 2, "body": "```suggestion\nx"},
     "the ```suggestion block is not closed; end it with ``` on its own line"),
])
def test_a_suggestion_github_would_reject_is_refused_naming_the_range(args, error):
    with pytest.raises(Rejected) as exc:
        check_comment(args, SCOPE, CHANGED)
    assert str(exc.value) == error



def test_an_empty_block_deletes_the_lines_and_parsing_ends():
    """An empty ```suggestion block (the closing fence right after the opening one) replaces
    the range with nothing; parsing moves past it (a loop that stays on the fence never ends,
    so the parse runs in a daemon thread: a regression fails here instead of hanging)."""
    import threading

    found: list = []
    body = "Remove these.\n```suggestion\n```\ntrailing text\n```suggestion\n```"
    worker = threading.Thread(target=lambda: found.append(suggestions(body)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "parsing an empty suggestion block did not end"
    assert [s.lines for s in found[0]] == [[], []]
    assert one_suggestion("```suggestion\n```").lines == []
