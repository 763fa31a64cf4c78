"""Edges of the command rules: who may command the bot, whose PRs are ignored."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.core.commands import (
    ParsedCommand,
    association_allowed,
    author_ignored,
    parse_command,
)


@pytest.mark.parametrize(("login", "patterns", "ignored"), [
    ("bot1", ["bot?"], True),            # ? is exactly one character...
    ("bot", ["bot?"], False),            # ...not zero
    ("bot12", ["bot?"], False),          # ...and not two
    ("bot?", ["bot?"], True),
    ("a.b", ["a?b"], True),
    ("ab", ["a.b"], False),              # other regex characters are literal
    ("aXb", ["a.b"], False),
    ("renovate[bot]", ["*[bot]"], True),
    ("b", ["*[bot]"], False),            # brackets are literal, not a character class
    ("ci-bot", ["ci-*", "other"], True),  # any entry may match
    ("alice", [], False),
    ("xalice", ["alice"], False),        # anchored at both ends
    ("alicex", ["alice"], False),
    ("ALICE", ["al?ce"], True),          # case-insensitive
])
def test_ignore_authors_globs(login, patterns, ignored):
    assert author_ignored(login, patterns) is ignored


@pytest.mark.parametrize(("association", "allowed", "ok"), [
    (None, ["NONE"], True),          # a missing association counts as NONE
    ("", ["NONE"], True),
    (None, ["OWNER"], False),
    ("none", ["NONE"], True),
    ("CONTRIBUTOR", ["OWNER", "*"], True),
    ("OWNER", ["owner"], False),     # the configured list is upper case (config validates it)
])
def test_association_rules(association, allowed, ok):
    assert association_allowed(association, allowed) is ok


@pytest.mark.parametrize(("body", "command"), [
    ("/review", ParsedCommand("review")),
    ("/bot hi", ParsedCommand("bot", "hi")),
    ("\n\t/review\n", ParsedCommand("review")),
    ("/review\textra", ParsedCommand("review")),
    ("/review full", ParsedCommand("review", full=True)),
    ("/REVIEW Full please", ParsedCommand("review", full=True)),
    ("/review fully", ParsedCommand("review")),
    ("/bot pause", ParsedCommand("bot", "pause", "pause")),
    ("/bot Resume", ParsedCommand("bot", "Resume", "resume")),
    ("/bot help", ParsedCommand("bot", "help", "help")),
    ("/bot help me with this", ParsedCommand("bot", "help me with this")),
    ("/bot lessons", ParsedCommand("bot", "lessons", "lessons")),
    ("/bot forget 3", ParsedCommand("bot", "3", "forget")),
    ("/bot learn we use print on purpose\nin scripts",
     ParsedCommand("bot", "we use print on purpose\nin scripts", "learn")),
    ("/bot pause now", ParsedCommand("bot", "pause now")),
])
def test_command_values(body, command):
    assert parse_command(body) == command
