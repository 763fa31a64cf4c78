"""The whole plugin contract of the dsh harness.

Every hook a plugin may implement is declared here, and nowhere else. Implementations may be
plain functions or coroutines: the harness awaits whatever awaitable a hook returns (see
``PluginHost.call``). Hook names start with ``dsh_`` so a plugin module can hold helpers freely.

Built-in behaviour (storage backends, the JSONL session store, the OpenAI-compatible provider,
the web UI) is implemented through these very hooks in ``dsh_harness.default_plugins``.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT_NAME = "dsh"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def dsh_register_storage_backends(register: Any, config: Any) -> None:
    """Register storage backends by name.

    Fires once, when the harness builds its storage service (before any domain is opened).
    ``register(name, factory)`` adds a backend; ``factory(storage_dir: Path)`` returns a
    ``StorageBackend``. ``config`` is the deployment config (a backend's settings, such as
    ``storage.dsn``; an implementation may leave the argument out). Built-ins register
    ``json``, ``sqlite`` and ``postgres``. Return nothing; every implementation runs (side
    effect). Registering a name twice is an error naming both.
    """


@hookspec
def dsh_register_session_stores(register: Any, config: Any) -> None:
    """Register session stores (where session event logs persist) by name.

    Fires once, when the harness builds its session service. ``register(name, factory)``;
    ``factory(home: Path)`` returns a ``SessionStore``. ``config`` is the deployment config
    (e.g. ``sessions.dsn``; may be left out). Built-ins: ``jsonl``, ``postgres``. Return nothing;
    every implementation runs (side effect). A store may implement the optional ``mark`` and
    ``load_after`` so a session resumed after an eviction reads only what was appended since
    (without them every resume loads the whole log).
    """


@hookspec
def dsh_register_llm_providers(register: Any) -> None:
    """Register LLM provider kinds by name.

    Fires once, when the harness builds its LLM service. ``register(kind, factory)``;
    ``factory(name, provider_config)`` returns an ``LLMProvider``. Built-in: ``openai``
    (OpenAI-compatible endpoints, DeepSeek by default). Return nothing (side effect).
    """


@hookspec
def dsh_storage_domains() -> Any:
    """Declare the storage domains this plugin owns.

    Fires when the harness collects domain declarations (at start-up and for ``dsh storage``
    commands). Return a ``DomainSpec`` or a list of them (or ``None``). Results of all
    plugins are concatenated; two plugins declaring the same domain name is an error.
    """


@hookspec
def dsh_plugin_config_models() -> Any:
    """Declare the pydantic model that validates a plugin instance's config block.

    Fires when the harness validates ``dsh.toml`` (start-up and ``dsh config check``). Return a
    mapping ``{plugin_name: model_class}``. Results are merged; the model validates every
    enabled instance of that plugin and its errors are reported with the instance's field path.
    """


@hookspec(firstresult=True)
def dsh_agent_world(harness: Any, session_id: str, inputs: Any) -> Any:
    """Say what the agent of a session is: its ``AgentWorld``.

    Fires on **every** agent create and resume, whichever code path asks (the plugin's own
    runner, the CLI, the web UI), so a session always gets the same world. Return an
    ``AgentWorld`` (one complete system-prompt section, scoped tools, and whether global tools
    are hidden) for session ids you own, else ``None``. First non-``None`` result wins.

    ``inputs`` are the per-turn world inputs the code path opening the agent handed to
    ``harness.agents.get_or_open(..., inputs=...)`` (or ``create``/``resume``), passed through
    untouched: the reviewer hands its trusted instructions and the model of the attempt, so
    nothing is parked in shared state for the hook to find. ``None`` when the session is opened
    without a turn of its owner (the web UI, the CLI): build the world from what you stored.
    The same inputs (or the same stored facts) must give the same world, byte for byte — a
    resumed session replays onto the system prompt it was started with. An implementation
    may leave ``inputs`` out of its signature.
    """


@hookspec(firstresult=True)
def dsh_session_title(harness: Any, session: Any) -> Any:
    """Pin the title of a session.

    Fires when a session is created or resumed (listings show the title stored then). ``session`` is
    the session's metadata (id, created time). Return a string to pin the title (automatic
    titles never override a pinned one) or ``None``. First non-``None`` result wins.
    """


@hookspec(firstresult=True)
def dsh_session_group(harness: Any, session: Any) -> Any:
    """Place a session in the web UI's group tree.

    Fires when the session catalog (web UI index, ``/api/sessions``) summarizes a session;
    ``session`` is its header (id, created time, meta). Return a list of labels from the
    outermost group inwards (the reviewer: ``[account, "owner/repo"]``) or ``None`` for the
    ungrouped list. First non-``None`` result wins. Must be cheap: it runs for every session.
    """


@hookspec(firstresult=True)
def dsh_session_link(harness: Any, session: Any) -> Any:
    """An external link for a session (the reviewer: the pull request's URL).

    Fires with the group hook, for the same ``session`` header. Return an ``http(s)`` URL or
    ``None``; other schemes are dropped by the web UI. First non-``None`` result wins.
    """


@hookspec
def dsh_validate(harness: Any) -> Any:
    """Report what would stop this plugin's work, before anything starts.

    Fires in ``dsh config check`` and at the start of ``dsh run`` (one validation for both), for
    enabled plugins, after the config file and every plugin block passed their models. Check
    what a model cannot: credentials present, key files readable, models' providers usable,
    names unique across instances. Must not touch the network or write state. Return a list of
    ``"<field path>: <message>"`` strings (never a secret value) or ``None``; the lists of all
    implementations are joined, and any entry makes the check fail and ``dsh run`` exit 1.
    """


@hookspec
def dsh_startup(harness: Any) -> Any:
    """Start background work.

    Fires once after the harness has opened its services, in ``dsh run``. May be a coroutine;
    the harness awaits every implementation in call order. With ``harness.run_once`` set
    (``dsh run --once``) a plugin does one pass of its work before returning instead of
    starting loops, and returns a list of what failed in that pass (``"<what>: <why>"``, no
    secrets) or ``None``; any entry makes ``dsh run --once`` print it and exit 1. A raised error
    aborts start-up (already started plugins are shut down).
    """


@hookspec
def dsh_shutdown(harness: Any) -> Any:
    """Stop background work started in ``dsh_startup``.

    Fires once when ``dsh run`` stops (signal, ``--once`` finished, or a start-up error). May be
    a coroutine; every implementation is awaited even if another one raised; errors are logged.
    """


@hookspec
def dsh_register_commands(cli: Any) -> None:
    """Add subcommands to the ``dsh`` command line.

    Fires while the CLI is built, for every installed plugin that is not blocked — also one
    without an enabled instance, so its commands exist from any directory. ``cli.add_command(
    name, help)`` returns an ``argparse.ArgumentParser``; set its handler with
    ``parser.set_defaults(handler=fn)`` where ``fn(harness, args)`` may be a coroutine and
    returns an exit code. A handler runs only when a config file was found, unless the parser
    also sets ``needs_config=False`` (e.g. an offline demo) or a function of the parsed arguments
    returning whether this invocation needs one. Every implementation runs (side
    effect).
    """


@hookspec
def dsh_register_web_routes(router: Any) -> None:
    """Add pages and API routes to the harness web UI.

    Fires once when the web app is built (``dsh web``, or ``dsh run`` with ``[web] enabled``).
    ``router.add_page(path, endpoint, title, home=False)`` adds a navigable page (``home``:
    also shown at ``/``, first in the navigation; the sessions index stays at ``/sessions``);
    ``router.add_route(path, endpoint, methods)`` a plain route;
    ``router.add_template_dir(path)`` makes Jinja templates (which may extend ``base.html``)
    available. Endpoints are Starlette endpoints; they answer with ``await
    router.render(request, template, **context)`` (rendered in a worker thread) or
    ``router.json(data)``, which redact configured secrets and escape; the app adds the
    security headers. ``router.harness`` is the harness. Every implementation runs
    (side effect).
    """


@hookspec
def dsh_web_session_facts(harness: Any, session: Any, facts: dict, events: list) -> None:
    """Fold a session's new events into plugin facts shown by the web UI.

    Fires when the web catalog reads events it had not seen: the whole log once, then only the
    lines appended since (so it must be cheap and must not read files or the network).
    ``session`` is the session header, ``events`` the new events in order, ``facts`` a
    JSON-serializable dict kept with the session's digest (persisted in the web index) that the
    implementation updates in place, e.g. under its own key (the reviewer: ``facts["pr"]``);
    keys starting with ``_`` (top level or one level down) are fold state, left out of APIs.
    Implementations ignore sessions that are not theirs; every implementation runs; the
    return value is ignored. Facts appear in ``/api/sessions`` rows and reach plugin pages
    through ``router.catalog``.
    """


@hookspec(firstresult=True)
def dsh_web_session_view(harness: Any, session: Any, events: list, facts: dict) -> Any:
    """A plugin's own presentation on top of a session page.

    Fires when ``/sessions/<id>`` is rendered, with the session header, all its events so far
    and its facts (see ``dsh_web_session_facts``). Return ``None`` to leave the generic page,
    or ``{"template": name, "context": {...}, "title": text}``: that template (from a directory
    added with ``router.add_template_dir``) is rendered above the raw turns, which are then
    folded in a ``<details>``; the optional ``title`` replaces the session's title as the
    page's heading (the reviewer: ``owner/repo#n: <PR title>``). First non-``None`` result
    wins. Runs in a worker thread while the page renders; it must not block on I/O.
    """
