"""The webhook receiver: signature before parsing, size and shape limits, redeliveries, the
account a delivery belongs to, and a durable delivery log. Deliveries come from the sandbox
GitHub (GitHub's headers and payload shapes) or are built to be wrong on purpose."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import uuid

import httpx2
import pytest

from dsh_github_reviewer.sources.webhook import deliveries, events
from dsh_github_reviewer.sources.webhook.receiver import MAX_BODY_BYTES, Receiver, Target
from dsh_github_reviewer.sources.webhook.server import WebhookBindError, WebhookServer
from dsh_github_reviewer.sources.webhook.signature import matching_secrets, sign
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_harness import Harness, parse_config

SECRET = "s3cret-of-a"
OTHER = "s3cret-of-b"


class Sink:
    """Records what the receiver asked to be recorded (the real sink is tested end to end)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.fail = 0
        self.delay = 0.0

    async def record(self, account: str, event: events.Envelope, delivery_id: str) -> str:
        await asyncio.sleep(self.delay)
        if self.fail:
            self.fail -= 1
            raise OSError("disk full")
        self.calls.append((account, type(event).__name__, delivery_id))
        return f"account {account}: recorded"


@pytest.fixture
async def domain(tmp_path):
    toml = f'home = "{tmp_path / "home"}"\n[plugins.github-reviewer]\n'
    harness = Harness(parse_config(toml, "dsh.toml", tmp_path))
    yield harness, await harness.storage.domain(deliveries.DOMAIN)
    await harness.close()


@pytest.fixture
def targets():
    return [Target("a", SECRET, frozenset({"octo/app"})),
            Target("b", OTHER, frozenset({"octo/lib"}), installation_id=77),
            Target("b2", OTHER, frozenset({"octo/lib"}), installation_id=78)]


@pytest.fixture
async def receiver(domain, targets):
    log = await deliveries.DeliveryLog(domain[1]).load()
    return Receiver(targets, Sink(), log)


def post(receiver: Receiver, body: bytes, *, secret: str | None = SECRET,
         event: str = "pull_request", delivery: str | None = None,
         headers: dict[str, str] | None = None):
    h = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
         "Content-Type": "application/json"}
    if secret is not None:
        h["X-Hub-Signature-256"] = sign(secret, body)
    h.update(headers or {})

    async def go():
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=receiver.app()),
                                      base_url="http://hook") as c:
            return await c.post(receiver.path, content=body, headers=h)
    return go()


@pytest.fixture(scope="module")
def sandbox_deliveries():
    """Real deliveries for octo/app and octo/lib, captured from the sandbox."""
    got: dict[str, bytes] = {}
    with SandboxGitHub() as sb:
        st = sb.state
        for repo in ("octo/app", "octo/lib"):
            st.create_repo(repo, {"a.py": "a\n"})
            sb.add_hook("http://127.0.0.1:9/never", "x", repo=repo, ping=False)
        sb.webhooks.drop_next(100)  # keep them here: nothing listens
        st.commit("octo/app", "f", {"a.py": "b\n"})
        st.open_pull("octo/app", "f", title="t", author="alice")
        st.set_association("octo/app", "maint", "MEMBER")
        st.add_issue_comment("octo/app", 1, "maint", "/bot hi")
        st.commit("octo/lib", "f", {"a.py": "c\n"})
        st.open_pull("octo/lib", "f", title="t", author="alice")
        sb.webhooks.wait_idle()
        for d in sb.webhooks.deliveries():
            got[f"{d.event}.{d.action}:{json.loads(d.body)['repository']['full_name']}"] = d.body
    return got


def with_installation(body: bytes, installation: int) -> bytes:
    data = json.loads(body)
    data["installation"] = {"id": installation, "node_id": "x"}
    return json.dumps(data).encode()


def test_signature_checks():
    body = b'{"zen": "x"}'
    good = sign(SECRET, body)
    assert matching_secrets(good, body, [SECRET, OTHER]) == {SECRET}
    assert matching_secrets(good.upper().replace("SHA256=", "sha256="), body, [SECRET]) == \
        {SECRET}
    assert matching_secrets(good, body + b" ", [SECRET]) == set()
    for header in (None, "", "sha1=" + good[7:], good[:-1], "sha256=" + "z" * 64):
        assert matching_secrets(header, body, [SECRET]) == set()


async def test_a_signed_delivery_is_recorded_once(receiver, sandbox_deliveries):
    body = sandbox_deliveries["pull_request.opened:octo/app"]
    r = await post(receiver, body, delivery="d-1")
    assert r.status_code == 200 and "recorded" in r.json()["status"]
    assert receiver.sink.calls == [("a", "PullRequestEvent", "d-1")]
    again = await post(receiver, body, delivery="d-1")
    assert again.status_code == 200 and "duplicate" in again.json()["status"]
    assert len(receiver.sink.calls) == 1


async def test_bad_signatures_are_rejected_before_parsing(receiver, sandbox_deliveries,
                                                          caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.sources.webhook")
    body = sandbox_deliveries["issue_comment.created:octo/app"]
    for secret, headers in ((None, {}), ("wrong", {}),
                            (SECRET, {"X-Hub-Signature-256": "sha256=" + "0" * 64})):
        r = await post(receiver, body, secret=secret, event="issue_comment", headers=headers)
        assert r.status_code == 401
    # Not even parsed: a forged body that is not JSON is still a 401, not a 400.
    assert (await post(receiver, b"{not json", secret="wrong")).status_code == 401
    assert receiver.sink.calls == [] and len(receiver.deliveries) == 0
    # A forged delivery id cannot write lines of its own into the log.
    r = await post(receiver, body, secret="wrong", delivery="x\nINFO forged line")
    assert r.status_code == 401 and "\nINFO forged" not in caplog.text
    # Bodies are never logged, accepted or not.
    caplog.clear()
    assert (await post(receiver, body, event="issue_comment")).status_code == 200
    assert "/bot hi" not in caplog.text and "maint" not in caplog.text
    assert "webhook delivery" in caplog.text and "recorded" in caplog.text


async def test_malformed_and_oversized_deliveries(receiver):
    assert (await post(receiver, b"{not json")).status_code == 400
    assert (await post(receiver, b"[1, 2]")).status_code == 400
    r = await post(receiver, json.dumps({"action": "opened", "number": 1}).encode())
    assert r.status_code == 400 and "pull_request" in r.json()["status"]
    r = await post(receiver, b"{}", headers={"X-GitHub-Event": ""})
    assert r.status_code == 400
    big = b" " * (MAX_BODY_BYTES + 1)
    r = await post(receiver, big, secret=None)
    assert r.status_code == 413
    assert receiver.sink.calls == []


async def test_form_encoded_deliveries_are_read(receiver, sandbox_deliveries):
    from urllib.parse import urlencode
    body = urlencode({"payload": sandbox_deliveries["pull_request.opened:octo/app"].decode()})
    r = await post(receiver, body.encode(),
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200 and receiver.sink.calls[0][1] == "PullRequestEvent"


async def test_ping_and_unused_events_are_acknowledged(receiver):
    r = await post(receiver, b'{"zen": "Keep it simple.", "hook_id": 1}', event="ping")
    assert r.status_code == 200 and r.json()["status"] == "pong"
    r = await post(receiver, b'{"action": "labeled"}', event="pull_request")
    assert r.status_code == 200 and "ignored" in r.json()["status"]
    r = await post(receiver, b'{"action": "created"}', event="star")
    assert r.status_code == 200 and "ignored" in r.json()["status"]
    assert receiver.sink.calls == []


async def test_unwatched_repositories_are_ignored(receiver, sandbox_deliveries):
    data = json.loads(sandbox_deliveries["pull_request.opened:octo/app"])
    data["repository"]["full_name"] = "someone/else"
    r = await post(receiver, json.dumps(data).encode())
    assert r.status_code == 200 and "no account watches someone/else" in r.json()["status"]
    assert receiver.sink.calls == []


async def test_the_account_is_picked_by_installation_and_its_secret(receiver,
                                                                    sandbox_deliveries):
    lib = sandbox_deliveries["pull_request.opened:octo/lib"]
    # Both b and b2 watch octo/lib; the installation picks one.
    r = await post(receiver, with_installation(lib, 78), secret=OTHER)
    assert r.status_code == 200 and receiver.sink.calls[-1][0] == "b2"
    # Without an installation (a repository hook) every account watching it records.
    await post(receiver, lib, secret=OTHER)
    assert [c[0] for c in receiver.sink.calls[-2:]] == ["b", "b2"]
    # A's secret cannot speak for B's repository.
    n = len(receiver.sink.calls)
    r = await post(receiver, lib, secret=SECRET)
    assert r.status_code == 401 and len(receiver.sink.calls) == n


async def test_an_app_account_without_a_list_takes_its_installation(domain,
                                                                     sandbox_deliveries):
    # An App account without repositories watches its installation's.
    whole = Target("org", OTHER, frozenset(), installation_id=78, whole_installation=True)
    rec = Receiver([whole], Sink(), await deliveries.DeliveryLog(domain[1]).load())
    lib = sandbox_deliveries["pull_request.opened:octo/lib"]
    r = await post(rec, with_installation(lib, 78), secret=OTHER)
    assert r.status_code == 200 and rec.sink.calls[-1][0] == "org"
    n = len(rec.sink.calls)
    r = await post(rec, with_installation(lib, 79), secret=OTHER)   # another installation
    assert len(rec.sink.calls) == n and r.status_code == 200


async def test_a_failed_record_is_not_remembered(receiver, sandbox_deliveries):
    body = sandbox_deliveries["pull_request.opened:octo/app"]
    receiver.sink.fail = 1
    r = await post(receiver, body, delivery="d-fail")
    assert r.status_code == 500 and "disk full" not in r.text
    r = await post(receiver, body, delivery="d-fail")  # the redelivery does the work
    assert r.status_code == 200 and len(receiver.sink.calls) == 1


async def test_a_concurrent_duplicate_waits_for_the_first(receiver, sandbox_deliveries):
    body = sandbox_deliveries["pull_request.opened:octo/app"]
    receiver.sink.delay = 0.2
    first, second = await asyncio.gather(post(receiver, body, delivery="d-x"),
                                         post(receiver, body, delivery="d-x"))
    assert {first.status_code, second.status_code} == {200}
    assert len(receiver.sink.calls) == 1


async def test_a_concurrent_duplicate_of_a_failed_delivery_fails_too(receiver,
                                                                    sandbox_deliveries):
    # A 200 for the copy would tell GitHub the work is recorded when nothing is.
    body = sandbox_deliveries["pull_request.opened:octo/app"]
    receiver.sink.delay, receiver.sink.fail = 0.2, 1
    first, second = await asyncio.gather(post(receiver, body, delivery="d-y"),
                                         post(receiver, body, delivery="d-y"))
    assert (first.status_code, second.status_code) == (500, 500)
    assert receiver.sink.calls == [] and not receiver.deliveries.seen("d-y")


async def test_the_delivery_log_is_durable_and_bounded(domain, targets, sandbox_deliveries):
    _, dom = domain
    log = await deliveries.DeliveryLog(dom, cap=10).load()
    receiver = Receiver(targets, Sink(), log)
    body = sandbox_deliveries["pull_request.opened:octo/app"]
    for i in range(25):
        assert (await post(receiver, body, delivery=f"id-{i}")).status_code == 200
    assert 10 <= len(log) <= 11
    reopened = await deliveries.DeliveryLog(dom, cap=10).load()
    assert reopened.seen("id-24") and not reopened.seen("id-0")
    assert len(await dom.table(deliveries.TABLE).all()) == len(log)


async def test_the_listener_serves_and_names_a_taken_port(receiver, sandbox_deliveries):
    server = WebhookServer(receiver, "127.0.0.1", 0)
    await server.start()
    try:
        body = sandbox_deliveries["pull_request.opened:octo/app"]
        async with httpx2.AsyncClient() as c:
            r = await c.post(server.url, content=body, headers={
                "X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "live-1",
                "X-Hub-Signature-256": sign(SECRET, body)})
            assert r.status_code == 200
            assert (await c.get(server.url)).status_code == 405
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            taken = WebhookServer(receiver, "127.0.0.1", s.getsockname()[1])
            with pytest.raises(WebhookBindError, match=r"cannot listen on 127\.0\.0\.1"):
                await taken.start()
    finally:
        await server.stop()
