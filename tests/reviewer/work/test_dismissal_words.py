"""Which maintainer replies on a finding of the bot say it is no defect (and so teach a lesson
for the whole repository): the words must say so, not ask it or deny it. A reply agreeing with
the finding ("good catch, this is not intended") taught the opposite lesson."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.work.bot_commands import dismisses


@pytest.mark.parametrize("reply", [
    "This is intended because the value comes from our signed config.",
    "By design: the cache is per process.",
    "False positive, the input is validated upstream.",
    "Not a bug. We rely on it.",
    "won't fix",
    "It's deliberate; see ADR-12.",
    "Works as intended. Is there anything else?",
    "This isn't a bug, it is how the API works.",
])
def test_dismissals_teach(reply):
    assert dismisses(reply)


@pytest.mark.parametrize("reply", [
    "Good catch, this is not intended.",
    "Is this intended?",
    "Was this on purpose? @alice",
    "This isn't expected behaviour, fixing.",
    "Definitely not a false positive, thanks!",
    "Hmm, this was never by design.",
    "Good catch, will fix.",
])
def test_agreements_and_questions_teach_nothing(reply):
    assert not dismisses(reply)
