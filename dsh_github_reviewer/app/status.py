"""What ``status`` shows (the CLI, its JSON and the web UI's status page), read from the stored
records, so another process sees what the running bot stored."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dsh_harness import Harness

from ..core.clock import utcnow
from ..sources.poll import POLL_PAUSES
from ..sources.webhook.status import webhook_status
from ..work.records import DOMAIN
from ..work.store import WorkStore
from . import ReviewerApp, run_record
from .pr_state import from_record, status_words


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat(timespec="seconds") if value else None


async def status_data(harness: Harness) -> list[dict[str, Any]]:
    """Everything ``status`` (CLI, JSON and web page) shows, read from the stored records."""
    app = ReviewerApp.of(harness)
    domain = await harness.storage.domain(DOMAIN)
    started = await run_record.load(await harness.storage.domain(run_record.DOMAIN))
    now = utcnow()
    hooks = {h["instance"]: h for h in await webhook_status(harness, app.instances,
                                                            app.webhooks)}
    replicas, held = await _replica_state(harness)
    accounts = []
    for acct in app.configured.values():
        store = WorkStore(domain, acct.key)
        account = await store.load_account()
        prs = []
        for ref, e in sorted((await store.prs()).items(), key=lambda kv: kv[0].format()):
            backoff = e.backoff_until(acct.config.poll_interval_s)
            prs.append({
                # "pr" is for reading; "repo" and "number" are the PR for a program.
                "pr": f"{ref.repo}#{ref.number}", "repo": ref.repo, "number": ref.number,
                "title": e.title, "status": e.status,
                # The status in words (never a raw ``gave_up``; a draft waits, closed/merged).
                "status_text": status_words(e), "state": from_record(e)[0],
                "head_sha": e.head_sha, "reviewed_head_sha": e.reviewed_head_sha,
                "reviews_done": e.reviews_done, "fail_count": e.fail_count,
                "backoff_until": _iso(backoff) if backoff and backoff > now else None,
                "last_error": e.last_error, "updated_at": _iso(e.updated_at),
                "config_error": e.config_error,
                "closed": e.closed_seen_at is not None,
                # A draft whose base does not review drafts: its review waits until ready.
                "draft": e.draft,
                # /bot pause: who paused automatic reviews (None: not paused).
                "paused_by": e.paused_by, "paused_at": _iso(e.paused_at),
                # Replicas: who runs this PR's work now (its lease), else None.
                "lease": held.get(f"pr:{ref.format()}"),
                # action "teach": a thread reply read for a lesson, not a /bot command.
                "queued": [{"comment_id": c.comment_id, "action": c.action,
                            "attempts": c.attempts,
                            "next_attempt_at": _iso(c.next_attempt_at),
                            "last_error": c.last_error} for c in e.queued],
                "gave_up": [{"what": n.what, "error": n.error, "at": _iso(n.created_at),
                             "notice_posted": n.posted} for n in e.notices]})
        # What the running bot was started with (the shell's environment may differ).
        view = run_record.status_view(started.get(acct.key),
                                      run_record.summary(acct.instance, acct.config))
        accounts.append({
            "account": acct.key, "instance": view["instance"],
            "repositories": view["repositories"], "config": view,
            "repository_state": {
                repo: {"last_ok_at": _iso(st.last_ok_at), "last_error": st.last_error,
                       "last_error_at": _iso(st.last_error_at)}
                for repo, st in sorted(account.repos.items())},
            "mode": view["mode"], "credentials": view["credentials"],
            "last_tick_at": _iso(account.last_tick_at),
            "next_tick_at": _iso(account.next_tick_at),
            "rate_limited_until": _iso(account.rate_limited_until),
            # Rejected credentials (or the MCP server rate limited): nothing runs until then.
            "paused_until": _iso(account.paused_until) if account.paused_until else None,
            "pause_reason": account.pause_reason if account.paused_until else None,
            # A rejected token or GitHub's rate limit also skips the polls until then.
            "polls_paused": bool(account.paused_until and account.pause in POLL_PAUSES),
            "last_error": account.last_error,
            "webhook": hooks.get(acct.instance),  # None: polling only
            # Replicas on shared storage ([] for one process): who is alive, who polls.
            "replicas": replicas,
            "poll_lease": held.get(f"poll:{acct.key}"),
            "prs": prs})
    return accounts


async def _replica_state(harness: Harness) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The replicas' heartbeats and the leases held now (shared storage only)."""
    leases = harness.leases
    if not leases.shared:
        return [], {}
    now = utcnow()
    replicas = [{"id": r.id, "host": r.host, "pid": r.pid, "started_at": _iso(r.started_at),
                 "heartbeat_at": _iso(r.heartbeat_at),
                 "heartbeat_age_s": round((now - r.heartbeat_at).total_seconds(), 1)}
                for r in await leases.replicas()]
    held = {lease.name: {"owner": lease.owner, "token": lease.token,
                         "expires_at": _iso(lease.expires_at)}
            for lease in await leases.held()}
    return replicas, held
