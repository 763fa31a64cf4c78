"""The status page shows the config the running bot recorded at
start, and marks what this server's reading of the same config differs in (ASGI transport)."""

from __future__ import annotations

import dsh_github_reviewer.plugin as reviewer_plugin
from dsh_github_reviewer.app import ReviewerApp
from dsh_github_reviewer.core.session_key import PrRef
from dsh_harness import Harness, parse_config
from tests.harness.agent_kit import config_text
from tests.reviewer.web.test_pr_pages import client, server  # noqa: F401  (fixture)

TOKEN = "ghp_" + "s" * 36


def make(tmp_path, model, env: dict[str, str]) -> Harness:
    text = config_text(model.base_url) + (
        '[plugins.github-reviewer]\nplugin = "dsh-github-reviewer"\n'
        '[[plugins.github-reviewer.accounts]]\nname = "demo"\n'
        'personal_access_token = "${GITHUB_TOKEN:-}"\napi_url = "http://127.0.0.1:9"\n'
        'repositories = "${GITHUB_REPOSITORIES:-}"\n')
    return Harness(parse_config(text, "t.toml", tmp_path, env), load_entry_points=False, env=env,
                   plugins=[("dsh-github-reviewer", reviewer_plugin)])


async def test_status_page_shows_the_running_bots_config_and_what_differs(tmp_path, server):  # noqa: F811
    service = make(tmp_path, server, {"GITHUB_TOKEN": TOKEN,
                                      "GITHUB_REPOSITORIES": "acme/shop,acme/api"})
    try:
        await ReviewerApp.of(service).record_start()   # what `dsh run` does at start
    finally:
        await service.close()

    shell = make(tmp_path, server, {})   # `dsh web` started from a shell without the variables
    try:
        async with client(shell) as c:
            page = (await c.get("/github-reviewer")).text
    finally:
        await shell.close()
    assert "Repositories as started: acme/shop, acme/api" in page
    assert "credentials set" in page and TOKEN not in page
    assert "Config: dsh run (pid " in page and "started <time" in page
    differs = page.split('class="error differs">', 1)[1].split("</p>", 1)[0]
    assert differs.startswith("This server reads the config differently:")
    assert "credentials (shell: unset)" in differs and "repositories (shell: none)" in differs


async def test_status_page_shows_replicas_and_who_runs_a_pr(tmp_path, server, pg_dsn):  # noqa: F811
    from dsh_github_reviewer.work.records import PrRecord
    from dsh_github_reviewer.work.store import WorkStore

    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORIES": "acme/shop"}
    text = config_text(server.base_url) + (
        f'[storage]\nbackend = "postgres"\ndsn = "{pg_dsn}"\n'
        '[plugins.github-reviewer]\nplugin = "dsh-github-reviewer"\n'
        '[[plugins.github-reviewer.accounts]]\nname = "demo"\n'
        'personal_access_token = "${GITHUB_TOKEN:-}"\napi_url = "http://127.0.0.1:9"\n'
        'repositories = "${GITHUB_REPOSITORIES:-}"\n')
    h = Harness(parse_config(text, "t.toml", tmp_path, env), load_entry_points=False, env=env,
                plugins=[("dsh-github-reviewer", reviewer_plugin)])
    try:
        from dsh_github_reviewer.work.records import DOMAIN

        store = WorkStore(await h.storage.domain(DOMAIN), "demo")
        from dsh_github_reviewer.core.clock import utcnow

        await store.update_pr(PrRef.parse("demo:acme/shop#3"), lambda _: PrRecord(
            head_sha="a" * 40, status="reviewing", title="t", updated_at=utcnow()))
        await h.leases.heartbeat()
        await h.leases.acquire("pr:demo:acme/shop#3", 60)
        async with client(h) as c:
            page = (await c.get("/github-reviewer")).text
    finally:
        await h.close()
    assert "1 replica(s)" in page and h.replica_id in page
    assert f"running on {h.replica_id}" in page


async def test_status_page_names_the_default_model_and_a_pause_that_skips_polls(
        tmp_path, server):  # noqa: F811
    from datetime import timedelta

    from dsh_github_reviewer.core.clock import utcnow
    from dsh_github_reviewer.work.records import DOMAIN
    from dsh_github_reviewer.work.store import WorkStore

    shell = make(tmp_path, server, {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORIES": "acme/shop"})
    try:
        await ReviewerApp.of(shell).record_start()
        store = WorkStore(await shell.storage.domain(DOMAIN), "demo")

        def paused(a):
            a.pause, a.paused_until = "github", utcnow() + timedelta(minutes=15)
            a.pause_reason = "GitHub rejected the token (HTTP 401)"
            a.next_tick_at = utcnow() + timedelta(seconds=120)
        await store.update_account(paused)
        async with client(shell) as c:
            page = (await c.get("/github-reviewer")).text
    finally:
        await shell.close()
    assert f"models {shell.config.default_model} (default_model)" in page
    assert "next poll after the pause" in page
