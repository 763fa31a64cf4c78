"""The ``dsh`` command line. Plugins add subcommands through ``dsh_register_commands``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import logging
import os
import select
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import DEFAULT_CONFIG_PATH, DeploymentConfig, LoadedConfig, load_config
from .errors import ConfigError, DshError
from .harness import HARNESS_VERSION, Harness
from .home_lock import HomeLock
from .init_config import example_text, write_example

log = logging.getLogger("dsh")


class CommandRegistry:
    """What ``dsh_register_commands`` receives: a way to add top-level subcommands."""

    def __init__(self, subparsers: argparse._SubParsersAction):
        self._subparsers = subparsers
        self.names: set[str] = set()

    def add_command(self, name: str, help: str) -> argparse.ArgumentParser:
        if name in self.names:
            raise DshError(f"command {name!r} is registered twice")
        self.names.add(name)
        return self._subparsers.add_parser(name, help=help, description=help)


def add_subcommand(subparsers: argparse._SubParsersAction, name: str,
                   help: str) -> argparse.ArgumentParser:
    """A nested subcommand whose ``--help`` page repeats its one-line description."""
    return subparsers.add_parser(name, help=help, description=help)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True))


# -- built-in commands ---------------------------------------------------------------------

def cmd_plugins(harness: Harness, args: argparse.Namespace) -> int:
    listing = [p.as_dict() for p in harness.plugin_listing()]
    if args.json:
        _print_json(listing)
        return 0
    for p in listing:
        state = "enabled" if p["enabled"] else "installed, not enabled"
        print(f"{p['name']} {p['version'] or ''} ({p['origin']}, {state})".replace("  ", " "))
        print(f"    module: {p['module']}")
        print(f"    hooks:  {', '.join(p['hooks']) or '-'}")
        if p["error"]:
            print(f"    error:  {p['error']}")
    return 0


def cmd_init(harness: Harness, args: argparse.Namespace) -> int:
    source, text = example_text(harness.discovered, args.plugin)
    if args.print:
        sys.stdout.write(text)
        return 0
    path = args.config or DEFAULT_CONFIG_PATH
    write_example(path, text, force=args.force)
    again = f"dsh --config {path} " if args.config else "dsh "
    print(f"wrote {path} from {source}: edit it (or set the variables it reads), then run "
          f"`{again}config check`")
    return 0


def cmd_config_check(harness: Harness, args: argparse.Namespace) -> int:
    harness.validate()  # the same validation dsh run does before it starts anything
    instances = [f"{iid} ({plugin})" for iid, plugin in harness.instances.items()]
    print(f"{harness.loaded.source}: OK")
    print(f"  home: {harness.home}")
    print(f"  storage: {harness.config.storage.backend}"
          + "".join(f", {d} -> {b}" for d, b in harness.config.storage.routes.items()))
    print(f"  plugin instances: {', '.join(instances) or 'none'}")
    return 0


async def cmd_storage_ls(harness: Harness, args: argparse.Namespace) -> int:
    storage = harness.storage
    rows = []
    for name, spec in sorted(storage.specs.items()):
        domain = await storage.domain(name)
        counts = {t: len(await domain.all(t)) for t in spec.tables}
        rows.append({"domain": name, "version": spec.version,
                     "backend": storage.backend_for(name), "tables": counts})
    if getattr(args, "json", False):
        _print_json(rows)
    else:
        for r in rows:
            tables = ", ".join(f"{t}={n}" for t, n in r["tables"].items())
            print(f"{r['domain']} v{r['version']} on {r['backend']}: {tables}")
    return 0


async def cmd_storage_dump(harness: Harness, args: argparse.Namespace) -> int:
    storage = harness.storage
    domain = await (storage.open_on(args.domain, args.backend) if args.backend
                    else storage.domain(args.domain))
    try:
        data = {t: {k: json.loads(v) for k, v in rows.items()}
                for t, rows in (await domain.export()).items()}
    finally:
        if args.backend:
            await domain.close()
    if args.json:
        _print_json({"domain": args.domain, "version": domain.spec.version, "tables": data})
    else:
        for table, rows in data.items():
            for key, value in rows.items():
                print(f"{table}\t{key}\t{json.dumps(value, sort_keys=True, ensure_ascii=False)}")
    return 0


async def cmd_storage_copy(harness: Harness, args: argparse.Namespace) -> int:
    # A running dsh run would write its own state back over the copy (and hold the old store
    # open): a copy takes the home lock, so it is refused while dsh run is up, and vice versa.
    with HomeLock(harness.home, "dsh storage copy"):
        report = await harness.storage.copy(args.domain, args.source, args.target,
                                            force=args.force)
    if report.backup is not None:
        print(f"backed up the replaced {args.target} records to {report.backup}")
    print(f"copied {report.records} records of {args.domain} from {args.source} to "
          f"{args.target}; verified record by record")
    if harness.storage.backend_for(args.domain) != args.target:
        print(f"note: {args.domain} is still routed to {harness.storage.backend_for(args.domain)}"
              f"; set storage.backend or storage.routes.{args.domain} = \"{args.target}\" to use"
              " the copy")
    return 0


async def cmd_run(harness: Harness, args: argparse.Namespace) -> int:
    if not harness.instances and not harness.config.web.enabled:
        raise DshError(f"{harness.loaded.source}: nothing to run: no plugin instance is enabled "
                       "(add a [plugins.<id>] block) and [web] is not enabled")
    harness.run_once = args.once
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # Validated before the lock: a config that cannot run must not touch the home.
    harness.validate()
    # One dsh run per home (refused at once, naming the holder) unless everything durable is
    # in a shared database: then any number of replicas run, coordinated by its leases.
    shared = harness.leases.shared and harness.sessions.store.shared
    with contextlib.nullcontext() if shared else HomeLock(harness.home):
        if shared:
            log.info("shared storage and sessions: running as replica %s", harness.replica_id)
        failures = await harness.startup()
        try:
            if not args.once:
                log.info("dsh running; press Ctrl-C to stop")
                await stop.wait()
        finally:
            await harness.shutdown()
    if failures:
        # cron runs `dsh run --once`: a failed pass must show in its exit code.
        for failure in failures:
            print(f"dsh: run: {failure}", file=sys.stderr)
        return 1
    return 0


def say_error(error: object) -> None:
    """An error on stderr, every problem on a line starting ``dsh:`` (a config with several
    problems lists one a line); indented lines continue the problem above them."""
    for line in str(error).splitlines() or [""]:
        print(line if line[:1].isspace() else f"dsh: {line}", file=sys.stderr)


async def cmd_sessions_list(harness: Harness, args: argparse.Namespace) -> int:
    summaries = await harness.sessions.summaries()
    if args.json:
        _print_json([s.model_dump(mode="json") | {"cache_hit_pct": round(s.cache_hit_pct, 2)}
                     for s in summaries])
        return 0
    if not summaries:
        # Say so (on stderr, so a script reading the list still gets no lines): an empty
        # output reads like a hang or a wrong home.
        print(f"dsh: no sessions in {harness.home}", file=sys.stderr)
        return 0
    for s in summaries:
        u = s.usage
        print(f"{s.id}\t{s.title or '-'}\tturns={s.turns}\tin={u.uncached_input} "
              f"cached={u.cache_read} out={u.output} hit={s.cache_hit_pct:.1f}% "
              f"${u.cost_usd:.6f}\t{s.last_activity.isoformat(timespec='seconds')}")
    return 0


async def cmd_sessions_show(harness: Harness, args: argparse.Namespace) -> int:
    log = await harness.sessions.read(args.session_id)
    if args.json:
        _print_json({"header": log.header.model_dump(mode="json"),
                     "events": [e.model_dump(mode="json") for e in log.events],
                     "notes": log.notes})
        return 0
    print(f"session {log.header.id} (created {log.header.created_at.isoformat()})")
    for note in log.notes:
        print(f"  note: {note}")
    for e in log.events:
        # A failed attempt stays in the log for people; the model never sees it again.
        failed = " (failed attempt, not replayed)" if getattr(e, "committed", True) is False else ""
        print(f"  #{e.seq} {e.type}{failed}: {_event_line(e)}")
    return 0


async def cmd_sessions_copy(harness: Harness, args: argparse.Namespace) -> int:
    from .sessions.copy import copy_sessions

    factories = harness.session_store_factories()
    for label, name in (("--from", args.source), ("--to", args.target)):
        if name not in factories:
            raise ConfigError(f"sessions copy: {label}: unknown session store {name!r} "
                              f"(available: {', '.join(sorted(factories))})")
    # As for storage copy: a running dsh run appends to the logs a copy would replace or
    # extend under it, so the copy takes the home lock (refused while dsh run is up).
    with HomeLock(harness.home, "dsh sessions copy"):
        source = factories[args.source](harness.home)
        try:
            target = factories[args.target](harness.home)
            try:
                if target.shared:
                    await _refuse_live_replicas(harness, args.target)
                report = await copy_sessions(source, target, ids=args.session_ids,
                                             force=args.force,
                                             backup_dir=harness.home / "backups" / "sessions",
                                             backups_keep=harness.config.storage.backups_keep)
            finally:
                await target.close()
        finally:
            await source.close()
    print(f"copied {len(report.copied)} sessions from {args.source} to {args.target}; "
          f"{len(report.unchanged)} already identical; verified byte for byte")
    if report.replaced:
        print(f"replaced {len(report.replaced)} differing sessions; their logs were saved "
              f"under {report.backups}")
    if report.dropped_tails:
        print(f"note: torn final lines ({report.dropped_tails} bytes) were left behind")
    if harness.config.sessions.store != args.target:
        print(f"note: sessions.store is still {harness.config.sessions.store}; set it to "
              f"\"{args.target}\" to use the copy")
    return 0


async def _refuse_live_replicas(harness: Harness, target: str) -> None:
    """Replicas on other hosts write a shared store's logs; the home lock cannot see them."""
    from .sessions.copy import LIVE_HEARTBEAT_S, live_writers

    writers = await live_writers(harness.leases)
    if writers:
        shown = ", ".join(writers[:5]) + (f" and {len(writers) - 5} more"
                                           if len(writers) > 5 else "")
        raise DshError(f"sessions copy: {len(writers)} replica(s) are running on the "
                       f"{target} store's database ({shown}: a heartbeat within "
                       f"{LIVE_HEARTBEAT_S:.0f} s or a lease held) and write its session "
                       "logs; stop every dsh run that uses it, then copy again; nothing "
                       "was copied")


def _event_line(e: Any) -> str:
    data = e.model_dump(mode="json", exclude={"seq", "at", "type"})
    text = json.dumps(data, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 300 else text[:300] + "..."


def version_text(harness: Harness | None) -> str:
    plugins = sorted({(d.name, d.version) for d in harness.discovered}) if harness else []
    return f"dsh {HARNESS_VERSION}" + "".join(f", {n} {v}" for n, v in plugins)


def build_parser(harness: Harness | None = None
                 ) -> tuple[argparse.ArgumentParser, CommandRegistry]:
    parser = argparse.ArgumentParser(prog="dsh", description="The dsh agent harness.")
    parser.add_argument("--version", action="version", version=version_text(harness))
    parser.add_argument("--config", type=Path, default=None,
                        help="deployment config (default: ./dsh.toml)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    registry = CommandRegistry(sub)

    p = registry.add_command("plugins", "list plugins, their origin and hooks")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_plugins, needs_config=False)

    p = registry.add_command("init", "write a commented dsh.toml to start from (or --config "
                             "PATH), from the example an installed plugin ships")
    p.add_argument("--plugin", default=None,
                   help="whose example to write when several installed plugins ship one")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.add_argument("--print", action="store_true", help="print the example instead of writing it")
    p.set_defaults(handler=cmd_init, needs_config=False)

    p = registry.add_command("config", "inspect the deployment config")
    csub = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    c = add_subcommand(csub, "check", "validate dsh.toml and every enabled plugin's block")
    c.set_defaults(handler=cmd_config_check)

    p = registry.add_command("storage", "inspect storage domains and move them between backends")
    ssub = p.add_subparsers(dest="storage_command", metavar="SUBCOMMAND", required=True)
    s = add_subcommand(ssub, "ls", "declared domains, their backend and record counts")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_storage_ls)
    s = add_subcommand(ssub, "dump", "print every record of a domain")
    s.add_argument("domain")
    s.add_argument("--backend", help="read this backend instead of the routed one")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_storage_dump)
    s = add_subcommand(ssub, "copy", "copy a domain between backends and verify it")
    s.add_argument("domain")
    s.add_argument("--from", dest="source", required=True)
    s.add_argument("--to", dest="target", required=True)
    s.add_argument("--force", action="store_true",
                   help="replace a destination that already holds records (after a backup)")
    s.set_defaults(handler=cmd_storage_copy)

    p = registry.add_command("sessions", "list and read session logs (never resumes them), copy "
                             "them between stores")
    ssub = p.add_subparsers(dest="sessions_command", metavar="SUBCOMMAND", required=True)
    s = add_subcommand(ssub, "list", "every session with title, turns, tokens and cost")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_sessions_list)
    s = add_subcommand(ssub, "show", "the events of one session")
    s.add_argument("session_id")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_sessions_show)
    s = add_subcommand(ssub, "copy", "copy session logs between stores, byte for byte")
    s.add_argument("session_ids", nargs="*", metavar="SESSION_ID",
                   help="only these sessions (default: all of the source)")
    s.add_argument("--from", dest="source", required=True)
    s.add_argument("--to", dest="target", required=True)
    s.add_argument("--force", action="store_true",
                   help="replace target logs that differ (after a backup)")
    s.set_defaults(handler=cmd_sessions_copy)

    p = registry.add_command("run", "start every enabled plugin until SIGINT/SIGTERM")
    p.add_argument("--once", action="store_true", help="one pass of each plugin's work, then exit")
    p.set_defaults(handler=cmd_run)
    return parser, registry


NOISY_LOGGERS = ("httpx", "httpx2", "httpcore", "openai", "mcp", "uvicorn", "aiosqlite")


def _setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if verbosity < 2:
        # One line per HTTP request drowns what the bot did; -vv shows them.
        for name in NOISY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


async def _invoke(handler: Any, harness: Harness, args: argparse.Namespace) -> int:
    try:
        result = handler(harness, args)
        if inspect.isawaitable(result):
            result = await result
        return int(result or 0)
    finally:
        if handler is not cmd_run:
            await harness.close()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", type=Path, default=None)
    pre.add_argument("-v", "--verbose", action="count", default=0)
    known, rest = pre.parse_known_args(argv)
    # Long-running commands log what they do (reviews, polls) unless told otherwise.
    serving = next((a for a in rest if not a.startswith("-")), "") in ("run", "web")
    _setup_logging(known.verbose or (1 if serving else 0))

    harness: Harness | None = None
    setup_error: DshError | None = None
    try:
        harness = Harness(load_config(known.config))
    except DshError as exc:
        setup_error = exc
        try:  # a broken dsh.toml must not hide the commands that need none (the demo)
            harness = Harness(LoadedConfig(source="(defaults)", base_dir=Path.cwd(),
                                           config=DeploymentConfig(), found=False))
        except DshError:
            harness = None
    parser, registry = build_parser(harness)
    try:
        if harness is not None:
            # Every installed plugin's commands, enabled or not: the demo needs no config.
            harness.register_commands(registry)
    except DshError as exc:
        setup_error = setup_error or exc
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        if setup_error:
            say_error(setup_error)
        parser.print_help()
        return 2 if setup_error else 0
    needs_config = getattr(args, "needs_config", True)
    if callable(needs_config):  # e.g. dsh web --generate-token needs none
        needs_config = needs_config(args)
    if harness is None or (setup_error and needs_config):
        say_error(setup_error)
        return 1
    if needs_config and not harness.loaded.found:
        # Acting on a deployment without its config would idle, or create .dsh/ here.
        say_error(harness.loaded.missing_message(_command_name(args)))
        return 1
    try:
        return asyncio.run(_invoke(args.handler, harness, args))
    except DshError as exc:
        say_error(exc)
        return 1
    except BrokenPipeError as exc:
        if _stdout_closed():   # `dsh sessions list | head`: the reader has all it wanted
            return 141         # what a shell reports for a writer stopped by SIGPIPE
        log.debug("OSError", exc_info=True)
        say_error(f"{exc} (run with -vv for the traceback)")
        return 1
    except OSError as exc:  # a port, a permission, a full disk: the operator's to fix
        log.debug("OSError", exc_info=True)
        say_error(f"{exc} (run with -vv for the traceback)")
        return 1
    except KeyboardInterrupt:
        return 130


def _stdout_closed() -> bool:
    """Whether standard output's reader went away; if so, point it at /dev/null, so the
    interpreter's flush at exit does not fail on it once more."""
    try:
        fd = sys.stdout.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        # A pipe's write end whose reader closed reports POLLERR.
        if not any(ev & select.POLLERR for _, ev in poll.poll(0)):
            return False
    except (OSError, ValueError):
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return True


def _command_name(args: argparse.Namespace) -> str:
    words = [args.command, *(v for k, v in vars(args).items()
                             if k.endswith("_command") and k != "command" and v)]
    return "dsh " + " ".join(str(w) for w in words if w)


if __name__ == "__main__":
    raise SystemExit(main())
