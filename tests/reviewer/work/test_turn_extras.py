"""Whether a review gets the second look: the base's repository config decides when it says,
else the account's ``review.verify`` (the daemon and CI ask the same function)."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.config import ReviewSettings
from dsh_github_reviewer.turn.repo_config import RepoConfig, RepoSettings
from dsh_github_reviewer.work.turn_extras import verify_enabled


@pytest.mark.parametrize(("account", "repo", "expected"), [
    (False, None, False), (True, None, True),          # the repository says nothing
    (True, False, False), (False, True, True),         # the repository's word wins
    (True, True, True), (False, False, False),
])
def test_the_repository_config_wins_over_the_account(account, repo, expected):
    settings = RepoSettings(config=RepoConfig(verify=repo))
    assert verify_enabled(ReviewSettings(verify=account), settings) is expected


def test_no_repository_config_read_keeps_the_accounts_setting():
    assert verify_enabled(ReviewSettings(verify=True), None) is True
    assert verify_enabled(ReviewSettings(), None) is False
