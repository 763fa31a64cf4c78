"""A comment's severity label and first line, as the summary and the thread list read them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsh_github_reviewer.core.severity import SEVERITIES, headline, parse, render


@given(st.sampled_from([*SEVERITIES, None]), st.text(), st.sampled_from(["", " ", "\n  "]))
def test_headline_is_the_label_and_the_first_line_of_the_rest(sev, text, pad):
    body = pad + (render(sev, text) if sev else text) + pad
    got = headline(body)
    want_sev, rest = parse(body.strip())
    assert got == (want_sev, rest.split("\n", 1)[0])
    assert "\n" not in got[1]


def test_headline_of_no_body_and_of_a_multi_line_finding():
    assert headline(None) == (None, "")
    assert headline("**[major]** Key in code.\n\nMove it to the environment.") == (
        "major", "Key in code.")
    assert headline("**[urgent]** not a label") == (None, "**[urgent]** not a label")
