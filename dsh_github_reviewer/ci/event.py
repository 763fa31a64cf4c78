"""The Actions environment and event of one CI run, read and checked up front.

``GITHUB_EVENT_PATH`` (the webhook payload GitHub wrote for this run), ``GITHUB_EVENT_NAME``,
``GITHUB_REPOSITORY``, ``GITHUB_TOKEN``, ``GITHUB_API_URL``, ``GITHUB_SERVER_URL``,
``GITHUB_RUN_ID``, ``GITHUB_RUN_ATTEMPT``, ``GITHUB_ACTOR`` and ``GITHUB_STEP_SUMMARY``. The
payload is untrusted input: only the fields relied on are read, through pydantic models, and a
bad file is an error naming what is wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from dsh_harness import DshError, error_lines

from ..core.commands import association_allowed, parse_command

# GitHub's own rules: owner = letters, digits, hyphens; repository = also '.' and '_'.
_REPOSITORY = re.compile(r"[A-Za-z0-9-]+/[A-Za-z0-9._-]+")
REVIEW_ACTIONS = ("opened", "synchronize", "reopened", "ready_for_review")
# Runs of PRs Dependabot opens get no Actions secrets (and a read-only token).
DEPENDABOT = "dependabot[bot]"


class CiError(DshError):
    """The run's environment or event cannot be used (exit code 2)."""


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Repo(_Loose):
    full_name: str


class _Ref(_Loose):
    sha: str
    repo: _Repo | None = None


class _User(_Loose):
    login: str
    type: str = "User"


class _Pull(_Loose):
    number: int
    user: _User | None = None
    draft: bool = False
    state: str = "open"
    head: _Ref
    base: _Ref


class _Issue(_Loose):
    number: int
    pull_request: dict | None = None


class _Comment(_Loose):
    id: int
    body: str | None = None
    user: _User
    author_association: str = "NONE"


class _Payload(_Loose):
    action: str | None = None
    pull_request: _Pull | None = None
    issue: _Issue | None = None
    comment: _Comment | None = None


@dataclass(frozen=True)
class CiEnv:
    event_name: str
    event_path: Path
    repository: str
    token: str | None
    api_url: str
    server_url: str
    run_id: str
    run_attempt: str
    actor: str = ""
    step_summary: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CiEnv:
        missing = [v for v in ("GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "GITHUB_REPOSITORY",
                               "GITHUB_RUN_ID") if not env.get(v)]
        if missing:
            raise CiError(f"not in a GitHub Actions run: {', '.join(missing)} "
                          f"{'is' if len(missing) == 1 else 'are'} not set")
        if not _REPOSITORY.fullmatch(env["GITHUB_REPOSITORY"]):
            raise CiError(f"GITHUB_REPOSITORY={env['GITHUB_REPOSITORY']!r} is not <owner>/<repo>")
        for var in ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT"):
            if env.get(var) and not env[var].isdigit():
                raise CiError(f"{var}={env[var]!r} is not a number")
        return cls(event_name=env["GITHUB_EVENT_NAME"], event_path=Path(env["GITHUB_EVENT_PATH"]),
                   repository=env["GITHUB_REPOSITORY"], token=env.get("GITHUB_TOKEN") or None,
                   api_url=(env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
                   server_url=(env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
                   run_id=env["GITHUB_RUN_ID"], run_attempt=env.get("GITHUB_RUN_ATTEMPT") or "1",
                   actor=env.get("GITHUB_ACTOR") or "",
                   step_summary=Path(env["GITHUB_STEP_SUMMARY"])
                   if env.get("GITHUB_STEP_SUMMARY") else None)


@dataclass(frozen=True)
class CiTask:
    """What this run does: review or answer a /bot on one PR, or nothing (with why)."""

    kind: Literal["review", "chat", "skip"]
    number: int = 0
    reason: str = ""
    fork: bool = False
    dependabot: bool = False
    requested_by: str | None = None
    comment_id: int | None = None
    author: str = ""
    association: str = "NONE"
    message: str = ""


def load_payload(path: Path) -> _Payload:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CiError(f"GITHUB_EVENT_PATH: cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise CiError(f"GITHUB_EVENT_PATH: {path} is not JSON (line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise CiError(f"GITHUB_EVENT_PATH: {path} is not UTF-8 text (byte {exc.start})") from None
    try:
        return _Payload.model_validate(raw)
    except ValidationError as exc:
        raise CiError(f"GITHUB_EVENT_PATH: {path}: " + "; ".join(error_lines(exc))) from None


def task_for(env: CiEnv, payload: _Payload, allowed: list[str]) -> CiTask:
    if env.event_name in ("pull_request", "pull_request_target"):
        pr = payload.pull_request
        if pr is None:
            raise CiError(f"{env.event_name} event without a pull_request object")
        if payload.action not in REVIEW_ACTIONS:
            return CiTask("skip", pr.number, f"pull_request action {payload.action!r} needs no "
                          "review")
        if pr.draft:
            return CiTask("skip", pr.number, "draft pull requests are not reviewed")
        head = pr.head.repo.full_name if pr.head.repo else ""
        fork = head.lower() != (pr.base.repo.full_name if pr.base.repo else env.repository
                                ).lower()
        dependabot = DEPENDABOT in (env.actor, pr.user.login if pr.user else "")
        return CiTask("review", pr.number, fork=fork, dependabot=dependabot)
    if env.event_name == "issue_comment":
        issue, comment = payload.issue, payload.comment
        if issue is None or comment is None:
            raise CiError("issue_comment event without issue or comment")
        if issue.pull_request is None:
            return CiTask("skip", issue.number, "the comment is on an issue, not a pull request")
        if payload.action != "created":
            return CiTask("skip", issue.number, f"comment action {payload.action!r} is ignored")
        cmd = parse_command(comment.body)
        if cmd is None:
            return CiTask("skip", issue.number, "the comment is not a /review or /bot command")
        if comment.user.type == "Bot":
            return CiTask("skip", issue.number, "comments by bots are ignored")
        if not association_allowed(comment.author_association, allowed):
            return CiTask("skip", issue.number, f"{comment.user.login} "
                          f"({comment.author_association}) may not run commands here")
        common = {"number": issue.number, "comment_id": comment.id, "author": comment.user.login,
                  "association": comment.author_association}
        if cmd.kind == "review":
            return CiTask("review", requested_by=comment.user.login, **common)
        if cmd.action != "chat":
            # /bot pause|resume|learn|lessons|forget|help act on the daemon's stored state,
            # which a CI run does not have: said plainly, never handed to the model as a chat.
            return CiTask("skip", issue.number, f"/bot {cmd.action} is a command of the "
                          "daemon (dsh run); CI mode answers /review and /bot <question>")
        return CiTask("chat", message=cmd.message, **common)
    return CiTask("skip", 0, f"event {env.event_name!r} is not handled (use pull_request or "
                  "issue_comment)")
