"""The sandbox GitHub's world: repositories, commits, PRs, comments, reviews — in memory.

Tests set scenarios up through these methods and inspect what the bot posted. The HTTP layer
(``sandbox_http``/``sandbox_graphql``) reads and changes the same state under one lock, since
the server runs on its own thread.
"""

from __future__ import annotations

import difflib
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ..github.diff import CommentableLines, commentable_lines

ROLES = ("admin", "maintain", "write", "triage", "read")


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class User:
    login: str
    id: int
    type: str = "User"


@dataclass
class Commit:
    sha: str
    tree: dict[str, str]
    parent: str | None
    message: str
    renames: dict[str, str] = field(default_factory=dict)  # new path -> old path


@dataclass
class Repo:
    owner: str
    name: str
    id: int
    default_branch: str
    branches: dict[str, str]
    private: bool = False
    associations: dict[str, str] = field(default_factory=dict)
    # login (lower-case) -> admin | maintain | write | triage | read: collaborators' roles
    # (the owner is admin without an entry).
    permissions: dict[str, str] = field(default_factory=dict)
    # The permission endpoint answers 403 (a token that may not read collaborators).
    permissions_forbidden: bool = False
    fork_of: str | None = None
    created_at: datetime = field(default_factory=now_utc)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class Pull:
    repo: str
    number: int
    title: str
    body: str | None
    user: str
    head_repo: str
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str
    created_at: datetime
    updated_at: datetime
    draft: bool = False
    state: str = "open"
    merged: bool = False
    labels: list[str] = field(default_factory=list)


@dataclass
class IssueComment:
    id: int
    repo: str
    number: int
    user: str
    body: str
    created_at: datetime
    updated_at: datetime


@dataclass
class ReviewComment:
    id: int
    repo: str
    number: int
    user: str
    body: str
    path: str
    line: int | None
    side: str | None
    start_line: int | None
    start_side: str | None
    subject_type: str
    commit_id: str
    review_id: int | None
    in_reply_to: int | None
    created_at: datetime
    updated_at: datetime


@dataclass
class Review:
    id: int
    repo: str
    number: int
    user: str
    body: str
    state: str  # PENDING | COMMENTED | APPROVED | CHANGES_REQUESTED | DISMISSED
    commit_id: str
    created_at: datetime
    submitted_at: datetime | None = None


@dataclass
class FileDiff:
    filename: str
    status: str
    previous_filename: str | None
    patch: str
    additions: int
    deletions: int
    old_text: str
    new_text: str

    @property
    def lines(self) -> CommentableLines:
        return commentable_lines(self.patch)


def _patch(old: str, new: str) -> tuple[str, int, int]:
    if "\x00" in old or "\x00" in new:
        return "", 0, 0  # binary: GitHub lists the file without a patch
    old_lines, new_lines = old.splitlines(), new.splitlines()
    body = list(difflib.unified_diff(old_lines, new_lines, n=3, lineterm=""))[2:]
    adds = sum(1 for line in body if line.startswith("+"))
    dels = sum(1 for line in body if line.startswith("-"))
    return "\n".join(body), adds, dels


class SandboxState:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.users: dict[str, User] = {}
        self.tokens: dict[str, str] = {}
        self.repos: dict[str, Repo] = {}
        self.commits: dict[str, Commit] = {}
        self.pulls: dict[tuple[str, int], Pull] = {}
        self.issue_comments: list[IssueComment] = []
        self.review_comments: list[ReviewComment] = []
        self.reviews: list[Review] = []
        # review comment id -> reaction content ("+1", "-1", …) -> logins
        self.reactions: dict[int, dict[str, set[str]]] = {}
        self.resolved_threads: dict[int, str] = {}  # thread's root comment id -> resolver
        # App bot login -> lower-case full names its installation may access (absent = all).
        self.installation_repos: dict[str, list[str]] = {}
        self._ids = 1000
        self.clock_offset = timedelta()
        # Called under the lock after each change: (event, action, objects) — webhooks.
        self.listeners: list[Callable[[str, str, dict[str, object]], None]] = []

    def emit(self, event: str, action: str, **objs: object) -> None:
        for listener in self.listeners:
            listener(event, action, objs)

    # -- basics ---------------------------------------------------------------------------

    def now(self) -> datetime:
        return now_utc() + self.clock_offset

    def advance(self, seconds: float) -> None:
        """Move the sandbox clock forward (timestamps, `since` feeds)."""
        with self.lock:
            self.clock_offset += timedelta(seconds=seconds)

    def next_id(self) -> int:
        with self.lock:
            self._ids += 1
            return self._ids

    def add_user(self, login: str, type: str = "User") -> User:
        with self.lock:
            if login.lower() not in self.users:
                self.users[login.lower()] = User(login, self.next_id(), type)
            return self.users[login.lower()]

    def add_token(self, login: str, token: str, type: str = "User") -> str:
        with self.lock:
            self.add_user(login, type)
            self.tokens[token] = login
            return token

    def user(self, login: str) -> User:
        return self.users.get(login.lower()) or self.add_user(login)

    def repo(self, full_name: str) -> Repo:
        try:
            return self.repos[full_name.lower()]
        except KeyError:
            raise KeyError(f"sandbox has no repository {full_name}") from None

    def association(self, full_name: str, login: str) -> str:
        repo = self.repo(full_name)
        if login.lower() == repo.owner.lower():
            return "OWNER"
        return repo.associations.get(login.lower(), "NONE")

    def set_association(self, full_name: str, login: str, association: str) -> None:
        with self.lock:
            self.add_user(login)
            self.repo(full_name).associations[login.lower()] = association.upper()

    def set_permission(self, full_name: str, login: str, role: str) -> None:
        """Make ``login`` a collaborator with ``role`` (admin, maintain, write, triage, read)."""
        if role not in ROLES:
            raise ValueError(f"unknown repository role {role!r}: one of {', '.join(ROLES)}")
        with self.lock:
            self.add_user(login)
            self.repo(full_name).permissions[login.lower()] = role

    def permission(self, full_name: str, login: str) -> str:
        """``login``'s role on the repository, like GitHub: the owner is admin; anyone else
        without a role can read a public repository and has none on a private one."""
        repo = self.repo(full_name)
        if login.lower() == repo.owner.lower():
            return "admin"
        return repo.permissions.get(login.lower(), "none" if repo.private else "read")

    # -- git --------------------------------------------------------------------------------

    def _commit(self, tree: dict[str, str], parent: str | None, message: str,
                renames: dict[str, str] | None = None) -> str:
        seed = f"{parent}:{message}:{sorted(tree.items())}:{self.next_id()}"
        sha = hashlib.sha1(seed.encode()).hexdigest()
        self.commits[sha] = Commit(sha, dict(tree), parent, message, dict(renames or {}))
        return sha

    def create_repo(self, full_name: str, files: dict[str, str] | None = None,
                    default_branch: str = "main", private: bool = False) -> Repo:
        owner, name = full_name.split("/")
        with self.lock:
            self.add_user(owner)
            sha = self._commit(files or {"README.md": f"# {name}\n"}, None, "initial commit")
            repo = Repo(owner, name, self.next_id(), default_branch, {default_branch: sha},
                        private)
            self.repos[full_name.lower()] = repo
            return repo

    def fork(self, full_name: str, new_owner: str) -> Repo:
        with self.lock:
            src = self.repo(full_name)
            self.add_user(new_owner)
            repo = Repo(new_owner, src.name, self.next_id(), src.default_branch,
                        dict(src.branches), fork_of=src.full_name)
            self.repos[repo.full_name.lower()] = repo
            return repo

    def commit(self, full_name: str, branch: str, files: dict[str, str | None],
               message: str = "update", renames: dict[str, str] | None = None,
               from_branch: str | None = None, onto: str | None = None) -> str:
        """New commit on ``branch`` (created from ``from_branch`` or the default branch).

        ``files`` maps path -> new text (None deletes); ``renames`` maps old -> new path.
        ``onto`` (a commit SHA) is a force-push: the new commit's parent is ``onto`` and the
        branch's old commits are no longer its ancestors.
        """
        with self.lock:
            repo = self.repo(full_name)
            parent = onto or repo.branches.get(branch) or repo.branches[
                from_branch or repo.default_branch]
            tree = dict(self.commits[parent].tree)
            moved: dict[str, str] = {}
            for old, new in (renames or {}).items():
                tree[new] = tree.pop(old)
                moved[new] = old
            for path, text in files.items():
                if text is None:
                    tree.pop(path, None)
                else:
                    tree[path] = text
            sha = self._commit(tree, parent, message, moved)
            repo.branches[branch] = sha
            for pr in self.pulls.values():
                if pr.state == "open" and pr.head_repo.lower() == full_name.lower() \
                        and pr.head_ref == branch:
                    before = pr.head_sha
                    pr.head_sha, pr.updated_at = sha, self.now()
                    self.emit("pull_request", "synchronize", repo=pr.repo, pull=pr,
                              sender=repo.owner, before=before, after=sha)
            return sha

    def resolve(self, full_name: str, ref: str | None) -> str | None:
        """A commit SHA for a branch, ``refs/heads/x``, ``refs/pull/n/head`` or a SHA."""
        repo = self.repo(full_name)
        if not ref:
            return repo.branches[repo.default_branch]
        if ref in self.commits:
            return ref
        if ref.startswith("refs/heads/"):
            return repo.branches.get(ref[len("refs/heads/"):])
        if ref.startswith("refs/pull/") and ref.endswith("/head"):
            try:
                number = int(ref.split("/")[2])
            except ValueError:
                return None
            pr = self.pulls.get((repo.full_name.lower(), number))
            return pr.head_sha if pr else None
        return repo.branches.get(ref)

    # -- pull requests ----------------------------------------------------------------------

    def open_pull(self, full_name: str, head_ref: str, *, title: str, body: str | None = "",
                  author: str, base_ref: str | None = None, draft: bool = False,
                  head_repo: str | None = None) -> Pull:
        with self.lock:
            repo = self.repo(full_name)
            base_ref = base_ref or repo.default_branch
            head_full = head_repo or repo.full_name
            head_sha = self.repo(head_full).branches[head_ref]
            number = 1 + max([n for (r, n) in self.pulls if r == repo.full_name.lower()],
                             default=0)
            self.add_user(author)
            pr = Pull(repo.full_name, number, title, body, author, self.repo(head_full).full_name,
                      head_ref, head_sha, base_ref, repo.branches[base_ref], self.now(),
                      self.now(), draft=draft)
            self.pulls[(repo.full_name.lower(), number)] = pr
            self.emit("pull_request", "opened", repo=pr.repo, pull=pr, sender=author)
            return pr

    def pull(self, full_name: str, number: int) -> Pull:
        try:
            return self.pulls[(full_name.lower(), number)]
        except KeyError:
            raise KeyError(f"sandbox has no PR {full_name}#{number}") from None

    def close_pull(self, full_name: str, number: int, merged: bool = False) -> None:
        with self.lock:
            pr = self.pull(full_name, number)
            pr.state, pr.merged, pr.updated_at = "closed", merged, self.now()
            self.emit("pull_request", "closed", repo=pr.repo, pull=pr,
                      sender=self.repo(pr.repo).owner)

    def reopen_pull(self, full_name: str, number: int) -> None:
        with self.lock:
            pr = self.pull(full_name, number)
            pr.state, pr.merged, pr.updated_at = "open", False, self.now()
            pr.head_sha = self.repo(pr.head_repo).branches.get(pr.head_ref, pr.head_sha)
            self.emit("pull_request", "reopened", repo=pr.repo, pull=pr, sender=pr.user)

    def change_base(self, full_name: str, number: int, base_ref: str) -> None:
        with self.lock:
            pr = self.pull(full_name, number)
            changes = {"base": {"ref": {"from": pr.base_ref}, "sha": {"from": pr.base_sha}}}
            pr.base_ref, pr.base_sha = base_ref, self.repo(pr.repo).branches[base_ref]
            pr.updated_at = self.now()
            self.emit("pull_request", "edited", repo=pr.repo, pull=pr, sender=pr.user,
                      changes=changes)

    def set_draft(self, full_name: str, number: int, draft: bool) -> None:
        with self.lock:
            pr = self.pull(full_name, number)
            pr.draft, pr.updated_at = draft, self.now()
            self.emit("pull_request", "converted_to_draft" if draft else "ready_for_review",
                      repo=pr.repo, pull=pr, sender=pr.user)

    def diff(self, full_name: str, number: int) -> list[FileDiff]:
        pr = self.pull(full_name, number)
        base = self.commits[pr.base_sha].tree
        head = self.commits[pr.head_sha].tree
        renames: dict[str, str] = {}
        sha: str | None = pr.head_sha
        while sha and sha != pr.base_sha:
            for new, old in self.commits[sha].renames.items():
                renames.setdefault(new, renames.pop(old, old) if old in renames else old)
            sha = self.commits[sha].parent
        out = []
        for path in sorted(set(base) | set(head)):
            if path in head and path in renames and renames[path] in base \
                    and renames[path] not in head:
                old_path = renames[path]
                patch, adds, dels = _patch(base[old_path], head[path])
                out.append(FileDiff(path, "renamed", old_path, patch, adds, dels,
                                    base[old_path], head[path]))
            elif path in head and path not in base:
                patch, adds, dels = _patch("", head[path])
                out.append(FileDiff(path, "added", None, patch, adds, dels, "", head[path]))
            elif path in base and path not in head:
                if path in renames.values():
                    continue
                patch, adds, dels = _patch(base[path], "")
                out.append(FileDiff(path, "removed", None, patch, adds, dels, base[path], ""))
            elif base[path] != head[path]:
                patch, adds, dels = _patch(base[path], head[path])
                out.append(FileDiff(path, "modified", None, patch, adds, dels, base[path],
                                    head[path]))
        return out

    # -- conversation -----------------------------------------------------------------------

    def add_issue_comment(self, full_name: str, number: int, author: str, body: str,
                          type: str = "User") -> IssueComment:
        with self.lock:
            self.add_user(author, type)
            c = IssueComment(self.next_id(), self.repo(full_name).full_name, number, author, body,
                             self.now(), self.now())
            self.issue_comments.append(c)
            self.emit("issue_comment", "created", repo=c.repo, comment=c, sender=author)
            return c

    def edit_issue_comment(self, c: IssueComment, body: str) -> None:
        with self.lock:
            # No "edited" delivery: the reviewer acts on created comments only.
            c.body, c.updated_at = body, self.now()

    def add_review_comment(self, full_name: str, number: int, author: str, body: str, *,
                           path: str, line: int | None = None, side: str = "RIGHT",
                           in_reply_to: int | None = None, review_id: int | None = None,
                           start_line: int | None = None, start_side: str | None = None,
                           subject_type: str = "LINE", type: str = "User") -> ReviewComment:
        with self.lock:
            self.add_user(author, type)
            pr = self.pull(full_name, number)
            c = ReviewComment(self.next_id(), pr.repo, number, author, body, path, line, side,
                              start_line, start_side, subject_type, pr.head_sha, review_id,
                              in_reply_to, self.now(), self.now())
            self.review_comments.append(c)
            if review_id is None:  # comments of a review are delivered when it is submitted
                self.emit("pull_request_review_comment", "created", repo=c.repo, comment=c,
                          sender=author)
            return c

    def react(self, comment_id: int, login: str, content: str) -> None:
        """A reaction on a review comment (like GitHub: no change to its updated_at)."""
        with self.lock:
            self.add_user(login)
            self.reactions.setdefault(comment_id, {}).setdefault(content, set()).add(login)

    def resolve_thread(self, root_id: int, login: str) -> None:
        with self.lock:
            self.add_user(login)
            self.resolved_threads[root_id] = login
            self._emit_thread(root_id, "resolved", login)

    def unresolve_thread(self, root_id: int, login: str) -> None:
        with self.lock:
            self.add_user(login)
            self.resolved_threads.pop(root_id, None)
            self._emit_thread(root_id, "unresolved", login)

    def _emit_thread(self, root_id: int, action: str, login: str) -> None:
        thread = [c for c in self.review_comments if c.id == root_id or c.in_reply_to == root_id]
        if thread:
            self.emit("pull_request_review_thread", action, repo=thread[0].repo,
                      comments=thread, sender=login)

    def applied_suggestion(self, comment: ReviewComment) -> str | None:
        """The file as GitHub's "Commit suggestion" would make it: the comment's suggestion
        lines replacing start_line..line of the file at the comment's commit (None: the
        comment has no suggestion)."""
        from ..github.suggestions import suggestions

        found = suggestions(comment.body)
        if not found or comment.line is None:
            return None
        text = self.commits[comment.commit_id].tree[comment.path]
        lines = text.split("\n")
        start = comment.start_line or comment.line
        lines[start - 1:comment.line] = found[0].lines
        return "\n".join(lines)

    def reviews_of(self, full_name: str, number: int) -> list[Review]:
        return [r for r in self.reviews
                if r.repo.lower() == full_name.lower() and r.number == number]

    def comments_of_review(self, review_id: int) -> list[ReviewComment]:
        return [c for c in self.review_comments if c.review_id == review_id]

    def issue_comments_of(self, full_name: str, number: int) -> list[IssueComment]:
        return [c for c in self.issue_comments
                if c.repo.lower() == full_name.lower() and c.number == number]

    def review_comments_of(self, full_name: str, number: int) -> list[ReviewComment]:
        return [c for c in self.review_comments
                if c.repo.lower() == full_name.lower() and c.number == number]

    def start_review(self, full_name: str, number: int, user: str, commit_id: str | None,
                     body: str = "") -> Review:
        with self.lock:
            pr = self.pull(full_name, number)
            r = Review(self.next_id(), pr.repo, number, user, body, "PENDING",
                       commit_id or pr.head_sha, self.now())
            self.reviews.append(r)
            return r

    def submit_review(self, review: Review, event: str, body: str | None) -> None:
        states = {"COMMENT": "COMMENTED", "APPROVE": "APPROVED",
                  "REQUEST_CHANGES": "CHANGES_REQUESTED"}
        with self.lock:
            review.state = states[event]
            if body is not None:
                review.body = body
            review.submitted_at = self.now()
            for c in self.comments_of_review(review.id):
                c.created_at = c.updated_at = review.submitted_at
                self.emit("pull_request_review_comment", "created", repo=c.repo, comment=c,
                          sender=review.user)
