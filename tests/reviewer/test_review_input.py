"""The review turn's material against the sandbox GitHub (issue 12): the lost head derived from
the bot's last review, a vanished head, a merge of the base branch, a failed preparation."""

from __future__ import annotations

from dsh_github_reviewer.config import ReviewSettings
from dsh_github_reviewer.core.triggers import review_marker as marker
from dsh_github_reviewer.turn.review_input import prepare_review

from .conftest import small_repo

HISTORY = ["Flow: review.\nThis is the first review of this pull request."]


def bot_review(st, commit: str) -> None:
    review = st.start_review("octo/app", 1, "dsh-bot", commit)
    st.submit_review(review, "COMMENT", "summary\n\n" + marker(f"auto:{commit}"))


async def test_a_lost_previous_head_comes_from_the_bots_last_review(sandbox, client):
    st = small_repo(sandbox)
    first = st.pull("octo/app", 1).head_sha
    bot_review(st, first)
    st.commit("octo/app", "feature-1", {"lib.py": "x = 1\n"}, message="Add lib")
    pr = await client.get_pull("octo", "app", 1)
    got = await prepare_review(client, pr, ReviewSettings(), None, HISTORY)
    assert (got.kind, got.previous_head) == ("push", first)
    assert "+++ b/lib.py" in got.diff and "app.py" not in got.diff
    assert got.commits and got.commits[0].endswith("Add lib")
    # Without an earlier review in the conversation it is a first review, head or not.
    fresh = await prepare_review(client, pr, ReviewSettings(), None, [])
    assert fresh.kind == "first" and "+++ b/app.py" in fresh.diff


async def test_a_vanished_previous_head_gives_the_whole_diff_with_a_note(sandbox, client):
    small_repo(sandbox)
    pr = await client.get_pull("octo", "app", 1)
    got = await prepare_review(client, pr, ReviewSettings(), "f" * 40, HISTORY)
    assert got.kind == "force_push" and "cannot be compared with the new head" in got.note
    assert "+++ b/app.py" in got.diff


def merge_main_into_the_pr(sandbox) -> str:
    """A commit on main, then a push to the PR merging it (and changing app.py); returns the
    head before the push."""
    st = small_repo(sandbox)
    first = st.pull("octo/app", 1).head_sha
    st.commit("octo/app", "main", {"other.py": "from someone else\n"})
    merged = dict(st.commits[st.repo("octo/app").branches["main"]].tree)
    merged["app.py"] = "def f(x):\n    return x + 10\n"
    st.commit("octo/app", "feature-1", merged, message="Merge main")
    # GitHub diffs a PR against the merge base; the sandbox has no merge commits, so move the
    # PR's base to the merged main to get the same file list.
    st.pull("octo/app", 1).base_sha = st.repo("octo/app").branches["main"]
    return first


async def test_a_merge_of_the_base_branch_shows_only_the_prs_files(sandbox, client):
    first = merge_main_into_the_pr(sandbox)
    pr = await client.get_pull("octo", "app", 1)
    got = await prepare_review(client, pr, ReviewSettings(), first, HISTORY)
    assert got.kind == "push" and "+++ b/app.py" in got.diff and "other.py" not in got.diff
    assert "1 file(s) changed by the new commits are not part of this PR" in got.note


async def test_a_failed_preparation_tells_the_model_to_use_the_tools(sandbox, client):
    small_repo(sandbox)
    pr = await client.get_pull("octo", "app", 1)
    sandbox.inject_error(500, times=3, path_contains="/files")
    got = await prepare_review(client, pr, ReviewSettings(), None, [])
    assert got.kind == "unavailable" and got.diff == ""
    assert "pull_request_read method=get_diff" in got.note and "HTTP 500" in got.note


async def test_a_push_that_takes_files_out_of_the_pr_still_shows_them(sandbox, client):
    # Deleting a file the PR added, or reverting a PR change, removes the file from the PR's
    # file list; it was reviewed, so its interdiff is shown, not called "not part of this PR".
    st = small_repo(sandbox)
    st.commit("octo/app", "feature-1", {"new.py": "n = 1\n"})
    first = st.pull("octo/app", 1).head_sha
    st.commit("octo/app", "main", {"other.py": "from someone else\n"})
    st.commit("octo/app", "feature-1", {"new.py": None, "app.py": "def f(x):\n    return x\n"},
              message="Drop new.py, revert app.py")
    pr = await client.get_pull("octo", "app", 1)
    got = await prepare_review(client, pr, ReviewSettings(), first, HISTORY)
    assert got.kind == "push" and got.note == ""
    assert "diff --git a/new.py b/new.py\ndeleted file" in got.diff
    assert "-    return x + 1\n+    return x\n" in got.diff and "other.py" not in got.diff


async def test_a_force_push_names_the_files_the_pr_no_longer_changes(sandbox, client):
    st = small_repo(sandbox)
    st.commit("octo/app", "feature-1", {"new.py": "n = 1\n"})
    first = st.pull("octo/app", 1).head_sha
    st.commit("octo/app", "main", {"other.py": "from someone else\n"})
    main = st.repo("octo/app").branches["main"]
    st.commit("octo/app", "feature-1", {"app.py": "def f(x):\n    return x + 2\n"}, onto=main)
    st.pull("octo/app", 1).base_sha = main
    pr = await client.get_pull("octo", "app", 1)
    got = await prepare_review(client, pr, ReviewSettings(), first, HISTORY)
    assert got.kind == "force_push" and "+    return x + 2" in got.diff
    assert got.note.endswith("No longer changed by the PR (deleted or back to the base's "
                             "content): new.py.")
    assert "other.py" not in got.diff + got.note  # the rebase brought it from the base


async def test_a_new_base_branch_gives_the_whole_diff_against_it(sandbox, client):
    # /review after the PR was retargeted: the head is the same but the PR's diff is another.
    st = small_repo(sandbox)
    head = st.pull("octo/app", 1).head_sha
    told = [HISTORY[0] + "\n\n<pull_request>\nrepository: octo/app\nnumber: 1\ntitle: PR 1\n"
            "author: alice\nurl: u\nbase branch: main\nhead branch: feature-1\n"
            "</pull_request>"]
    pr = await client.get_pull("octo", "app", 1)
    assert (await prepare_review(client, pr, ReviewSettings(), head, told)).kind == "unchanged"
    st.commit("octo/app", "release", {"README.md": "release\n"}, from_branch="main")
    st.change_base("octo/app", 1, "release")
    pr = await client.get_pull("octo", "app", 1)
    got = await prepare_review(client, pr, ReviewSettings(), head, told)
    assert got.kind == "base_changed" and "+++ b/app.py" in got.diff


async def test_preparing_the_same_push_again_is_all_conditional_hits(sandbox, client):
    # A retried turn prepares the same material: reviews, files and the comparison are all
    # conditional requests, so the retry costs no rate limit.
    st = small_repo(sandbox)
    first = st.pull("octo/app", 1).head_sha
    st.commit("octo/app", "feature-1", {"lib.py": "x = 1\n"})
    pr = await client.get_pull("octo", "app", 1)
    one = await prepare_review(client, pr, ReviewSettings(), first, HISTORY)
    requests, hits = client.counters.requests, client.counters.not_modified
    again = await prepare_review(client, pr, ReviewSettings(), first, HISTORY)
    assert again.diff == one.diff and "+++ b/lib.py" in again.diff
    assert client.counters.requests - requests == 3
    assert client.counters.not_modified - hits == 3


async def test_the_reviewed_heads_files_unavailable_still_gives_the_interdiff(sandbox, client):
    first = merge_main_into_the_pr(sandbox)
    pr = await client.get_pull("octo", "app", 1)
    sandbox.inject_error(404, times=1, path_contains=f"/compare/{pr.base.sha}")
    got = await prepare_review(client, pr, ReviewSettings(), first, HISTORY)
    assert got.kind == "push" and "+++ b/app.py" in got.diff and "other.py" not in got.diff
