"""The sandbox answers in GitHub's documented shapes (so code tested on it works on GitHub).

Responses are validated against GitHub's own REST description, published on the npm registry
as @octokit/openapi (fetched once with `npm pack`, cached under ~/.cache).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from openapi_schema_validator import OAS30Validator

from dsh_github_reviewer.testing import SandboxGitHub
from tests.reviewer.npm_kit import cache_dir, npm_files

VERSION = "23.0.2"
DOCS = ["api.github.com.json", "ghes-3.19.json"]
CACHE = cache_dir(f"octokit-openapi-{VERSION}")


def fetch_descriptions() -> Path:
    return npm_files("@octokit/openapi", VERSION, [f"generated/{d}" for d in DOCS], CACHE)


@pytest.fixture(scope="module", params=DOCS)
def components(request):
    return json.loads((fetch_descriptions() / request.param).read_text())["components"]


@pytest.fixture(scope="module")
def responses():
    """One response of every kind the reviewer or github-mcp-server reads."""
    with SandboxGitHub() as sb:
        st = sb.state
        st.create_repo("octo/app", {"app.py": "a\nb\nc\n", "docs/x.md": "x\n"})
        st.fork("octo/app", "mallory")
        st.commit("mallory/app", "f", {"app.py": "a\nB\nc\n", "new.py": "n\n"},
                  renames={"docs/x.md": "docs/y.md"})
        pr = st.open_pull("octo/app", "f", title="t", body=None, author="mallory",
                          head_repo="mallory/app")
        st.set_association("octo/app", "maint", "MEMBER")
        st.set_permission("octo/app", "maint", "maintain")
        st.add_issue_comment("octo/app", 1, "maint", "/bot hi")
        root = st.add_review_comment("octo/app", 1, "maint", "x", path="app.py", line=2)
        st.add_review_comment("octo/app", 1, "maint", "y", path="app.py", line=2,
                              in_reply_to=root.id, start_line=1, start_side="RIGHT")
        st.react(root.id, "maint", "+1")
        review = st.start_review("octo/app", 1, "maint", pr.head_sha)
        st.submit_review(review, "COMMENT", "summary")
        first_head = pr.head_sha
        st.commit("mallory/app", "f", {"logo.png": "\x89PNG\x00"}, message="logo")
        main = st.repo("octo/app").branches["main"]
        st.commit("octo/app", "rewritten", {"app.py": "z\n"}, onto=main)
        token = sb.add_token("bot")
        h = {"Authorization": f"Bearer {token}"}

        def get(path: str):
            r = httpx2.get(sb.api_url + path, headers=h)
            assert r.status_code == 200, (path, r.status_code)
            return r.json()
        yield {
            "pull-request-simple": get("/repos/octo/app/pulls"),
            "pull-request": [get("/repos/octo/app/pulls/1")],
            "issue-comment": get("/repos/octo/app/issues/comments"),
            "pull-request-review-comment": get("/repos/octo/app/pulls/comments"),
            "pull-request-review": get("/repos/octo/app/pulls/1/reviews"),
            "diff-entry": get("/repos/octo/app/pulls/1/files"),
            "content-file": [get("/repos/octo/app/contents/app.py?ref=main")],
            "full-repository": [get("/repos/octo/app"), get("/repos/mallory/app")],
            "git-ref": [get("/repos/octo/app/git/ref/heads/main"),
                        get("/repos/octo/app/git/ref/pull/1/head")],
            "combined-commit-status": [get(f"/repos/octo/app/commits/{pr.head_sha}/status")],
            "commit-comparison": [get(f"/repos/mallory/app/compare/{first_head}...f"),
                                  get(f"/repos/octo/app/compare/{first_head}...rewritten")],
            "repository-collaborator-permission": [
                get(f"/repos/octo/app/collaborators/{login}/permission")
                for login in ("octo", "maint", "mallory")],
        }


@pytest.mark.parametrize("schema", ["pull-request-simple", "pull-request", "issue-comment",
                                    "pull-request-review-comment", "pull-request-review",
                                    "diff-entry", "content-file", "full-repository",
                                    "git-ref", "combined-commit-status",
                                    "commit-comparison", "repository-collaborator-permission"])
def test_sandbox_responses_match_githubs_description(components, responses, schema):
    items = responses[schema]
    assert items, f"no {schema} response to check"
    validator = OAS30Validator({"$ref": f"#/components/schemas/{schema}",
                                "components": components})
    problems = [f"{list(e.absolute_path)}: {e.message[:200]}"
                for item in items for e in validator.iter_errors(item)]
    assert problems == []


def test_list_items_lack_size_fields_like_github(responses):
    # GitHub's REST API: only the single-PR object has changed_files/additions/deletions.
    assert "changed_files" not in responses["pull-request-simple"][0]
    assert "changed_files" in responses["pull-request"][0]


def test_comparison_and_reactions_carry_what_the_reviewer_reads(responses):
    ahead, diverged = responses["commit-comparison"]
    assert (ahead["status"], ahead["ahead_by"], ahead["behind_by"]) == ("ahead", 1, 0)
    assert [c["commit"]["message"] for c in ahead["commits"]] == ["logo"]
    (logo,) = ahead["files"]
    assert logo["filename"] == "logo.png" and "patch" not in logo  # binary: no patch
    assert diverged["status"] == "diverged"
    root = next(c for c in responses["pull-request-review-comment"] if c["body"] == "x")
    assert root["reactions"]["+1"] == 1 and root["reactions"]["-1"] == 0
