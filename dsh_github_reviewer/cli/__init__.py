"""The command line: ``dsh github-reviewer status|demo|ci|eval``.

A front end: may import ``app`` and every layer below; heavy or optional pieces (the demo's
sandbox, CI mode, eval) are imported lazily, inside the command that needs them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from dsh_harness import DshError, Harness

from ..app import PLUGIN_NAME
from ..app.status import status_data
from ..web.noise_status import by_repository as noise_by_repository


def register(cli: Any) -> None:
    parser = cli.add_command("github-reviewer",
                             "the GitHub reviewer: status, offline demo, one review in CI")
    sub = parser.add_subparsers(dest="reviewer_command", metavar="SUBCOMMAND", required=True)
    text = "the work record of each account and PR, as the running bot stored it"
    status = sub.add_parser("status", help=text, description=text)
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=cmd_status)
    text = ("an offline review against a sandbox GitHub and a scripted model: review, push, "
            "re-review, /bot (needs no config; binds 127.0.0.N:80, so root or "
            "CAP_NET_BIND_SERVICE)")
    demo = sub.add_parser("demo", help=text, description=text)
    demo.add_argument("--json", action="store_true")
    # The demo brings its own sandbox and config: it runs from any directory.
    demo.set_defaults(handler=cmd_demo, needs_config=False)
    text = ("inside a GitHub Actions job: review the event's PR once with the review team, "
            "then exit (see action.yml and docs/ci.en.md)")
    ci = sub.add_parser("ci", help=text, description=text)
    ci.add_argument("--account", default=None,
                    help="the account whose review settings apply (default: the only one)")
    ci.add_argument("--personas", default=None,
                    help="comma-separated personas (default: review.team.personas, else "
                         "quality,security,performance)")
    ci.add_argument("--fail-on", default="cannot-merge",
                    help="cannot-merge (default): exit 1 when the verdict is not \"can merge\" "
                         "(a required check then blocks the merge); never: exit 0 whatever "
                         "the verdict, an incomplete (failed-closed) review too; either way "
                         "exit 1 when no review could be posted")
    ci.set_defaults(handler=cmd_ci)
    text = ("review quality on seeded-defect pull requests: the real loop against a sandbox "
            "GitHub with your providers, scored against ground truth (see docs/eval.en.md)")
    ev = sub.add_parser("eval", help=text, description=text)
    from ..eval.args import add_arguments

    add_arguments(ev)
    # A scratch home and sandbox per run; without a config file the default provider applies.
    ev.set_defaults(handler=cmd_eval, needs_config=False)


def _config_lines(a: dict[str, Any]) -> list[str]:
    view = a["config"]
    if a["repositories"]:
        repos = ", ".join(a["repositories"])
    elif a["mode"] == "app":
        repos = "every repository of its App installation"
    else:
        repos = "no repositories (idle)"
    started = view.get("started_at")
    head = (f"account {a['account']} ({a['mode']}, credentials {a['credentials']}) — "
            + (f"as started: {repos}" if started else f"{repos}"))
    lines = [head, f"  config: {view['source']}" + (f", started {started}" if started else "")]
    if view["differs"]:
        lines.append("  this shell reads it differently: " + "; ".join(view["differs"]))
    return lines


async def cmd_status(harness: Harness, args: argparse.Namespace) -> int:
    if PLUGIN_NAME not in harness.instances.values():
        raise DshError(f"{harness.loaded.source}: no enabled instance of {PLUGIN_NAME} (add a "
                       "[plugins.github-reviewer] block; `dsh init --print` shows an example)")
    data = await status_data(harness)
    for a in data:
        # How often the bot's findings are acted on, per repository (from the sessions).
        a["noise"] = await noise_by_repository(harness, a["account"])
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    if not data:
        print("no github-reviewer accounts are configured")
    for a in data:
        for line in _config_lines(a):
            print(line)
        print(f"  last tick {a['last_tick_at'] or '-'}, next {a['next_tick_at'] or '-'}"
              + (f", rate limited until {a['rate_limited_until']}"
                 if a["rate_limited_until"] else "")
              + (f", PAUSED until {a['paused_until']}: {a['pause_reason']}"
                 if a["paused_until"] else "")
              + (f", last error: {a['last_error']}" if a["last_error"] and not (
                  a["paused_until"] and a["last_error"] == a["pause_reason"]) else ""))
        if a["replicas"]:
            poll = a["poll_lease"]
            print(f"  replicas: {len(a['replicas'])}"
                  + (f"; this slot polled by {poll['owner']}" if poll else ""))
            for r in a["replicas"]:
                print(f"    {r['id']} (host {r['host']}, pid {r['pid']}), started "
                      f"{r['started_at']}, heartbeat {r['heartbeat_age_s']:g} s ago")
        if a["webhook"]:
            h = a["webhook"]
            print(f"  webhook on {h['listen']}, reconciling every {h['reconcile_interval_s']:g} "
                  f"s; last delivery {h['last_delivery_at'] or '-'}"
                  + (f" ({h['last_event']})" if h["last_event"] else ""))
        for repo, st in a["repository_state"].items():
            if st["last_error"] and (not st["last_ok_at"]
                                     or st["last_error_at"] > st["last_ok_at"]):
                print(f"  {repo}: failing since {st['last_error_at']}: {st['last_error']}")
        for repo, n in a["noise"].items():
            if n["posted"]:
                print(f"  {repo}: {n['posted']} findings posted, {n['fixed']} fixed "
                      f"({n['fixed_pct']}%), {n['dismissed']} dismissed ({n['dismissed_pct']}%), "
                      f"{n['open']} open")
        for p in a["prs"]:
            line = (f"  {p['pr']}: {p['status']} head {p['head_sha'][:12]} "
                    f"reviews {p['reviews_done']}")
            if p["fail_count"]:
                line += f", failures {p['fail_count']}"
            if p["backoff_until"]:
                line += f", backoff until {p['backoff_until']}"
            if p.get("draft"):
                line += ", draft (waits until ready for review)"
            if p.get("paused_by"):
                line += f", paused by {p['paused_by']} (/bot resume)"
            commands = [q for q in p["queued"] if q.get("action") != "teach"]
            if commands:
                line += f", {len(commands)} /bot queued"
            if p["last_error"]:
                line += f", last error: {p['last_error']}"
            if p.get("config_error"):
                line += f", repository config ignored: {p['config_error']}"
            if p["lease"]:
                line += f", running on {p['lease']['owner']} until {p['lease']['expires_at']}"
            print(line)
            for g in p["gave_up"]:
                print(f"    gave up on {g['what']} at {g['at']}: {g['error']}"
                      + ("" if g["notice_posted"] else " (notice not posted yet)"))
    return 0


async def cmd_ci(harness: Harness, args: argparse.Namespace) -> int:
    from ..ci.command import run_ci
    from ..ci.event import CiError

    personas = None
    if args.personas is not None:
        personas = [p.strip().lower() for p in args.personas.split(",") if p.strip()]
    try:
        return await run_ci(harness, account=args.account, personas=personas,
                            fail_on=args.fail_on.strip().lower())
    except CiError as exc:
        print(f"dsh-review: {exc}")
        return 2


async def cmd_eval(harness: Harness, args: argparse.Namespace) -> int:
    from ..eval.command import cmd_eval as run_eval

    return await run_eval(harness, args)


async def cmd_demo(harness: Harness, args: argparse.Namespace) -> int:
    from .demo import run_demo

    return await run_demo(as_json=args.json)
