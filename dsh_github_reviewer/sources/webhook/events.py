"""The deliveries the reviewer acts on, parsed into pydantic models at the boundary.

The objects inside a delivery are GitHub's REST shapes, so they parse into the same models a
poll reads (``PullSummary``, ``IssueComment``, ``ReviewComment``): a delivery and a poll then
feed the same command parsing and filters. Unknown fields are ignored; a missing field the
reviewer relies on is a ``MalformedDelivery`` naming the event and the field.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from dsh_harness import error_lines

from ...github.models import IssueComment, Owner, PullSummary, ReviewComment

PR_ACTIONS = {"opened", "reopened", "synchronize", "ready_for_review", "converted_to_draft",
              "edited", "closed"}


class MalformedDelivery(ValueError):
    """A signed delivery the receiver cannot read (400): the message names what is wrong."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Installation(_Model):
    id: int


class Repository(_Model):
    id: int
    name: str
    full_name: str
    owner: Owner


class Envelope(_Model):
    """What every event the reviewer reads carries: where it happened."""

    action: str | None = None
    repository: Repository | None = None
    installation: Installation | None = None


class Ping(_Model):
    zen: str = ""
    hook_id: int | None = None


class PullRequestEvent(Envelope):
    action: str
    number: int
    pull_request: PullSummary
    changes: dict[str, object] | None = None

    @property
    def base_changed(self) -> bool:
        return self.action == "edited" and bool((self.changes or {}).get("base"))


class IssueRef(_Model):
    number: int
    pull_request: dict[str, object] | None = None  # present only when the issue is a PR


class IssueCommentEvent(Envelope):
    action: str
    issue: IssueRef
    comment: IssueComment


class ReviewCommentEvent(Envelope):
    action: str
    pull_request: PullSummary
    comment: ReviewComment


class Thread(_Model):
    node_id: str
    comments: list[ReviewComment] = []


class ReviewThreadEvent(Envelope):
    action: str
    pull_request: PullSummary
    thread: Thread


Event = PullRequestEvent | IssueCommentEvent | ReviewCommentEvent | ReviewThreadEvent
Kind = Literal["ping", "ignored", "event"]

_MODELS: dict[str, type[Envelope]] = {
    "pull_request": PullRequestEvent,
    "issue_comment": IssueCommentEvent,
    "pull_request_review_comment": ReviewCommentEvent,
    "pull_request_review_thread": ReviewThreadEvent,
}


def relevant(name: str, action: str | None, data: dict[str, object]) -> bool:
    """Whether the reviewer has anything to do for this event and action."""
    if name == "pull_request":
        return action in PR_ACTIONS
    if name == "issue_comment":
        issue = data.get("issue")
        return action == "created" and isinstance(issue, dict) and bool(issue.get("pull_request"))
    if name == "pull_request_review_comment":
        return action == "created"
    if name == "pull_request_review_thread":
        return action in ("resolved", "unresolved")
    return False


def parse(name: str, body: bytes) -> tuple[Envelope | Ping, bool]:
    """The delivery as a model, and whether the reviewer acts on it.

    Raises ``MalformedDelivery`` for a body that is not a JSON object or an event the reviewer
    acts on that lacks a field it needs.
    """
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise MalformedDelivery(f"{name} delivery: body is not JSON ({exc.msg})") from None
    except UnicodeDecodeError:
        raise MalformedDelivery(f"{name} delivery: body is not UTF-8") from None
    if not isinstance(data, dict):
        raise MalformedDelivery(f"{name} delivery: body is not a JSON object")
    try:
        if name == "ping":
            return Ping.model_validate(data), False
        action = data.get("action")
        model = _MODELS.get(name)
        if model is None or not relevant(name, action if isinstance(action, str) else None,
                                         data):
            return Envelope.model_validate(data), False
        return model.model_validate(data), True
    except ValidationError as exc:
        where = "; ".join(error_lines(exc)[:3])
        raise MalformedDelivery(f"{name} delivery: {where}") from None
