"""REST endpoints of the sandbox GitHub: what our client and github-mcp-server 0.12.1 call."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from ..github.diff import CommentableLines
from ..github.suggestions import SuggestionError, suggestions
from . import sandbox_git
from .sandbox_payloads import Payloads
from .sandbox_state import Review, SandboxState


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json; charset=utf-8"


@dataclass
class Ctx:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any
    login: str
    url_base: str  # scheme://host[:port] + the prefix the request used ("/api/v3" or "")


REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


def suggestion_error(comment: dict[str, Any], lines: CommentableLines) -> str | None:
    """Like GitHub: a comment's ```suggestion must replace RIGHT-side lines inside one hunk
    (one bad comment fails the whole review)."""
    try:
        found = suggestions(str(comment.get("body") or ""))
    except SuggestionError:
        return None   # GitHub renders an unclosed block as text; the guard refuses it earlier
    if not found:
        return None
    line = comment.get("line")
    start = comment.get("start_line") or line
    if line is None or comment.get("side", "RIGHT") != "RIGHT" or \
            comment.get("start_side", "RIGHT") not in (None, "RIGHT"):
        return "Suggestions can only be made on the RIGHT side of a line comment"
    if lines.right_hunk(start, line) is None:
        return "Suggestion range must be within a single diff hunk"
    return None


def not_found() -> Reply:
    return Reply(404, {"message": "Not Found",
                       "documentation_url": "https://docs.github.com/rest"})


def unprocessable(message: str, errors: list[str] | None = None) -> Reply:
    return Reply(422, {"message": message, "errors": errors or [],
                       "documentation_url": "https://docs.github.com/rest"})


Handler = Callable[..., Reply]
O_R = r"(?P<owner>[^/]+)/(?P<repo>[^/]+)"


class RestRoutes:
    def __init__(self, state: SandboxState, payloads: Payloads):
        self.state, self.p = state, payloads
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = []
        add = self._add
        add("GET", r"/user", self.get_user)
        add("GET", r"/user/repos", self.user_repos)
        add("GET", r"/installation/repositories", self.installation_repos)
        add("GET", rf"/repos/{O_R}", self.get_repo)
        add("GET", rf"/repos/{O_R}/collaborators/(?P<login>[^/]+)/permission",
            self.collaborator_permission)
        add("GET", rf"/repos/{O_R}/pulls", self.list_pulls)
        add("GET", rf"/repos/{O_R}/pulls/comments", self.repo_review_comments)
        add("GET", rf"/repos/{O_R}/pulls/(?P<n>\d+)", self.get_pull)
        add("GET", rf"/repos/{O_R}/pulls/(?P<n>\d+)/files", self.pull_files)
        add("GET", rf"/repos/{O_R}/pulls/(?P<n>\d+)/comments", self.pull_review_comments)
        add("POST", rf"/repos/{O_R}/pulls/(?P<n>\d+)/comments/(?P<cid>\d+)/replies", self.reply)
        add("POST", rf"/repos/{O_R}/(?P<kind>issues|pulls)/comments/(?P<cid>\d+)/reactions",
            self.add_reaction)
        add("GET", rf"/repos/{O_R}/(?P<kind>issues|pulls)/comments/(?P<cid>\d+)/reactions",
            self.list_reactions)
        add("GET", rf"/repos/{O_R}/pulls/(?P<n>\d+)/reviews", self.list_reviews)
        add("POST", rf"/repos/{O_R}/pulls/(?P<n>\d+)/reviews", self.create_review)
        add("POST", rf"/repos/{O_R}/pulls/(?P<n>\d+)/reviews/(?P<rid>\d+)/events",
            self.submit_review)
        add("DELETE", rf"/repos/{O_R}/pulls/(?P<n>\d+)/reviews/(?P<rid>\d+)", self.delete_review)
        add("PUT", rf"/repos/{O_R}/pulls/(?P<n>\d+)/merge", self.merge)
        add("GET", rf"/repos/{O_R}/issues/comments", self.repo_issue_comments)
        add("GET", rf"/repos/{O_R}/issues/(?P<n>\d+)/comments", self.list_issue_comments)
        add("POST", rf"/repos/{O_R}/issues/(?P<n>\d+)/comments", self.post_issue_comment)
        add("PATCH", rf"/repos/{O_R}/issues/comments/(?P<cid>\d+)", self.edit_issue_comment)
        add("GET", rf"/repos/{O_R}/contents(?:/(?P<path>.*))?", self.contents)
        add("GET", rf"/repos/{O_R}/git/ref/(?P<ref>.+)", self.git_ref)
        add("GET", rf"/repos/{O_R}/compare/(?P<basehead>.+)", self.compare)
        add("GET", rf"/repos/{O_R}/commits/(?P<ref>[^/]+)/status", self.commit_status)
        add("GET", rf"/repos/{O_R}/commits/(?P<ref>[^/]+)/check-runs", self.check_runs)
        add("GET", rf"/raw/{O_R}/(?P<ref>[^/]+)/(?P<path>.+)", self.raw)

    def _add(self, method: str, pattern: str, handler: Handler) -> None:
        self.routes.append((method, re.compile(f"^{pattern}/?$"), handler))

    def dispatch(self, ctx: Ctx) -> Reply:
        for method, rx, handler in self.routes:
            m = rx.match(ctx.path)
            if m and method == ctx.method:
                try:
                    with self.state.lock:
                        return handler(ctx, **{k: v for k, v in m.groupdict().items()})
                except KeyError:
                    return not_found()
        return not_found()

    # -- helpers --------------------------------------------------------------------------

    def _page(self, ctx: Ctx, items: list[Any],
              render: Callable[[Any], Any] | None = None) -> Reply:
        """One page of ``items``; ``render`` (optional) builds the payload of just that page's
        items, so a page of a 10,000-item list costs a page, not the whole list (the
        listing of every open PR would otherwise cost the square of their number)."""
        try:
            per_page = max(1, min(100, int(ctx.query.get("per_page", 30))))
            page = max(1, int(ctx.query.get("page", 1)))
        except ValueError:
            return unprocessable("Invalid pagination")
        chunk = items[(page - 1) * per_page: page * per_page]
        if render is not None:
            chunk = [render(item) for item in chunk]
        headers = {}
        if page * per_page < len(items):
            query = {**ctx.query, "page": str(page + 1), "per_page": str(per_page)}
            headers["link"] = f'<{ctx.url_base}{ctx.path}?{urlencode(query)}>; rel="next"'
        return Reply(200, chunk, headers)

    def _pr(self, owner: str, repo: str, n: str):
        return self.state.pull(f"{owner}/{repo}", int(n))

    def _since(self, ctx: Ctx) -> datetime | None:
        raw = ctx.query.get("since")
        return datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None

    def _visible(self, comment) -> bool:
        if comment.review_id is None:
            return True
        review = next((r for r in self.state.reviews if r.id == comment.review_id), None)
        return review is not None and review.state != "PENDING"

    def _feed(self, ctx: Ctx, items: list[Any]) -> list[Any]:
        since = self._since(ctx)
        if since:
            items = [c for c in items if c.updated_at >= since]
        key = "created_at" if ctx.query.get("sort") == "created" else "updated_at"
        items = sorted(items, key=lambda c: (getattr(c, key), c.id),
                       reverse=ctx.query.get("direction") == "desc")
        return items

    # -- users and repositories -------------------------------------------------------------

    def get_user(self, ctx: Ctx) -> Reply:
        return Reply(200, self.p.user(ctx.login))

    def user_repos(self, ctx: Ctx) -> Reply:
        return self._page(ctx, [self.p.repo(r) for r in self.state.repos.values()])

    def installation_repos(self, ctx: Ctx) -> Reply:
        scope = self.state.installation_repos.get(ctx.login)
        repos = [self.p.repo(r) for key, r in sorted(self.state.repos.items())
                 if scope is None or key in scope]
        page = self._page(ctx, repos)
        return Reply(200, {"total_count": len(repos), "repositories": page.body}, page.headers)

    def get_repo(self, ctx: Ctx, owner: str, repo: str) -> Reply:
        return Reply(200, self.p.repo(self.state.repo(f"{owner}/{repo}")))

    def collaborator_permission(self, ctx: Ctx, owner: str, repo: str, login: str) -> Reply:
        """Like GitHub: the legacy base role in ``permission`` (maintain reads as write,
        triage as read) and the role itself in ``role_name``; 404 for an unknown user or
        repository; 403 when the repository forbids it (``permissions_forbidden``)."""
        full = self.state.repo(f"{owner}/{repo}")
        if full.permissions_forbidden:
            return Reply(403, {"message": "Must have push access to view repository "
                                          "collaborators.",
                               "documentation_url": "https://docs.github.com/rest"})
        user = self.state.users.get(login.lower())
        if user is None:
            return not_found()
        role = self.state.permission(full.full_name, user.login)
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)
        flags = {"pull": role != "none", "triage": role in ("triage", "write", "maintain",
                                                            "admin"),
                 "push": role in ("write", "maintain", "admin"),
                 "maintain": role in ("maintain", "admin"), "admin": role == "admin"}
        return Reply(200, {"permission": legacy, "role_name": role,
                           "user": {**self.p.user(user.login), "permissions": flags,
                                    "role_name": role}})

    # -- pulls --------------------------------------------------------------------------------

    def list_pulls(self, ctx: Ctx, owner: str, repo: str) -> Reply:
        full = self.state.repo(f"{owner}/{repo}").full_name
        want = ctx.query.get("state", "open")
        # GitHub: sort=created (default) | updated; direction defaults to desc for created and
        # asc otherwise; ties (same second) keep a stable order.
        sort = ctx.query.get("sort", "created")
        default = "desc" if sort == "created" else "asc"
        key = ((lambda p: (p.updated_at, p.number)) if sort == "updated"
               else (lambda p: p.number))
        pulls = sorted((p for (r, _), p in self.state.pulls.items() if r == full.lower()
                        and (want == "all" or p.state == want)), key=key,
                       reverse=ctx.query.get("direction", default) == "desc")
        return self._page(ctx, pulls, lambda p: self.p.pull(p, full=False))

    def get_pull(self, ctx: Ctx, owner: str, repo: str, n: str) -> Reply:
        pr = self._pr(owner, repo, n)
        if "diff" in ctx.headers.get("accept", ""):
            return Reply(200, self.full_diff(pr.repo, pr.number),
                         content_type="text/plain; charset=utf-8")
        return Reply(200, self.p.pull(pr, full=True))

    def full_diff(self, full: str, number: int) -> str:
        parts = []
        for f in self.state.diff(full, number):
            old = f.previous_filename or f.filename
            head = [f"diff --git a/{old} b/{f.filename}"]
            if f.status == "added":
                head += ["new file mode 100644", "--- /dev/null", f"+++ b/{f.filename}"]
            elif f.status == "removed":
                head += ["deleted file mode 100644", f"--- a/{old}", "+++ /dev/null"]
            else:
                if f.status == "renamed":
                    head += [f"rename from {old}", f"rename to {f.filename}"]
                head += [f"--- a/{old}", f"+++ b/{f.filename}"]
            parts.append("\n".join(head + ([f.patch] if f.patch else [])))
        return "\n".join(parts) + "\n"

    def pull_files(self, ctx: Ctx, owner: str, repo: str, n: str) -> Reply:
        pr = self._pr(owner, repo, n)
        return self._page(ctx, [self.p.file(pr, f) for f in self.state.diff(pr.repo, pr.number)])

    def merge(self, ctx: Ctx, owner: str, repo: str, n: str) -> Reply:
        pr = self._pr(owner, repo, n)
        self.state.close_pull(pr.repo, pr.number, merged=True)
        return Reply(200, {"merged": True, "message": "Pull Request successfully merged",
                           "sha": pr.head_sha})

    # -- comments -----------------------------------------------------------------------------

    def repo_issue_comments(self, ctx: Ctx, owner: str, repo: str) -> Reply:
        full = self.state.repo(f"{owner}/{repo}").full_name.lower()
        items = self._feed(ctx, [c for c in self.state.issue_comments if c.repo.lower() == full])
        return self._page(ctx, [self.p.issue_comment(c) for c in items])

    def list_issue_comments(self, ctx: Ctx, owner: str, repo: str, n: str) -> Reply:
        pr = self._pr(owner, repo, n)
        items = self._feed(ctx, self.state.issue_comments_of(pr.repo, pr.number))
        return self._page(ctx, [self.p.issue_comment(c) for c in items])

    def post_issue_comment(self, ctx: Ctx, owner: str, repo: str, n: str) -> Reply:
        pr = self._pr(owner, repo, n)
        body = (ctx.json or {}).get("body")
        if not isinstance(body, str) or not body:
            return unprocessable("Validation Failed", ["body is missing"])
        c = self.state.add_issue_comment(pr.repo, pr.number, ctx.login, body,
                                         self.state.user(ctx.login).type)
        return Reply(201, self.p.issue_comment(c))

    def edit_issue_comment(self, ctx: Ctx, owner: str, repo: str, cid: str) -> Reply:
        """Like GitHub: only the author edits (403 otherwise); updated_at moves."""
        full = f"{owner}/{repo}".lower()
        c = next((c for c in self.state.issue_comments
                  if c.id == int(cid) and c.repo.lower() == full), None)
        if c is None:
            return not_found()
        body = (ctx.json or {}).get("body")
        if not isinstance(body, str) or not body:
            return unprocessable("Validation Failed", ["body is missing"])
        if c.user.lower() != ctx.login.lower():
            return Reply(403, {"message": "Resource not accessible by integration"})
        self.state.edit_issue_comment(c, body)
        return Reply(200, self.p.issue_comment(c))

    def repo_review_comments(self, ctx: Ctx, owner: str, repo: str) -> Reply:
        full = self.state.repo(f"{owner}/{repo}").full_name.lower()
        items = self._feed(ctx, [c for c in self.state.review_comments
                                 if c.repo.lower() == full and self._visible(c)])
        return self._page(ctx, [self.p.review_comment(c) for c in items])

    def pull_review_comments(self, ctx: Ctx, owner: str, repo: str, n: str) -> Reply:
        pr = self._pr(owner, repo, n)
        items = self._feed(ctx, [c for c in self.state.review_comments_of(pr.repo, pr.number)
                                 if self._visible(c)])
        return self._page(ctx, [self.p.review_comment(c) for c in items])

    def reply(self, ctx: Ctx, owner: str, repo: str, n: str, cid: str) -> Reply:
        pr = self._pr(owner, repo, n)
        target = next((c for c in self.state.review_comments_of(pr.repo, pr.number)
                       if c.id == int(cid)), None)
        body = (ctx.json or {}).get("body")
        if target is None:
            return not_found()
        if not isinstance(body, str) or not body:
            return unprocessable("Validation Failed", ["body is missing"])
        root = target.in_reply_to or target.id
        c = self.state.add_review_comment(pr.repo, pr.number, ctx.login, body, path=target.path,
                                          line=target.line, side=target.side or "RIGHT",
                                          in_reply_to=root,
                                          type=self.state.user(ctx.login).type)
        return Reply(201, self.p.review_comment(c))

    # -- reviews ------------------------------------------------------------------------------

    def add_reaction(self, ctx: Ctx, owner: str, repo: str, kind: str, cid: str) -> Reply:
        """Like GitHub: 201 with the reaction when created, 200 when the user already reacted
        with that content (no second reaction), 404 for an unknown comment, 422 for an
        unknown content."""
        content = (ctx.json or {}).get("content")
        if content not in REACTIONS:
            return unprocessable("Validation Failed", [f"content {content!r} is invalid"])
        comments = self.state.issue_comments if kind == "issues" else self.state.review_comments
        full = f"{owner}/{repo}".lower()
        if not any(c.id == int(cid) and c.repo.lower() == full for c in comments):
            return not_found()
        login = self.state.user(ctx.login).login
        had = login in self.state.reactions.get(int(cid), {}).get(content, set())
        self.state.react(int(cid), login, content)
        return Reply(200 if had else 201, {"id": int(cid) * 10 + REACTIONS.index(content),
                                           "content": content,
                                           "user": self.p.user(login),
                                           "created_at": self.state.now().isoformat()})

    def list_reactions(self, ctx: Ctx, owner: str, repo: str, kind: str, cid: str) -> Reply:
        """Like GitHub: every reaction on the comment (who and what), 404 for an unknown
        comment."""
        comments = self.state.issue_comments if kind == "issues" else self.state.review_comments
        full = f"{owner}/{repo}".lower()
        if not any(c.id == int(cid) and c.repo.lower() == full for c in comments):
            return not_found()
        items = [{"id": int(cid) * 10 + REACTIONS.index(content), "content": content,
                  "user": self.p.user(login), "created_at": self.state.now().isoformat()}
                 for content, logins in sorted(self.state.reactions.get(int(cid), {}).items())
                 for login in sorted(logins)]
        return self._page(ctx, items)

    def list_reviews(self, ctx: Ctx, owner: str, repo: str, n: str) -> Reply:
        pr = self._pr(owner, repo, n)
        # Like GitHub: oldest first; a pending review is visible to its author only.
        items = [r for r in self.state.reviews_of(pr.repo, pr.number)
                 if r.state != "PENDING" or r.user.lower() == ctx.login.lower()]
        return self._page(ctx, [self.p.review(r) for r in items])

    def create_review(self, ctx: Ctx, owner: str, repo: str, n: str) -> Reply:
        pr = self._pr(owner, repo, n)
        body = ctx.json or {}
        event = body.get("event")
        if event not in (None, "COMMENT", "APPROVE", "REQUEST_CHANGES"):
            return unprocessable("Validation Failed", [f"invalid event {event}"])
        if any(r.user.lower() == ctx.login.lower() and r.state == "PENDING"
               for r in self.state.reviews_of(pr.repo, pr.number)):
            return unprocessable("Unprocessable Entity",
                                 ["User can only have one pending review per pull request"])
        files = {f.filename: f for f in self.state.diff(pr.repo, pr.number)}
        comments = body.get("comments") or []
        for c in comments:
            path, line, side = c.get("path"), c.get("line"), c.get("side", "RIGHT")
            if path not in files or (line is not None and not files[path].lines.allows(
                    side, line)):
                return unprocessable("Unprocessable Entity",
                                     ["Line could not be resolved"])
            bad = suggestion_error(c, files[path].lines)
            if bad:
                return unprocessable("Unprocessable Entity", [bad])
        review = self.state.start_review(pr.repo, pr.number, self.state.user(ctx.login).login,
                                         body.get("commit_id"), body.get("body") or "")
        for c in comments:
            self.state.add_review_comment(
                pr.repo, pr.number, review.user, c.get("body", ""), path=c["path"],
                line=c.get("line"), side=c.get("side", "RIGHT"), review_id=review.id,
                start_line=c.get("start_line"), start_side=c.get("start_side"),
                subject_type="LINE" if c.get("line") is not None else "FILE")
        if event:
            self.state.submit_review(review, event, body.get("body"))
        return Reply(200, self.p.review(review))

    def _own_review(self, ctx: Ctx, owner: str, repo: str, n: str, rid: str) -> Review | None:
        pr = self._pr(owner, repo, n)
        return next((r for r in self.state.reviews_of(pr.repo, pr.number)
                     if r.id == int(rid) and r.user.lower() == ctx.login.lower()), None)

    def submit_review(self, ctx: Ctx, owner: str, repo: str, n: str, rid: str) -> Reply:
        review = self._own_review(ctx, owner, repo, n, rid)
        if review is None:
            return not_found()
        event = (ctx.json or {}).get("event")
        if review.state != "PENDING" or event not in ("COMMENT", "APPROVE", "REQUEST_CHANGES"):
            return unprocessable("Unprocessable Entity", ["Review is not pending"])
        self.state.submit_review(review, event, (ctx.json or {}).get("body"))
        return Reply(200, self.p.review(review))

    def delete_review(self, ctx: Ctx, owner: str, repo: str, n: str, rid: str) -> Reply:
        review = self._own_review(ctx, owner, repo, n, rid)
        if review is None:
            return not_found()
        if review.state != "PENDING":
            return unprocessable("Unprocessable Entity", ["Can not delete a non-pending review"])
        self.state.reviews.remove(review)
        self.state.review_comments[:] = [c for c in self.state.review_comments
                                         if c.review_id != review.id]
        return Reply(200, self.p.review(review))

    # -- git content --------------------------------------------------------------------------

    def contents(self, ctx: Ctx, owner: str, repo: str, path: str | None) -> Reply:
        full = self.state.repo(f"{owner}/{repo}").full_name
        sha = self.state.resolve(full, ctx.query.get("ref"))
        if sha is None:
            return not_found()
        tree = self.state.commits[sha].tree
        path = (path or "").strip("/")
        if path in tree:
            return Reply(200, self.p.content(full, path, sha, tree[path]))
        prefix = f"{path}/" if path else ""
        entries: dict[str, str] = {}
        for p in tree:
            if p.startswith(prefix):
                rest = p[len(prefix):]
                entries[prefix + rest.split("/")[0]] = "dir" if "/" in rest else "file"
        if not entries:
            return not_found()
        return Reply(200, [self.p.dir_entry(full, p, sha, kind)
                           for p, kind in sorted(entries.items())])

    def raw(self, ctx: Ctx, owner: str, repo: str, ref: str, path: str) -> Reply:
        full = self.state.repo(f"{owner}/{repo}").full_name
        sha = self.state.resolve(full, ref)
        tree = self.state.commits[sha].tree if sha else {}
        if path not in tree:
            return Reply(404, "404: Not Found", content_type="text/plain")
        return Reply(200, tree[path], content_type="text/plain; charset=utf-8")

    def git_ref(self, ctx: Ctx, owner: str, repo: str, ref: str) -> Reply:
        full = self.state.repo(f"{owner}/{repo}").full_name
        sha = self.state.resolve(full, f"refs/{ref}")
        if sha is None:
            return not_found()
        return Reply(200, {"ref": f"refs/{ref}", "node_id": f"REF_{sha[:8]}",
                           "url": f"{self.p.api}/repos/{full}/git/refs/{ref}",
                           "object": {"sha": sha, "type": "commit",
                                      "url": f"{self.p.api}/repos/{full}/git/commits/{sha}"}})

    def compare(self, ctx: Ctx, owner: str, repo: str, basehead: str) -> Reply:
        full = self.state.repo(f"{owner}/{repo}").full_name
        if "..." not in basehead:
            return not_found()
        base_ref, head_ref = basehead.split("...", 1)
        base, head = self.state.resolve(full, base_ref), self.state.resolve(full, head_ref)
        if base is None or head is None:
            return not_found()
        cmp = sandbox_git.compare(self.state, base, head)
        url = f"{self.p.api}/repos/{full}/compare/{basehead}"
        html = f"{self.p.base}/{full}/compare/{basehead}"
        page = self._page(ctx, [self.p.commit(full, sha) for sha in cmp.commits])
        return Reply(200, {
            "url": url, "html_url": html, "permalink_url": html, "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch", "base_commit": self.p.commit(full, base),
            "merge_base_commit": self.p.commit(full, cmp.merge_base), "status": cmp.status,
            "ahead_by": cmp.ahead_by, "behind_by": cmp.behind_by,
            "total_commits": len(cmp.commits), "commits": page.body,
            "files": [self.p.diff_entry(full, head, f) for f in cmp.files]}, page.headers)

    def commit_status(self, ctx: Ctx, owner: str, repo: str, ref: str) -> Reply:
        full = self.state.repo(f"{owner}/{repo}").full_name
        sha = self.state.resolve(full, ref)
        if sha is None:
            return not_found()
        return Reply(200, {"state": "success", "statuses": [], "sha": sha, "total_count": 0,
                           "repository": self.p.repo(self.state.repo(full)),
                           "commit_url": f"{self.p.api}/repos/{full}/commits/{sha}",
                           "url": f"{self.p.api}/repos/{full}/commits/{sha}/status"})

    def check_runs(self, ctx: Ctx, owner: str, repo: str, ref: str) -> Reply:
        if self.state.resolve(f"{owner}/{repo}", ref) is None:
            return not_found()
        return Reply(200, {"total_count": 0, "check_runs": []})
