"""JSON payloads in GitHub's REST shapes (``pull-request``, ``issue-comment``, …)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .sandbox_state import FileDiff, IssueComment, Pull, Repo, Review, ReviewComment, SandboxState

REPO_URLS = {
    "archive": "{archive_format}{/ref}", "assignees": "assignees{/user}",
    "blobs": "git/blobs{/sha}", "branches": "branches{/branch}",
    "collaborators": "collaborators{/collaborator}", "comments": "comments{/number}",
    "commits": "commits{/sha}", "compare": "compare/{base}...{head}",
    "contents": "contents/{+path}", "contributors": "contributors",
    "deployments": "deployments", "downloads": "downloads", "events": "events",
    "forks": "forks", "git_commits": "git/commits{/sha}", "git_refs": "git/refs{/sha}",
    "git_tags": "git/tags{/sha}", "hooks": "hooks", "issue_comment": "issues/comments{/number}",
    "issue_events": "issues/events{/number}", "issues": "issues{/number}",
    "keys": "keys{/key_id}", "labels": "labels{/name}", "languages": "languages",
    "merges": "merges", "milestones": "milestones{/number}",
    "notifications": "notifications{?since,all,participating}", "pulls": "pulls{/number}",
    "releases": "releases{/id}", "stargazers": "stargazers", "statuses": "statuses/{sha}",
    "subscribers": "subscribers", "subscription": "subscription", "tags": "tags",
    "teams": "teams", "trees": "git/trees{/sha}",
}


def ts(when: datetime | None) -> str | None:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else None


class Payloads:
    def __init__(self, state: SandboxState, base: Callable[[], str]):
        self.state = state
        self._base = base  # e.g. http://127.0.0.7, known once the server is bound

    @property
    def base(self) -> str:
        return self._base().rstrip("/")

    @property
    def api(self) -> str:
        return f"{self.base}/api/v3"

    def user(self, login: str) -> dict[str, Any]:
        u = self.state.user(login)
        url = f"{self.api}/users/{u.login}"
        return {"login": u.login, "id": u.id, "node_id": f"U_{u.id}", "type": u.type,
                "site_admin": False, "url": url, "html_url": f"{self.base}/{u.login}",
                "avatar_url": f"{self.base}/avatars/{u.login}", "gravatar_id": "",
                "events_url": f"{url}/events{{/privacy}}", "followers_url": f"{url}/followers",
                "following_url": f"{url}/following{{/other_user}}",
                "gists_url": f"{url}/gists{{/gist_id}}", "organizations_url": f"{url}/orgs",
                "received_events_url": f"{url}/received_events", "repos_url": f"{url}/repos",
                "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
                "subscriptions_url": f"{url}/subscriptions"}

    def repo(self, repo: Repo) -> dict[str, Any]:
        url = f"{self.api}/repos/{repo.full_name}"
        created = ts(repo.created_at)  # stable: ETags must not change while nothing does
        data: dict[str, Any] = {
            "id": repo.id, "node_id": f"R_{repo.id}", "name": repo.name,
            "full_name": repo.full_name, "private": repo.private,
            "owner": self.user(repo.owner), "html_url": f"{self.base}/{repo.full_name}",
            "url": url, "fork": repo.fork_of is not None, "description": None,
            "default_branch": repo.default_branch,
            "visibility": "private" if repo.private else "public",
            "clone_url": f"{self.base}/{repo.full_name}.git",
            "git_url": f"git://{self.base.split('://')[1]}/{repo.full_name}.git",
            "ssh_url": f"git@{self.base.split('://')[1]}:{repo.full_name}.git",
            "svn_url": f"{self.base}/{repo.full_name}", "mirror_url": None, "homepage": None,
            "language": None, "license": None, "archived": False, "disabled": False,
            "has_issues": True, "has_projects": False, "has_wiki": False, "has_pages": False,
            "has_downloads": True, "has_discussions": False, "size": 0, "forks": 0,
            "forks_count": 0, "open_issues": 0, "open_issues_count": 0, "stargazers_count": 0,
            "watchers": 0, "watchers_count": 0, "network_count": 0, "subscribers_count": 0,
            "created_at": created, "updated_at": created, "pushed_at": created}
        # The hypermedia URL templates GitHub includes in every repository object.
        for name, suffix in REPO_URLS.items():
            data[f"{name}_url"] = f"{url}/{suffix}"
        return data

    def ref(self, full_name: str, ref: str, sha: str) -> dict[str, Any]:
        repo = self.state.repo(full_name)
        return {"label": f"{repo.owner}:{ref}", "ref": ref, "sha": sha,
                "user": self.user(repo.owner), "repo": self.repo(repo)}

    def pull(self, pr: Pull, full: bool) -> dict[str, Any]:
        url = f"{self.api}/repos/{pr.repo}/pulls/{pr.number}"
        html = f"{self.base}/{pr.repo}/pull/{pr.number}"
        data: dict[str, Any] = {
            "url": url, "id": hash((pr.repo, pr.number)) & 0x7FFFFFFF,
            "node_id": f"PR_{self.state.repo(pr.repo).id}_{pr.number}", "html_url": html,
            "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
            "issue_url": f"{self.api}/repos/{pr.repo}/issues/{pr.number}",
            "number": pr.number, "state": pr.state, "locked": False, "title": pr.title,
            "user": self.user(pr.user), "body": pr.body, "labels": [
                {"id": 9000 + i, "node_id": f"LA_{9000 + i}", "name": name,
                 "url": f"{self.api}/repos/{pr.repo}/labels/{name}", "description": None,
                 "color": "ededed", "default": False} for i, name in enumerate(pr.labels)],
            "milestone": None,
            "created_at": ts(pr.created_at), "updated_at": ts(pr.updated_at),
            "closed_at": ts(pr.updated_at) if pr.state == "closed" else None,
            "merged_at": ts(pr.updated_at) if pr.merged else None,
            "merge_commit_sha": None, "assignee": None, "assignees": [],
            "requested_reviewers": [], "requested_teams": [], "draft": pr.draft,
            "head": self.ref(pr.head_repo, pr.head_ref, pr.head_sha),
            "base": self.ref(pr.repo, pr.base_ref, pr.base_sha),
            "author_association": self.state.association(pr.repo, pr.user),
            "auto_merge": None, "active_lock_reason": None,
            "commits_url": f"{url}/commits", "review_comments_url": f"{url}/comments",
            "review_comment_url": f"{self.api}/repos/{pr.repo}/pulls/comments{{/number}}",
            "comments_url": f"{self.api}/repos/{pr.repo}/issues/{pr.number}/comments",
            "statuses_url": f"{self.api}/repos/{pr.repo}/statuses/{pr.head_sha}",
            "_links": {k: {"href": v} for k, v in {
                "self": url, "html": html,
                "issue": f"{self.api}/repos/{pr.repo}/issues/{pr.number}",
                "comments": f"{self.api}/repos/{pr.repo}/issues/{pr.number}/comments",
                "review_comments": f"{url}/comments",
                "review_comment": f"{self.api}/repos/{pr.repo}/pulls/comments{{/number}}",
                "commits": f"{url}/commits",
                "statuses": f"{self.api}/repos/{pr.repo}/statuses/{pr.head_sha}"}.items()},
        }
        if full:
            files = self.state.diff(pr.repo, pr.number)
            data.update({
                "merged": pr.merged, "mergeable": True, "rebaseable": True,
                "mergeable_state": "clean", "merged_by": None, "comments": len(
                    self.state.issue_comments_of(pr.repo, pr.number)),
                "review_comments": len(self.state.review_comments_of(pr.repo, pr.number)),
                "maintainer_can_modify": False, "commits": 1,
                "additions": sum(f.additions for f in files),
                "deletions": sum(f.deletions for f in files), "changed_files": len(files)})
        return data

    def file(self, pr: Pull, f: FileDiff) -> dict[str, Any]:
        return self.diff_entry(pr.repo, pr.head_sha, f)

    def diff_entry(self, full_name: str, head_sha: str, f: FileDiff) -> dict[str, Any]:
        sha = hashlib.sha1(f.new_text.encode()).hexdigest()
        data = {"sha": sha, "filename": f.filename, "status": f.status,
                "additions": f.additions, "deletions": f.deletions,
                "changes": f.additions + f.deletions,
                "blob_url": f"{self.base}/{full_name}/blob/{head_sha}/{f.filename}",
                "raw_url": f"{self.base}/{full_name}/raw/{head_sha}/{f.filename}",
                "contents_url": f"{self.api}/repos/{full_name}/contents/{f.filename}"
                                f"?ref={head_sha}"}
        if f.patch:  # like GitHub: no patch for binary files
            data["patch"] = f.patch
        if f.previous_filename:
            data["previous_filename"] = f.previous_filename
        return data

    def commit(self, full_name: str, sha: str) -> dict[str, Any]:
        c = self.state.commits[sha]
        url = f"{self.api}/repos/{full_name}/commits/{sha}"
        tree = hashlib.sha1(repr(sorted(c.tree.items())).encode()).hexdigest()
        person = {"name": "sandbox", "email": "sandbox@example.invalid",
                  "date": "2026-01-01T00:00:00Z"}
        return {"url": url, "sha": sha, "node_id": f"C_{sha[:12]}",
                "html_url": f"{self.base}/{full_name}/commit/{sha}",
                "comments_url": f"{url}/comments",
                "commit": {"url": f"{self.api}/repos/{full_name}/git/commits/{sha}",
                           "author": person, "committer": person, "message": c.message,
                           "comment_count": 0,
                           "tree": {"sha": tree,
                                    "url": f"{self.api}/repos/{full_name}/git/trees/{tree}"}},
                "author": {}, "committer": {},  # no GitHub account linked
                "parents": [{"sha": c.parent,
                             "url": f"{self.api}/repos/{full_name}/commits/{c.parent}",
                             "html_url": f"{self.base}/{full_name}/commit/{c.parent}"}]
                if c.parent else []}

    def reactions(self, url: str, comment_id: int) -> dict[str, Any]:
        counts = {k: len(v) for k, v in self.state.reactions.get(comment_id, {}).items()}
        data: dict[str, Any] = {"url": f"{url}/reactions", "total_count": sum(counts.values())}
        for key in ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket"):
            data[key] = counts.get(key, 0)
        return data

    def issue_comment(self, c: IssueComment) -> dict[str, Any]:
        return {"id": c.id, "node_id": f"IC_{c.id}",
                "url": f"{self.api}/repos/{c.repo}/issues/comments/{c.id}",
                "html_url": f"{self.base}/{c.repo}/pull/{c.number}#issuecomment-{c.id}",
                "issue_url": f"{self.api}/repos/{c.repo}/issues/{c.number}",
                "body": c.body, "user": self.user(c.user),
                "created_at": ts(c.created_at), "updated_at": ts(c.updated_at),
                "author_association": self.state.association(c.repo, c.user)}

    def review_comment(self, c: ReviewComment) -> dict[str, Any]:
        url = f"{self.api}/repos/{c.repo}/pulls/comments/{c.id}"
        html = f"{self.base}/{c.repo}/pull/{c.number}#discussion_r{c.id}"
        pr_url = f"{self.api}/repos/{c.repo}/pulls/{c.number}"
        data = {"id": c.id, "node_id": f"PRRC_{c.id}", "url": url,
                "pull_request_review_id": c.review_id, "diff_hunk": "", "path": c.path,
                "position": c.line, "original_position": c.line, "commit_id": c.commit_id,
                "original_commit_id": c.commit_id,
                "user": self.user(c.user), "body": c.body,
                "created_at": ts(c.created_at), "updated_at": ts(c.updated_at),
                "html_url": html, "pull_request_url": pr_url,
                "author_association": self.state.association(c.repo, c.user),
                "line": c.line, "original_line": c.line, "side": c.side,
                "subject_type": c.subject_type.lower(),
                "reactions": self.reactions(url, c.id),
                "_links": {"self": {"href": url}, "html": {"href": html},
                           "pull_request": {"href": pr_url}}}
        # Like GitHub, optional fields that do not apply are left out rather than null.
        for key, value in (("in_reply_to_id", c.in_reply_to), ("start_line", c.start_line),
                           ("original_start_line", c.start_line),
                           ("start_side", c.start_side)):
            if value is not None:
                data[key] = value
        return data

    def review(self, r: Review) -> dict[str, Any]:
        html = f"{self.base}/{r.repo}/pull/{r.number}#pullrequestreview-{r.id}"
        pr_url = f"{self.api}/repos/{r.repo}/pulls/{r.number}"
        data = {"id": r.id, "node_id": f"PRR_{r.id}", "user": self.user(r.user),
                "body": r.body, "state": r.state, "commit_id": r.commit_id,
                "html_url": html, "pull_request_url": pr_url,
                "author_association": self.state.association(r.repo, r.user),
                "_links": {"html": {"href": html}, "pull_request": {"href": pr_url}}}
        if r.submitted_at:
            data["submitted_at"] = ts(r.submitted_at)
        return data

    def content(self, full_name: str, path: str, sha: str, text: str) -> dict[str, Any]:
        encoded = base64.encodebytes(text.encode()).decode()
        blob = hashlib.sha1(text.encode()).hexdigest()
        url = f"{self.api}/repos/{full_name}/contents/{path}?ref={sha}"
        return {"type": "file", "encoding": "base64", "size": len(text.encode()),
                "name": path.rsplit("/", 1)[-1], "path": path, "content": encoded, "sha": blob,
                "url": url, "git_url": f"{self.api}/repos/{full_name}/git/blobs/{blob}",
                "html_url": f"{self.base}/{full_name}/blob/{sha}/{path}",
                "download_url": f"{self.base}/raw/{full_name}/{sha}/{path}",
                "_links": {"self": url, "git": f"{self.api}/repos/{full_name}/git/blobs/{blob}",
                           "html": f"{self.base}/{full_name}/blob/{sha}/{path}"}}

    def dir_entry(self, full_name: str, path: str, sha: str, kind: str) -> dict[str, Any]:
        return {"type": kind, "name": path.rsplit("/", 1)[-1], "path": path,
                "sha": sha, "size": 0,
                "url": f"{self.api}/repos/{full_name}/contents/{path}?ref={sha}",
                "html_url": f"{self.base}/{full_name}/tree/{sha}/{path}",
                "git_url": None, "download_url": None}
