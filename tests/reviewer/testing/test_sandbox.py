"""The sandbox behaves like GitHub where the reviewer depends on it."""

from __future__ import annotations

from dsh_github_reviewer.github.diff import commentable_lines
from tests.reviewer.conftest import BOT_TOKEN, small_repo


def test_diff_statuses_renames_and_lines(sandbox):
    st = sandbox.state
    st.create_repo("o/r", {"a.py": "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "gone.txt": "x\n",
                           "old_name.py": "keep\n"})
    st.commit("o/r", "f", {"a.py": "1\n2\n3\n4\nFIVE\n6\n7\n8\n9\n10\n", "gone.txt": None,
                           "new.py": "n\n"}, renames={"old_name.py": "new_name.py"})
    pr = st.open_pull("o/r", "f", title="t", author="alice")
    files = {f.filename: f for f in st.diff("o/r", pr.number)}
    assert files["a.py"].status == "modified"
    assert files["gone.txt"].status == "removed"
    assert files["new.py"].status == "added"
    assert files["new_name.py"].status == "renamed"
    assert files["new_name.py"].previous_filename == "old_name.py"
    lines = files["a.py"].lines
    assert lines.allows("RIGHT", 5) and lines.allows("LEFT", 5)
    assert lines.allows("RIGHT", 2) and not lines.allows("RIGHT", 1)
    assert lines.ranges("RIGHT") == "2-8"


def test_commentable_lines_parser():
    patch = "@@ -10,3 +10,4 @@\n ctx\n-old\n+new1\n+new2\n ctx2\n\\ No newline at end of file"
    lines = commentable_lines(patch)
    assert lines.right == {10, 11, 12, 13} and lines.left == {10, 11, 12}
    assert lines.nearest("RIGHT", 40) == [11, 12, 13]


def test_push_updates_pr_head_and_forks(sandbox):
    st = sandbox.state
    st.create_repo("o/r")
    st.fork("o/r", "mallory")
    st.commit("mallory/r", "evil", {"x.py": "print(1)\n"})
    pr = st.open_pull("o/r", "evil", title="t", author="mallory", head_repo="mallory/r")
    old = pr.head_sha
    st.commit("mallory/r", "evil", {"x.py": "print(2)\n"})
    assert pr.head_sha != old and st.resolve("o/r", f"refs/pull/{pr.number}/head") == pr.head_sha


async def test_rest_review_rejects_lines_outside_the_diff(client, sandbox):
    import pytest

    from dsh_github_reviewer.github.errors import GitHubError

    st = small_repo(sandbox)
    pr = st.pull("octo/app", 1)
    with pytest.raises(GitHubError, match="Line could not be resolved"):
        await client.create_review("octo", "app", 1, commit_id=pr.head_sha, body="b",
                                   event="COMMENT", comments=[{"path": "app.py", "line": 40,
                                                               "side": "RIGHT", "body": "x"}])
    assert st.reviews_of("octo/app", 1) == []


async def test_pending_reviews_are_private_and_single(client, sandbox):
    import pytest

    from dsh_github_reviewer.github.errors import GitHubError

    st = small_repo(sandbox)
    pr = st.pull("octo/app", 1)
    st.start_review("octo/app", 1, "someone-else", pr.head_sha)
    pending = await client.create_review("octo", "app", 1, commit_id=pr.head_sha, body="",
                                         event=None, comments=[])
    assert pending.state == "PENDING"
    assert [r.id for r in await client.list_reviews("octo", "app", 1)] == [pending.id]
    with pytest.raises(GitHubError, match="one pending review"):
        await client.create_review("octo", "app", 1, commit_id=pr.head_sha, body="",
                                   event=None, comments=[])
    await client.delete_pending_review("octo", "app", 1, pending.id)
    assert await client.list_reviews("octo", "app", 1) == []


async def test_rest_is_served_at_root_and_under_api_v3(sandbox, http):
    small_repo(sandbox)
    headers = {"Authorization": "Bearer " + __import__("tests.reviewer.conftest",
                                                       fromlist=["BOT_TOKEN"]).BOT_TOKEN}
    for base in (sandbox.web_url, sandbox.api_url):
        resp = await http.get(f"{base}/repos/octo/app/pulls/1", headers=headers)
        assert resp.status_code == 200 and resp.json()["number"] == 1
    resp = await http.get(f"{sandbox.api_url}/repos/octo/app/pulls/1")
    assert resp.status_code == 401


TWO_HUNKS_BASE = "".join(f"line {i}\n" for i in range(1, 31))
TWO_HUNKS_HEAD = TWO_HUNKS_BASE.replace("line 2\n", "LINE 2\n").replace("line 28\n", "LINE 28\n")


async def test_rest_review_validates_suggestions_like_github(client, sandbox):
    """A suggestion must replace RIGHT lines inside one hunk; one bad comment fails the whole
    review (422), a good one is stored and applies to the head file."""
    import pytest

    from dsh_github_reviewer.github.errors import GitHubError

    st = sandbox.state
    st.create_repo("octo/big", {"big.py": TWO_HUNKS_BASE})
    st.commit("octo/big", "f", {"big.py": TWO_HUNKS_HEAD})
    pr = st.open_pull("octo/big", "f", title="t", author="alice")
    (diff,) = st.diff("octo/big", pr.number)
    assert diff.lines.right_hunks == [(1, 5), (25, 30)]
    good = {"path": "big.py", "start_line": 2, "start_side": "RIGHT", "line": 3,
            "side": "RIGHT", "body": "fix\n\n```suggestion\nline 2\nline 3\n```"}
    for bad, error in [
            ({**good, "start_line": 3, "line": 26}, "within a single diff hunk"),
            ({**good, "side": "LEFT", "start_side": "LEFT", "line": 2, "start_line": 2},
             "RIGHT side")]:
        with pytest.raises(GitHubError, match=error):
            await client.create_review("octo", "big", pr.number, commit_id=pr.head_sha,
                                       body="b", event="COMMENT", comments=[good, bad])
    assert st.reviews_of("octo/big", pr.number) == []
    review = await client.create_review("octo", "big", pr.number, commit_id=pr.head_sha,
                                        body="b", event="COMMENT", comments=[good])
    (comment,) = st.comments_of_review(review.id)
    assert st.applied_suggestion(comment) == TWO_HUNKS_HEAD.replace("LINE 2\n", "line 2\n")


async def test_a_page_of_the_pr_listing_builds_only_that_pages_payloads(sandbox, http,
                                                                        monkeypatch):
    """Listing every open PR a page at a time cost the square of their number (every page
    built all PRs' payloads): at 10,000 PRs the bot's first tick took ~12 min in the sandbox
    and idle-polling figures were measured during it."""
    st = sandbox.state
    st.create_repo("o/r")
    for i in range(250):
        st.commit("o/r", f"b{i}", {f"f{i}.py": "x\n"})
        st.open_pull("o/r", f"b{i}", title=f"t{i}", author="alice")
    built = []
    real = sandbox.payloads.pull
    monkeypatch.setattr(sandbox.payloads, "pull", lambda p, **kw: (built.append(p.number),
                                                                     real(p, **kw))[1])
    headers = {"Authorization": f"Bearer {BOT_TOKEN}"}
    resp = await http.get(f"{sandbox.api_url}/repos/o/r/pulls", headers=headers,
                          params={"state": "open", "sort": "created", "direction": "asc",
                                  "per_page": 100, "page": 2})
    assert [p["number"] for p in resp.json()] == list(range(101, 201))
    assert sorted(built) == list(range(101, 201)) and 'rel="next"' in resp.headers["link"]
