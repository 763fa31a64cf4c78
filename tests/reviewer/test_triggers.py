"""The typed trigger and the hidden markers: one format on the wire, parsed, never searched."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.core.triggers import (
    Trigger,
    is_own_post,
    is_review_post,
    notice_marker,
    reply_marker,
    review_marker,
    review_trigger,
)


@pytest.mark.parametrize(("trigger", "text", "automatic"), [
    (Trigger.auto("acct", "abc"), "acct:auto:abc", True),
    (Trigger.retarget("acct", "abc", "def"), "acct:retarget:abc:def", True),
    (Trigger.cmd("acct", 5), "acct:cmd:5", False),
    (Trigger.chat("acct", 6), "acct:chat:6", False),
    (Trigger.bot("acct", 7), "acct:bot:7", False),
    (Trigger.ci("actions", 123, 2), "actions:ci:123.2", False),
])
def test_format_parse_and_automatic(trigger, text, automatic):
    assert str(trigger) == trigger.format() == text
    assert Trigger.parse(text) == trigger
    assert trigger.automatic is automatic


def test_a_retarget_is_automatic_and_counts_toward_the_cap():
    # Before the typed trigger, "automatic" was `":auto:" in trigger`: a retarget was not.
    assert Trigger.parse("demo:retarget:h:b").automatic
    assert not Trigger.parse("auto:cmd:5").automatic  # an account named "auto" is no kind


def test_comment_ids():
    assert Trigger.parse("a:cmd:5").comment_id == 5
    assert Trigger.parse("a:chat:991").comment_id == 991
    assert Trigger.parse("a:auto:123").comment_id is None


@pytest.mark.parametrize(("text", "error"), [
    ("nothing", "not a trigger"),
    ("acct:auto", "not a trigger"),
    ("acct:later:5", "kind 'later'"),
    (":auto:5", "account"),
    ("acct:auto:", "ident"),
])
def test_bad_triggers_say_what_is_wrong(text, error):
    with pytest.raises(ValueError, match=error):
        Trigger.parse(text)


def test_markers_are_unchanged_on_the_wire():
    # Posts already on GitHub carry these exact lines; a crash recovery must still find them.
    t = Trigger.cmd("demo", 42)
    assert review_marker(t) == "<!-- dsh-github-reviewer:trigger:demo:cmd:42 -->"
    assert reply_marker(42) == "<!-- dsh-github-reviewer:reply-to:42 -->"
    assert notice_marker(Trigger.bot("demo", 42)) == \
        "<!-- dsh-github-reviewer:gave-up:demo:bot:42 -->"
    assert is_review_post("LGTM\n\n" + review_marker(t)) and is_own_post(reply_marker(1))
    assert not is_review_post(reply_marker(1)) and not is_own_post("plain text")


def test_the_trigger_of_a_posted_review_is_parsed_from_its_marker():
    t = Trigger.ci("actions", 5, 1)
    assert review_trigger("Verdict: ok\n\n" + review_marker(t)) == t
    assert review_trigger("quoted: <!-- dsh-github-reviewer:trigger:nonsense -->") is None
    assert review_trigger("no marker") is None and review_trigger(None) is None
