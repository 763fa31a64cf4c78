"""The summary comment's text (pure): walkthrough, findings table, state line, marker."""

from __future__ import annotations

from dsh_github_reviewer.core.triggers import SUMMARY_MARKER
from dsh_github_reviewer.github.models import PullFile
from dsh_github_reviewer.pr_output.summary import Finding, Summary, render


def files(n: int, directory: str = "src") -> list[PullFile]:
    return [PullFile(filename=f"{directory}/f{i}.py", status="modified", additions=2,
                     deletions=1) for i in range(n)]


def test_small_prs_list_every_file_and_large_ones_group_by_directory():
    body = render(Summary(files=files(2)))
    assert "- `src/f0.py` — modified (+2/-1)" in body and "Walkthrough (2 files)" in body
    big = render(Summary(files=files(30) + files(20, "docs")))
    assert "- `docs/` — 20 files (+40/-20)" in big and "- `src/` — 30 files (+60/-30)" in big
    assert "f0.py" not in big


def test_state_line_while_reviewing_and_after():
    assert "⏳ **Reviewing `aaaaaaaaaaaa`…** (last reviewed: `bbbbbbbbbbbb`)" in render(
        Summary(reviewing="a" * 40, last_reviewed="b" * 40))
    assert "Head last reviewed: `bbbbbbbbbbbb` (2 reviews so far)" in render(
        Summary(last_reviewed="b" * 40, reviews=2))
    assert "Not reviewed yet." in render(Summary())


def test_findings_table_escapes_cells_and_counts_statuses():
    body = render(Summary(findings=[
        Finding("a.py", 3, "major", "open", "x | y ghp_" + "z" * 36),
        Finding("b.py", None, None, "fixed", "done"),
        Finding("c.py", 9, "nit", "dismissed", "meh")]))
    assert "Findings (1 open, 1 fixed, 1 dismissed)" in body
    assert "| `a.py:3` | major | 🔴 open | x \\| y [REDACTED_SECRET] |" in body
    assert "| `b.py` | — | ✅ fixed | done |" in body
    assert body.endswith(SUMMARY_MARKER)


def test_cost_line_only_with_usage():
    assert "Cost of this PR" not in render(Summary())
    body = render(Summary(cost_usd=0.0123, prompt_tokens=1000, cache_read_tokens=900))
    assert "Cost of this PR's reviews and answers: $0.0123 · prompt cache hit 90 %" in body
