"""The summary comment's text (pure): walkthrough, findings table, state line, marker."""

from __future__ import annotations

from datetime import UTC, datetime

from dsh_github_reviewer.core.triggers import SUMMARY_MARKER, BotIdentity, Trigger
from dsh_github_reviewer.github.models import PullFile, ReviewComment, User
from dsh_github_reviewer.pr_output.summary import (
    Drafted,
    Finding,
    Summary,
    Waiting,
    findings_of,
    listed_findings,
    render,
)


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


def test_left_side_and_ranges_show_where_the_finding_is():
    body = render(Summary(findings=[
        Finding("a.py", 7, "major", "open", "removed check", side="LEFT"),
        Finding("b.py", 12, "minor", "open", "whole block", start_line=10, side="RIGHT"),
        Finding("c.py", 4, "nit", "open", "same line", start_line=4)]))
    assert "| `a.py:7 (LEFT, old code)` | major |" in body
    assert "| `b.py:10–12` | minor |" in body and "| `c.py:4` | nit |" in body


AT = datetime(2026, 1, 1, tzinfo=UTC)
H1 = Trigger.auto("acct", "h1")


def comment(cid: int, path: str, line: int, body: str, review: int = 1) -> ReviewComment:
    return ReviewComment(id=cid, body=body, path=path, line=line, original_line=line,
                         side="RIGHT", pull_request_review_id=review, html_url=f"https://g/{cid}",
                         pull_request_url="https://api/repos/o/r/pulls/1",
                         user=User(login="bot"), created_at=AT, updated_at=AT)


def test_findings_listed_in_the_review_body_count_as_open_and_show_once():
    """The summary used to show only inline comments: 30 open when 40 were reported."""
    inline = [comment(i, "a.py", i, f"**[minor]** finding {i}") for i in range(1, 4)]
    drafted = [Drafted(H1, "a.py", f"finding {i}", "minor", line=i)
               for i in range(1, 6)]
    drafted += [Drafted(H1, "b.py", "file-level note", "major"),
                Drafted(H1, "c.py", "gone\nmore", "nit", line=9, side="LEFT",
                        start_line=8),
                Drafted(Trigger.auto("acct", "never-posted"), "d.py", "never posted", "major",
                        line=1)]
    findings = findings_of(inline, {1}, {}, BotIdentity("bot"))
    findings += listed_findings(drafted, {H1: "https://g/review"}, inline, {1})
    assert [(f.where, f.listed) for f in findings] == [
        ("a.py:1", False), ("a.py:2", False), ("a.py:3", False), ("a.py:4", True),
        ("a.py:5", True), ("b.py", True), ("c.py:8–9 (LEFT, old code)", True)]
    body = render(Summary(findings=findings))
    assert "Findings (7 open (4 of them listed in a review body), 0 fixed, 0 dismissed)" in body
    assert "| [`c.py:8–9 (LEFT, old code)`](https://g/review) | nit | 🔴 open (in the review " \
        "body) | gone |" in body


def test_a_review_waiting_for_a_paused_account_says_so_and_why():
    until = datetime(2026, 12, 2, 3, 15, tzinfo=UTC)
    body = render(Summary(waiting=Waiting("a" * 40, "model", until), last_reviewed="b" * 40))
    assert ("⏸️ **The review of `aaaaaaaaaaaa` waits:** the model provider rejected the bot's "
            "API key. It is tried again at 2026-12-02 03:15 UTC") in body
    assert "Reviewing" not in body and "(Last reviewed: `bbbbbbbbbbbb`.)" in body


def test_a_finding_quoting_html_hides_nothing_after_it():
    """GitHub renders HTML in the summary: a finding's words such as ``<!-- TODO`` (or a
    ``</table>``) cut at 160 characters must not hide or break the rest of the comment."""
    body = render(Summary(findings=[
        Finding("a.html", 3, "minor", "open", "Leftover <!-- TODO comment and </table> tag"),
        Finding("b.py", 4, "major", "open", "second finding")]))
    assert body.count("<!--") == 1 and body.endswith(SUMMARY_MARKER)
    assert "</table>" not in body and "&lt;!-- TODO" in body
