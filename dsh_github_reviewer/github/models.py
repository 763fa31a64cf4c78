"""The parts of GitHub's REST payloads the reviewer relies on, validated at the boundary.

Unknown fields are ignored (GitHub adds fields over time); a missing or mistyped field we rely
on is an error naming the payload, never a silent default.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class User(Payload):
    login: str
    type: str = "User"

    @property
    def is_bot(self) -> bool:
        return self.type == "Bot"


class Owner(Payload):
    login: str


class Repo(Payload):
    name: str
    full_name: str
    owner: Owner
    default_branch: str | None = None
    private: bool = False


class Ref(Payload):
    ref: str
    sha: str
    repo: Repo | None = None  # null when a fork was deleted


class PullSummary(Payload):
    """An item of ``GET /repos/{o}/{r}/pulls`` (GitHub's ``pull-request-simple``)."""

    number: int
    title: str
    body: str | None = None
    user: User
    state: str
    draft: bool = False
    html_url: str
    head: Ref
    base: Ref
    updated_at: datetime
    author_association: str = "NONE"
    merged_at: datetime | None = None  # closed by a merge (the web UI says "merged")


class Label(Payload):
    name: str


class PullRequest(PullSummary):
    """``GET /repos/{o}/{r}/pulls/{n}`` (``pull-request``): has the size fields."""

    labels: list[Label] = Field(default_factory=list)
    changed_files: int = 0
    additions: int = 0
    deletions: int = 0


class Comment(Payload):
    id: int
    body: str | None = None
    user: User
    author_association: str = "NONE"
    created_at: datetime
    updated_at: datetime
    html_url: str = ""

    @staticmethod
    def _number_of(url: str) -> int:
        return int(url.rstrip("/").rsplit("/", 1)[1])


class IssueComment(Comment):
    issue_url: str

    @property
    def number(self) -> int:
        return self._number_of(self.issue_url)


class Reactions(Payload):
    """The reaction counts GitHub embeds in a comment (no extra request to read them)."""

    plus_one: int = Field(default=0, alias="+1")
    minus_one: int = Field(default=0, alias="-1")


class Reaction(Payload):
    """One reaction on a comment (``GET …/comments/{id}/reactions``): who, and which."""

    content: str
    user: User | None = None


class CollaboratorPermission(Payload):
    """A person's access to a repository (``GET …/collaborators/{username}/permission``).

    ``permission`` is GitHub's legacy base role: admin, write, read or none (maintain is
    reported as write, triage as read); ``role_name`` names the role itself, custom roles too.
    """

    permission: str
    role_name: str | None = None
    user: User | None = None


class ReviewComment(Comment):
    pull_request_url: str
    path: str
    line: int | None = None
    original_line: int | None = None
    side: str | None = None
    # A multi-line comment's first line (None for one line).
    start_line: int | None = None
    start_side: str | None = None
    in_reply_to_id: int | None = None
    pull_request_review_id: int | None = None
    node_id: str | None = None
    reactions: Reactions | None = None

    @property
    def number(self) -> int:
        return self._number_of(self.pull_request_url)


class Review(Payload):
    id: int
    user: User | None = None
    state: str
    body: str | None = None
    commit_id: str | None = None
    submitted_at: datetime | None = None
    html_url: str = ""


class PullFile(Payload):
    """An entry of a PR's or a comparison's file list (GitHub's ``diff-entry``)."""

    filename: str
    status: str
    sha: str | None = None  # the blob at the head; null for a removed file on some versions
    previous_filename: str | None = None
    additions: int = 0
    deletions: int = 0
    changes: int = 0
    patch: str | None = None  # absent for binary files and diffs too large for GitHub


class CommitMessage(Payload):
    message: str


class CompareCommit(Payload):
    sha: str
    commit: CommitMessage


class ShaOnly(Payload):
    sha: str


class Comparison(Payload):
    """``GET /repos/{o}/{r}/compare/{base}...{head}`` (``commit-comparison``)."""

    status: str  # ahead | behind | diverged | identical
    ahead_by: int
    behind_by: int
    total_commits: int
    merge_base_commit: ShaOnly
    commits: list[CompareCommit] = Field(default_factory=list)
    files: list[PullFile] = Field(default_factory=list)


class FileContent(Payload):
    type: str
    path: str
    sha: str
    encoding: str | None = None
    content: str | None = None


class InstallationRepos(Payload):
    total_count: int = 0
    repositories: list[Repo] = Field(default_factory=list)
