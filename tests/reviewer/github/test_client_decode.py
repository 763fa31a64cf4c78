"""The client decodes GitHub's JSON with pydantic's parser and falls back to the json module:
whatever the json module accepts decodes to the very same values, whatever it refuses is a
``GitHubError`` naming the endpoint."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_github_reviewer.github.client import GitHubClient
from dsh_github_reviewer.github.errors import GitHubError

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30)


def decode(text: str):
    return GitHubClient._decode("GET", "repos/o/r/pulls", text, True)


@given(JSON, st.booleans())
def test_every_json_text_decodes_as_the_json_module_decodes_it(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert decode(text) == json.loads(text)


@pytest.mark.parametrize("text", [
    '"\\ud800"',                                      # a lone surrogate: jiter refuses it
    '{"body": "a \\udfff b", "id": 1}',
    '[1e400, -1e400, 123456789012345678901234567890, -0.0, 0.1]',
    '[NaN]',
    '{"a": 1, "a": 2}',                               # the last key wins, as in json
    ' \n [1, 2] \n',
])
def test_the_edge_cases_decode_as_the_json_module_decodes_them(text):
    got, want = decode(text), json.loads(text)
    assert repr(got) == repr(want)


@pytest.mark.parametrize("text", ['{"a": ', "[1, 2", "{'a': 1}", "nul", '"\\x41"'])
def test_invalid_json_is_a_github_error_naming_the_endpoint(text):
    with pytest.raises(GitHubError, match=r"GET repos/o/r/pulls: response is not valid JSON"):
        decode(text)


def test_empty_and_non_json_answers():
    assert decode("") is None and decode("  \n") is None
    assert GitHubClient._decode("GET", "x", "plain text", False) == "plain text"
