"""Which 👎 dismiss a finding: an allowlisted person's, never the PR author's."""

from __future__ import annotations

from dsh_github_reviewer.github.votes import counted

KNOWN = {"maint": "MEMBER", "alice": "MEMBER", "mallory": "NONE"}


def test_the_authors_and_strangers_thumbs_down_do_not_count():
    allowed = ["OWNER", "MEMBER", "COLLABORATOR"]
    assert counted(frozenset({"alice"}), "Alice", KNOWN, allowed) == 0   # author, any case
    assert counted(frozenset({"mallory", "ghost"}), "alice", KNOWN, allowed) == 0
    assert counted(frozenset({"maint", "alice", "mallory"}), "alice", KNOWN, allowed) == 1
    # "*" lets anyone run commands — still not the PR's author.
    assert counted(frozenset({"alice", "ghost"}), "alice", KNOWN, ["*"]) == 1
