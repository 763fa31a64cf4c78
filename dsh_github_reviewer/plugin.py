"""The reviewer's hook implementations: the only place the harness calls into this package."""

from __future__ import annotations

import logging
from pathlib import Path

from dsh_harness import hookimpl

from . import cli as cli_commands
from .app import PLUGIN_NAME, ReviewerApp, SetupError, run_record
from .app.webhooks import bind_receivers, start_receivers, stop_receivers
from .cli import once
from .config import ReviewerConfig
from .core.clock import utcnow
from .core.session_key import PrKey, parse_session_id
from .eval import web_page as eval_page
from .sources.webhook import deliveries as webhook_deliveries
from .web import facts as web_facts
from .web import lessons as web_lessons
from .web import pages as web_pages
from .web import view as web_view
from .work import store as work_store

log = logging.getLogger(__name__)


@hookimpl
def dsh_storage_domains():
    return [work_store.domain_spec(), webhook_deliveries.domain_spec(), run_record.domain_spec()]


@hookimpl
def dsh_plugin_config_models():
    return {PLUGIN_NAME: ReviewerConfig}


@hookimpl
async def dsh_agent_world(harness, session_id, inputs):
    if parse_session_id(session_id) is None:
        return None
    # inputs: the reviewers' WorldInputs for the turn opening the agent; None otherwise.
    return await ReviewerApp.of(harness).world(session_id, inputs)


@hookimpl
def dsh_session_title(harness, session):
    key = parse_session_id(session.id)
    if key is None:
        return None
    meta = session.meta or {}
    if meta.get("owner") and meta.get("repo") and meta.get("number"):
        return PrKey(key.account, meta["owner"], meta["repo"], int(meta["number"]),
                     key.persona).title
    return key.title


@hookimpl
def dsh_session_group(harness, session):
    key = parse_session_id(session.id)
    if key is None:
        return None
    meta = session.meta or {}
    owner, repo = meta.get("owner") or key.owner, meta.get("repo") or key.repo
    return [f"account {key.account}", f"{owner}/{repo}"]


@hookimpl
def dsh_session_link(harness, session):
    if parse_session_id(session.id) is None:
        return None
    url = (session.meta or {}).get("url")
    return url if isinstance(url, str) else None


@hookimpl
def dsh_validate(harness):
    try:
        app = ReviewerApp.of(harness)
    except SetupError as exc:  # e.g. one account name in two instances
        return [str(exc)]
    return app.problems()


@hookimpl
async def dsh_startup(harness):
    # harness.startup() ran dsh_validate (credentials, keys, models) before this hook.
    app = ReviewerApp.of(harness)
    if not app.configured:
        return
    await app.connect()
    await app.record_start()
    for acct in app.connected.values():
        if not acct.config.repositories and acct.config.app_mode:
            log.info("account %s reviews every repository its App installation %s can access",
                     acct.key, acct.config.installation_id)
        elif not acct.config.repositories:
            log.warning("account %s has no repositories: it stays idle (set repositories in "
                        "dsh.toml or GITHUB_REPOSITORIES=owner/repo,...)", acct.key)
    app.build_work()
    if harness.run_once:
        started = utcnow()
        app.pass_results = await app.work.run_once()
        # dsh run --once prints these and exits 1 (cron reads the exit code).
        return await once.failures(app, app.pass_results, started)
    else:
        # A taken webhook port stops the start before the first poll (one line, exit 1)...
        sink = app.work.record_work()
        app.webhooks = await bind_receivers(app, sink)
        app.work.start()
        # ...but deliveries record work and wake the scheduler, so they are served after it.
        app.webhooks = await start_receivers(app, sink, app.webhooks)


@hookimpl
async def dsh_shutdown(harness):
    app = harness.plugin_state.get(PLUGIN_NAME)
    if app is None:
        return
    await stop_receivers(app.webhooks)
    app.webhooks = []
    if app.work is not None:
        await app.work.stop()
    await app.close()


@hookimpl
def dsh_register_commands(cli):
    cli_commands.register(cli)


@hookimpl
def dsh_register_web_routes(router):
    router.add_template_dir(Path(__file__).parent / "web" / "templates")
    web_pages.register(router)
    eval_page.register(router)
    web_lessons.register(router)


@hookimpl
def dsh_web_session_facts(harness, session, facts, events):
    web_facts.update(session, facts, events)


@hookimpl
def dsh_web_session_view(harness, session, events, facts):
    return web_view.build(session, events, facts, web_pages.state_now(harness, session.id))
