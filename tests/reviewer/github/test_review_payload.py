"""What goes inline and what is listed in the review body: severity, min_severity,
max_findings and the tool budget — nothing is dropped."""

from __future__ import annotations

from dsh_github_reviewer.core import severity
from dsh_github_reviewer.core.triggers import Trigger, review_marker
from dsh_github_reviewer.github.review_submit import (
    Draft,
    DraftComment,
    FindingLimits,
    review_payload,
    split_findings,
)

T = Trigger.auto("demo", "h")


def comment(n: int, sev: str, **kw) -> DraftComment:
    return DraftComment(path="a.py", body=f"finding {n}\n\n```suggestion\nfix\n```",
                        subject_type="LINE", line=n, side="RIGHT", severity=sev, **kw)


def test_severity_form_round_trips():
    for sev in severity.SEVERITIES:
        assert severity.parse(severity.render(sev, "text")) == (sev, "text")
    assert severity.parse("[major] text") == (None, "[major] text")
    assert severity.at_least("critical", "major") and not severity.at_least("nit", "minor")


def test_everything_inline_by_default_with_the_severity_first():
    draft = Draft("h", [comment(1, "nit"), comment(2, "critical")])
    body, inline = review_payload(draft, "Summary.", T)
    assert [c["body"].split("\n")[0] for c in inline] == ["**[nit]** finding 1",
                                                          "**[critical]** finding 2"]
    assert body == "Summary.\n\n" + review_marker(T)


def test_min_severity_and_max_findings_list_the_rest_in_the_body():
    comments = [comment(1, "nit"), comment(2, "minor"), comment(3, "critical"),
                comment(4, "major"), comment(5, "minor"), comment(6, "major", over_budget=True)]
    draft = Draft("h", comments, FindingLimits(min_severity="minor", max_findings=2))
    inline, listed = split_findings(draft)
    assert [c.line for c in inline] == [3, 4], "the most severe stay inline, in draft order"
    assert [c.line for c in listed["cap"]] == [2, 5]
    assert [c.line for c in listed["severity"]] == [1]
    assert [c.line for c in listed["budget"]] == [6]
    body, posted = review_payload(draft, "Summary.", T)
    assert len(posted) == 2
    for n in (1, 2, 5, 6):
        assert f"`a.py:{n}`" in body and f"finding {n}" in body
    assert "suggestion" not in body, "a listed finding's code block is left out"
    assert "past `max_findings` (2)" in body and "below `min_severity` (minor)" in body
    assert body.endswith(review_marker(T))


def test_file_comments_carry_their_severity_in_the_body():
    draft = Draft("h", [DraftComment(path="b.py", body="whole file", subject_type="FILE",
                                     severity="major")])
    body, inline = review_payload(draft, "S", T)
    assert inline == [] and "**`b.py`**: **[major]** whole file" in body


def test_a_long_listing_stays_under_githubs_body_limit_and_says_how_many_were_left_out():
    """GitHub refuses a review body over 65,536 characters (422) and the whole review with it:
    listed findings are taken while they fit and the rest are counted, never silently cut."""
    long = "x" * 590
    comments = [DraftComment(path=f"src/m{n}.py", body=f"finding {n} {long}", line=n,
                             subject_type="LINE", side="RIGHT", severity="minor",
                             over_budget=True) for n in range(1, 301)]
    comments += [DraftComment(path="big.py", body="y" * 50_000, subject_type="FILE",
                              severity="major")]
    body, inline = review_payload(Draft("h", comments), "S" * 100_000, T)
    assert inline == [] and len(body) <= 65_536
    shown = sum(1 for n in range(1, 301) if f"`src/m{n}.py:{n}`" in body)
    assert 0 < shown < 300
    assert "**`big.py`**: **[major]** yyy" in body and "[cut: too long]" in body
    assert f"…and {300 - shown} more finding(s) not listed here" in body
    assert "summary comment" in body and body.endswith(review_marker(T))


def test_fixed_findings_are_named_by_place_and_first_words_never_by_thread_id():
    draft = Draft("h", [], fixed=[1012, 1013], fixed_labels=[
        ("shop/orders.py:10", "SQL built by string concatenation is injectable through the "
                              "search box"),
        ("a`b.py:3", "")])
    body, _ = review_payload(draft, "S", T)
    assert ("**Fixed since the last review:**\n\n- `shop/orders.py:10` (SQL built by string "
            "concatenation is injectable through the…)\n- `a'b.py:3`") in body
    assert "1012" not in body.split("<!--", 1)[0], "thread ids only in the hidden marker"
