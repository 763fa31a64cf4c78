"""Webhook deliveries from the sandbox GitHub, as GitHub sends them for its state changes.

Hooks are registered with a URL and a secret (a repository hook, or an App hook covering every
repository of an installation). Every state change of ``SandboxState`` becomes a delivery with
GitHub's headers (``X-GitHub-Event``, ``X-GitHub-Delivery`` GUID, ``X-Hub-Signature-256``,
``User-Agent: GitHub-Hookshot/…``) and a payload in the shapes of GitHub's published webhook
schemas (npm ``@octokit/webhooks-schemas``;
``tests/reviewer/testing/test_sandbox_webhooks.py`` checks them).
Deliveries go out in order from one thread with GitHub's 10 s timeout and, like GitHub, are not
retried; tests can drop the next deliveries (a lost delivery) and redeliver one by id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import queue
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx2

from .sandbox_payloads import Payloads, ts
from .sandbox_state import IssueComment, Pull, ReviewComment, SandboxState

DELIVERY_TIMEOUT_S = 10.0
USER_AGENT = "GitHub-Hookshot/8e03811"

# Keys the webhook schemas do not allow in objects the REST payloads share with them.
_REPO_EXTRA = {"network_count", "subscribers_count"}


@dataclass
class Hook:
    id: int
    url: str
    secret: str
    repo: str | None = None  # None: an App hook for every repository of the installation
    installation_id: int | None = None
    events: frozenset[str] = frozenset({"*"})
    content_type: str = "json"  # or "form"
    active: bool = True

    def wants(self, event: str, repo: str) -> bool:
        if not self.active or (self.repo is not None and self.repo.lower() != repo.lower()):
            return False
        return "*" in self.events or event in self.events or event == "ping"


@dataclass
class Sent:
    """One delivery attempt, as GitHub's "Recent Deliveries" page shows it."""

    id: str
    hook_id: int
    event: str
    action: str | None
    body: bytes
    headers: dict[str, str]
    status: int | None = None  # None: not answered (dropped, timed out, refused)
    error: str | None = None
    redelivery: bool = False
    done: threading.Event = field(default_factory=threading.Event)


class WebhookSender:
    def __init__(self, state: SandboxState, payloads: Payloads):
        self.state, self.payloads = state, payloads
        self.hooks: dict[int, Hook] = {}
        self.sent: list[Sent] = []
        self._drop: list[str | None] = []  # events of the next deliveries to lose
        self._queue: queue.Queue[Sent | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._http = httpx2.Client(timeout=DELIVERY_TIMEOUT_S)
        state.listeners.append(self.emit)

    # -- scenario API -------------------------------------------------------------------------

    def add_hook(self, url: str, secret: str, *, repo: str | None = None,
                 installation_id: int | None = None, events: set[str] | None = None,
                 content_type: str = "json", ping: bool = True) -> Hook:
        hook = Hook(self.state.next_id(), url, secret, repo, installation_id,
                    frozenset(events or {"*"}), content_type)
        with self._lock:
            self.hooks[hook.id] = hook
        if ping:
            self._enqueue(hook, "ping", None, self._ping(hook))
        return hook

    def drop_next(self, times: int = 1, event: str | None = None) -> None:
        """Lose the next ``times`` deliveries (of ``event``), as a network failure would."""
        with self._lock:
            self._drop += [event] * times

    def redeliver(self, delivery_id: str) -> Sent:
        """Send a delivery again with the same id and body (GitHub's "Redeliver" button)."""
        with self._lock:
            original = next(s for s in self.sent if s.id == delivery_id and not s.redelivery)
        again = Sent(original.id, original.hook_id, original.event, original.action,
                     original.body, dict(original.headers), redelivery=True)
        self._submit(again)
        return again

    def deliveries(self, event: str | None = None, action: str | None = None) -> list[Sent]:
        with self._lock:
            return [s for s in self.sent if (event is None or s.event == event)
                    and (action is None or s.action == action)]

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until every delivery queued so far was answered or failed."""
        with self._lock:
            pending = [s for s in self.sent if not s.done.is_set()]
        for s in pending:
            if not s.done.wait(timeout):
                raise TimeoutError(f"delivery {s.id} ({s.event}) still pending")

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=DELIVERY_TIMEOUT_S + 5)
            self._thread = None
        self._http.close()

    # -- state changes -> deliveries ------------------------------------------------------------

    def emit(self, event: str, action: str, objs: dict[str, Any]) -> None:
        """Called by the state (under its lock) after a change."""
        repo_name = objs["repo"]
        with self._lock:
            hooks = [h for h in self.hooks.values() if h.wants(event, repo_name)]
        if not hooks:
            return
        body = self._payload(event, action, objs)
        for hook in hooks:
            payload = dict(body)
            if hook.installation_id is not None:
                payload["installation"] = {"id": hook.installation_id,
                                           "node_id": f"MDIz_{hook.installation_id}"}
            self._enqueue(hook, event, action, payload)

    def _payload(self, event: str, action: str, objs: dict[str, Any]) -> dict[str, Any]:
        repo = self.state.repo(objs["repo"])
        out: dict[str, Any] = {"action": action}
        if event == "pull_request":
            pr: Pull = objs["pull"]
            out["number"] = pr.number
            out.update({k: v for k, v in objs.items() if k in ("before", "after", "changes")})
            out["pull_request"] = self.pull(pr)
        elif event == "issue_comment":
            c: IssueComment = objs["comment"]
            out["issue"] = self.issue(self.state.pull(c.repo, c.number))
            out["comment"] = self.issue_comment(c)
        elif event == "pull_request_review_comment":
            rc: ReviewComment = objs["comment"]
            out["comment"] = self.review_comment(rc)
            out["pull_request"] = self.pull(self.state.pull(rc.repo, rc.number), full=False)
        elif event == "pull_request_review_thread":
            comments: list[ReviewComment] = objs["comments"]
            out["thread"] = {"node_id": f"PRRT_{comments[0].id}",
                             "comments": [self.review_comment(c) for c in comments]}
            out["pull_request"] = self.pull(self.state.pull(comments[0].repo,
                                                            comments[0].number), full=False)
        out["repository"] = self.repository(repo)
        out["sender"] = self.user(objs["sender"])
        return out

    # -- payload shapes (webhook schemas are stricter than REST: no extra keys) -----------------

    def user(self, login: str) -> dict[str, Any]:
        return self.payloads.user(login)

    def repository(self, repo: Any) -> dict[str, Any]:
        data = {k: v for k, v in self.payloads.repo(repo).items() if k not in _REPO_EXTRA}
        data.update({"is_template": False, "web_commit_signoff_required": False, "topics": [],
                     "custom_properties": {}})
        return data

    def reactions(self, url: str) -> dict[str, Any]:
        return {"url": f"{url}/reactions", "total_count": 0, "+1": 0, "-1": 0, "laugh": 0,
                "confused": 0, "heart": 0, "hooray": 0, "eyes": 0, "rocket": 0}

    def pull(self, pr: Pull, full: bool = True) -> dict[str, Any]:
        """``pull_request`` events carry the full PR; comment and thread events the simple one."""
        data = self.payloads.pull(pr, full=full)
        for side in ("head", "base"):
            data[side] = dict(data[side])
            data[side]["repo"] = self.repository(self.state.repo(
                pr.head_repo if side == "head" else pr.repo))
        return data

    def issue(self, pr: Pull) -> dict[str, Any]:
        api = f"{self.payloads.api}/repos/{pr.repo}"
        url = f"{api}/issues/{pr.number}"
        html = f"{self.payloads.base}/{pr.repo}/pull/{pr.number}"
        return {"url": url, "repository_url": api, "labels_url": f"{url}/labels{{/name}}",
                "comments_url": f"{url}/comments", "events_url": f"{url}/events",
                "html_url": html, "id": hash(("issue", pr.repo, pr.number)) & 0x7FFFFFFF,
                "node_id": f"PR_{self.state.repo(pr.repo).id}_{pr.number}",
                "number": pr.number, "title": pr.title, "user": self.user(pr.user),
                "labels": [], "state": pr.state, "locked": False, "assignee": None,
                "assignees": [], "milestone": None,
                "comments": len(self.state.issue_comments_of(pr.repo, pr.number)),
                "created_at": ts(pr.created_at), "updated_at": ts(pr.updated_at),
                "closed_at": ts(pr.updated_at) if pr.state == "closed" else None,
                "author_association": self.state.association(pr.repo, pr.user),
                "active_lock_reason": None, "draft": pr.draft, "body": pr.body,
                "reactions": self.reactions(url),
                "timeline_url": f"{url}/timeline",
                "pull_request": {"url": f"{api}/pulls/{pr.number}", "html_url": html,
                                 "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
                                 "merged_at": ts(pr.updated_at) if pr.merged else None}}

    def issue_comment(self, c: IssueComment) -> dict[str, Any]:
        data = self.payloads.issue_comment(c)
        data["performed_via_github_app"] = None
        data["reactions"] = self.reactions(data["url"])
        return data

    def review_comment(self, c: ReviewComment) -> dict[str, Any]:
        data = self.payloads.review_comment(c)
        # GitHub files a comment made outside a review under a one-comment review of its own.
        data["pull_request_review_id"] = c.review_id if c.review_id is not None else c.id
        data["reactions"] = self.reactions(data["url"])
        # The webhook shape names every position field, null when it does not apply.
        for key in ("start_line", "original_start_line", "start_side"):
            data.setdefault(key, None)
        return data

    def _ping(self, hook: Hook) -> dict[str, Any]:
        now = ts(self.state.now())
        base = f"{self.payloads.api}/repos/{hook.repo}/hooks/{hook.id}" if hook.repo else \
            f"{self.payloads.api}/app/hook"
        data: dict[str, Any] = {
            "zen": "Keep it logically awesome.", "hook_id": hook.id,
            "hook": {"type": "Repository" if hook.repo else "App", "id": hook.id, "name": "web",
                     "active": True, "events": sorted(hook.events),
                     "config": {"content_type": hook.content_type, "url": hook.url,
                                "insecure_ssl": "0", "secret": "********"},
                     "updated_at": now, "created_at": now, "url": base,
                     "ping_url": f"{base}/pings", "deliveries_url": f"{base}/deliveries"}}
        if hook.repo:
            data["hook"]["test_url"] = f"{base}/test"
            data["repository"] = self.repository(self.state.repo(hook.repo))
            data["sender"] = self.user(self.state.repo(hook.repo).owner)
        return data

    # -- sending --------------------------------------------------------------------------------

    def _enqueue(self, hook: Hook, event: str, action: str | None,
                 payload: dict[str, Any]) -> None:
        raw = json.dumps(payload, separators=(",", ":")).encode()
        if hook.content_type == "form":
            raw = urlencode({"payload": raw.decode()}).encode()
            content_type = "application/x-www-form-urlencoded"
        else:
            content_type = "application/json"
        delivery = str(uuid.uuid4())
        headers = {
            "Content-Type": content_type, "User-Agent": USER_AGENT,
            "X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
            "X-GitHub-Hook-ID": str(hook.id),
            "X-GitHub-Hook-Installation-Target-Type":
                "integration" if hook.repo is None else "repository",
            "X-GitHub-Hook-Installation-Target-ID": str(hook.installation_id or hook.id),
            "X-Hub-Signature": "sha1=" + hmac.new(hook.secret.encode(), raw,
                                                  hashlib.sha1).hexdigest(),
            "X-Hub-Signature-256": "sha256=" + hmac.new(hook.secret.encode(), raw,
                                                        hashlib.sha256).hexdigest()}
        self._submit(Sent(delivery, hook.id, event, action, raw, headers))

    def _submit(self, sent: Sent) -> None:
        with self._lock:
            self.sent.append(sent)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="sandbox-webhooks")
                self._thread.start()
        self._queue.put(sent)

    def _take_drop(self, event: str) -> bool:
        with self._lock:
            for i, wanted in enumerate(self._drop):
                if wanted is None or wanted == event:
                    del self._drop[i]
                    return True
        return False

    def _run(self) -> None:
        while True:
            sent = self._queue.get()
            if sent is None:
                return
            try:
                hook = self.hooks[sent.hook_id]
                if not sent.redelivery and self._take_drop(sent.event):
                    sent.error = "dropped (sandbox fault)"
                    continue
                response = self._http.post(hook.url, content=sent.body, headers=sent.headers)
                sent.status = response.status_code
            except httpx2.HTTPError as exc:
                sent.error = f"{type(exc).__name__}: {exc}"
            finally:
                sent.done.set()
