"""The dropped findings' collapsed section in the summary: model text (a finding about HTML, a
reason quoting a tag) cannot close the section early or open another."""

from __future__ import annotations

from dsh_github_reviewer.pr_output.second_look import DroppedFinding, render_second_look


def test_a_finding_quoting_tags_stays_inside_its_section():
    text = render_second_look([DroppedFinding(
        "web/page.html", 3, "minor", "The </details> tag closes <details> too early",
        "page.html:3 shows </details><details><summary>x</summary> is intended")])
    assert text.count("<details>") == 1 and text.count("</details>") == 1
    assert text.endswith("</details>")
    assert "&lt;/details&gt;" in text, "the finding's words are kept, as text"
