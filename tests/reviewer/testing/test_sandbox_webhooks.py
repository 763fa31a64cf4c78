"""The sandbox's webhook deliveries look like GitHub's (so the receiver tested on them works on
GitHub): headers, signatures, and payloads valid against GitHub's published webhook schemas,
npm @octokit/webhooks-schemas (fetched once with `npm pack`, cached under ~/.cache).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading

import pytest
from jsonschema import Draft7Validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_harness.testing import ThreadedServer
from tests.reviewer.npm_kit import cache_dir, npm_files

VERSION = "7.6.1"
CACHE = cache_dir(f"octokit-webhooks-schemas-{VERSION}")


def fetch_schema() -> dict:
    npm_files("@octokit/webhooks-schemas", VERSION, ["schema.json"], CACHE)
    return json.loads((CACHE / "schema.json").read_text())


class Collector:
    """A plain HTTP endpoint that keeps every request it gets."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        self.server = ThreadedServer("127.0.0.1", 0, "webhook-collector")

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        with self.lock:
            self.requests.append((dict(request.headers), body))
        return Response(status_code=200)

    def __enter__(self) -> str:
        port = self.server.serve(Starlette(routes=[Route("/hook", self.handle,
                                                          methods=["POST"])]))
        return f"http://127.0.0.1:{port}/hook"

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def deliveries():
    """One delivery of every event and action the reviewer reads."""
    with Collector() as url, SandboxGitHub() as sb:
        st = sb.state
        st.create_repo("octo/app", {"app.py": "a\nb\nc\n"})
        st.commit("octo/app", "release", {"x.txt": "x\n"})
        st.fork("octo/app", "mallory")
        sb.add_hook(url, "s3cret", repo="octo/app")
        sb.add_hook(url, "app-secret", installation_id=77)  # an App hook: every repository
        st.commit("mallory/app", "f", {"app.py": "a\nB\nc\n"})
        st.open_pull("octo/app", "f", title="t", body=None, author="mallory",
                     head_repo="mallory/app")
        st.commit("mallory/app", "f", {"app.py": "a\nBB\nc\n"})
        st.set_draft("octo/app", 1, True)
        st.set_draft("octo/app", 1, False)
        st.change_base("octo/app", 1, "release")
        st.set_association("octo/app", "maint", "MEMBER")
        st.add_issue_comment("octo/app", 1, "maint", "/bot hi")
        root = st.add_review_comment("octo/app", 1, "maint", "x", path="app.py", line=2)
        st.add_review_comment("octo/app", 1, "maint", "/bot why", path="app.py", line=2,
                              in_reply_to=root.id, start_line=1, start_side="RIGHT")
        st.resolve_thread(root.id, "maint")
        st.unresolve_thread(root.id, "maint")
        st.close_pull("octo/app", 1)
        st.reopen_pull("octo/app", 1)
        sb.webhooks.wait_idle()
        yield sb.webhooks.deliveries()


def test_every_event_is_delivered_to_both_hooks(deliveries):
    seen = {(d.event, d.action) for d in deliveries}
    for pair in [("ping", None), ("pull_request", "opened"), ("pull_request", "synchronize"),
                 ("pull_request", "converted_to_draft"), ("pull_request", "ready_for_review"),
                 ("pull_request", "edited"), ("pull_request", "closed"),
                 ("pull_request", "reopened"), ("issue_comment", "created"),
                 ("pull_request_review_comment", "created"),
                 ("pull_request_review_thread", "resolved"),
                 ("pull_request_review_thread", "unresolved")]:
        assert pair in seen
    assert all(d.status == 200 for d in deliveries)
    opened = [d for d in deliveries if d.action == "opened"]
    assert len(opened) == 2 and len({d.id for d in deliveries}) == len(deliveries)


def test_headers_and_signatures_are_githubs(deliveries):
    guid = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    for d in deliveries:
        h = d.headers
        assert h["User-Agent"].startswith("GitHub-Hookshot/")
        assert guid.match(h["X-GitHub-Delivery"]) and h["X-GitHub-Event"] == d.event
        secret = "app-secret" if h["X-GitHub-Hook-Installation-Target-Type"] == \
            "integration" else "s3cret"
        want = hmac.new(secret.encode(), d.body, hashlib.sha256).hexdigest()
        assert h["X-Hub-Signature-256"] == f"sha256={want}"


def test_payloads_match_the_published_webhook_schemas(deliveries):
    schema = fetch_schema()
    problems = []
    for d in deliveries:
        name = "ping$event" if d.event == "ping" else f"{d.event}${d.action}"
        assert name in schema["definitions"], name
        validator = Draft7Validator({"$ref": f"#/definitions/{name}",
                                     "definitions": schema["definitions"]})
        problems += [f"{name} {list(e.absolute_path)}: {e.message[:200]}"
                     for e in validator.iter_errors(json.loads(d.body))]
    assert problems == [], "\n".join(problems)


def test_app_hook_deliveries_name_the_installation(deliveries):
    for d in deliveries:
        payload = json.loads(d.body)
        if d.headers["X-GitHub-Hook-Installation-Target-Type"] == "integration" \
                and d.event != "ping":
            assert payload["installation"]["id"] == 77
        else:
            assert "installation" not in payload
