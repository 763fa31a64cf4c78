"""Which 👎 dismiss a finding: an allowlisted person's, never the PR author's; a voter who
wrote nothing on the PR is judged by their repository permission (asked once an hour)."""

from __future__ import annotations

import logging

import pytest

from dsh_github_reviewer.github import votes
from dsh_github_reviewer.github.auth import PatAuth
from dsh_github_reviewer.github.client import GitHubClient
from dsh_github_reviewer.github.errors import GitHubError, NotFound
from dsh_github_reviewer.github.votes import counted
from tests.reviewer.conftest import BOT_TOKEN, small_repo

KNOWN = {"maint": "MEMBER", "alice": "MEMBER", "mallory": "NONE"}


def test_the_authors_and_strangers_thumbs_down_do_not_count():
    allowed = ["OWNER", "MEMBER", "COLLABORATOR"]
    assert counted(frozenset({"alice"}), "Alice", KNOWN, allowed) == 0   # author, any case
    assert counted(frozenset({"mallory", "ghost"}), "alice", KNOWN, allowed) == 0
    assert counted(frozenset({"maint", "alice", "mallory"}), "alice", KNOWN, allowed) == 1
    # "*" lets anyone run commands — still not the PR's author.
    assert counted(frozenset({"alice", "ghost"}), "alice", KNOWN, ["*"]) == 1


# -- a 👎 voter who wrote nothing on the PR: their repository permission decides ----------------

ALLOWED = ["OWNER", "MEMBER", "COLLABORATOR"]


@pytest.fixture(autouse=True)
def fresh_caches():
    votes.forget()
    yield
    votes.forget()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def gh(sandbox, http, clock):
    return GitHubClient(sandbox.api_url, PatAuth(BOT_TOKEN), http, clock=clock)


def asked(sandbox) -> list[str]:
    """The logins whose permission the bot asked for, in order."""
    return [e.path.split("/")[-2] for e in sandbox.log if e.path.endswith("/permission")]


@pytest.mark.parametrize(("login", "permission", "association"), [
    ("octo", "admin", "OWNER"), ("OCTO", None, "OWNER"),
    ("carol", "admin", "COLLABORATOR"), ("carol", "maintain", "COLLABORATOR"),
    ("carol", "write", "COLLABORATOR"), ("carol", "WRITE", "COLLABORATOR"),
    ("carol", "triage", "NONE"), ("carol", "read", "NONE"), ("carol", "none", "NONE"),
    ("carol", "custom-role", "NONE"), ("carol", None, "NONE")])
def test_a_permission_proves_an_association_conservatively(login, permission, association):
    assert votes.permission_association("octo", login, permission) == association


async def test_client_reads_the_permission_and_maps_errors(gh, sandbox):
    st = small_repo(sandbox)
    st.set_permission("octo/app", "mona", "maintain")
    st.add_user("rita")
    mona = await gh.collaborator_permission("octo", "app", "mona")
    assert (mona.permission, mona.role_name, mona.user.login) == ("write", "maintain", "mona")
    assert (await gh.collaborator_permission("octo", "app", "octo")).permission == "admin"
    assert (await gh.collaborator_permission("octo", "app", "rita")).permission == "read"
    with pytest.raises(NotFound):
        await gh.collaborator_permission("octo", "app", "ghost")
    st.repo("octo/app").permissions_forbidden = True
    with pytest.raises(GitHubError) as exc:
        await gh.collaborator_permission("octo", "app", "mona")
    assert exc.value.status == 403 and not isinstance(exc.value, NotFound)
    with pytest.raises(ValueError, match="unknown repository role 'owner'"):
        st.set_permission("octo/app", "mona", "owner")


async def test_only_unknown_voters_are_looked_up_and_the_answer_is_kept(gh, sandbox, clock):
    st = small_repo(sandbox)
    st.set_permission("octo/app", "carol", "write")
    st.set_permission("octo/app", "tim", "triage")
    st.add_user("rita")
    known = {"maint": "MEMBER", "mallory": "NONE"}
    voters = frozenset({"carol", "tim", "rita", "ghost", "alice", "maint", "mallory", "octo"})
    learnt = await votes.learn_associations(gh, "octo", "app", voters, "alice", known, ALLOWED)
    assert learnt == {**known, "carol": "COLLABORATOR", "tim": "NONE", "rita": "NONE",
                      "ghost": "NONE", "octo": "OWNER"}
    # Not the author, not a known commenter, not the owner (their login says it).
    assert sorted(asked(sandbox)) == ["carol", "ghost", "rita", "tim"]
    assert votes.counted(voters, "alice", learnt, ALLOWED) == 3   # carol, maint, octo

    sandbox.reset_log()
    clock.now += votes.PERMISSION_TTL_S - 1
    again = await votes.learn_associations(gh, "octo", "app", voters, "alice", known, ALLOWED)
    assert again == learnt and asked(sandbox) == [], "within the hour: no request"
    st.set_permission("octo/app", "tim", "write")
    clock.now += 2
    again = await votes.learn_associations(gh, "octo", "app", voters, "alice", known, ALLOWED)
    assert again["tim"] == "COLLABORATOR" and len(asked(sandbox)) == 4


@pytest.mark.parametrize("allowed", [["*"], ["MEMBER"], []])
async def test_no_lookup_when_no_permission_could_be_allowed(gh, sandbox, allowed):
    st = small_repo(sandbox)
    st.set_permission("octo/app", "carol", "write")
    learnt = await votes.learn_associations(gh, "octo", "app", frozenset({"carol"}), "alice",
                                            {}, allowed)
    assert learnt == {} and asked(sandbox) == []


async def test_a_refused_lookup_is_unknown_logged_once_and_not_repeated(gh, sandbox, clock,
                                                                        caplog):
    st = small_repo(sandbox)
    st.set_permission("octo/app", "carol", "write")
    st.set_permission("octo/app", "dave", "admin")
    st.repo("octo/app").permissions_forbidden = True
    caplog.set_level(logging.DEBUG, logger="dsh_github_reviewer.github.votes")
    voters = frozenset({"carol", "dave"})
    for _ in range(3):
        learnt = await votes.learn_associations(gh, "octo", "app", voters, "alice", {},
                                                ALLOWED)
        assert learnt == {"carol": "NONE", "dave": "NONE"}
    assert len(asked(sandbox)) == 1, "a 403 holds for the whole repository"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "octo/app" in warnings[0].getMessage()
    assert BOT_TOKEN not in caplog.text

    st.repo("octo/app").permissions_forbidden = False
    clock.now += votes.PERMISSION_TTL_S + 1
    learnt = await votes.learn_associations(gh, "octo", "app", voters, "alice", {}, ALLOWED)
    assert learnt == {"carol": "COLLABORATOR", "dave": "COLLABORATOR"}


@pytest.mark.parametrize("fault", ["error", "rate_limit"])
async def test_a_failed_lookup_is_unknown_and_retried_after_a_few_minutes(gh, sandbox, clock,
                                                                          fault):
    st = small_repo(sandbox)
    st.set_permission("octo/app", "carol", "write")
    if fault == "error":
        sandbox.inject_error(502, path_contains="/permission")
    else:
        sandbox.inject_rate_limit("secondary", wait_s=60, path_contains="/permission")
    one = frozenset({"carol"})
    assert await votes.learn_associations(gh, "octo", "app", one, "alice", {}, ALLOWED) == \
        {"carol": "NONE"}
    clock.now += votes.PERMISSION_ERROR_TTL_S - 1
    assert await votes.learn_associations(gh, "octo", "app", one, "alice", {}, ALLOWED) == \
        {"carol": "NONE"}
    assert len(asked(sandbox)) == 1
    clock.now += 2
    assert await votes.learn_associations(gh, "octo", "app", one, "alice", {}, ALLOWED) == \
        {"carol": "COLLABORATOR"}


async def test_a_collaborators_thumbs_down_dismisses_without_a_comment(gh, sandbox, clock):
    st = small_repo(sandbox)
    st.set_permission("octo/app", "carol", "write")
    st.add_user("rita")
    found = [st.add_review_comment("octo/app", 1, "dsh-bot", f"finding {i}", path="app.py",
                                   line=2) for i in range(3)]
    st.react(found[0].id, "carol", "-1")     # can push, never wrote on the PR
    st.react(found[1].id, "rita", "-1")      # can only read
    st.react(found[2].id, "alice", "-1")     # the PR's author
    comments = await gh.list_review_comments("octo", "app", 1)
    down = await votes.dismissed(gh, "octo", "app", 1, comments, comments, "alice", ALLOWED)
    assert down == {found[0].id: 1}
    assert sorted(asked(sandbox)) == ["carol", "rita"]
    sandbox.reset_log()
    assert await votes.dismissed(gh, "octo", "app", 1, comments, comments, "alice",
                                 ALLOWED) == down
    assert asked(sandbox) == [] and not any(e.path.endswith("/reactions")
                                            for e in sandbox.log), "nothing changed: no re-read"
