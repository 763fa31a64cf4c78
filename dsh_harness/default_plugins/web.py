"""Built-in plugin: the web UI — served by ``dsh run`` when ``[web] enabled``, and ``dsh web``."""

from __future__ import annotations

import asyncio
import signal
import sys

from pydantic import ValidationError

from ..config import WebConfig
from ..errors import ConfigError
from ..hookspecs import hookimpl
from ..validation import error_lines
from ..web import signins
from ..web.auth import generate_token
from ..web.server import WebServer

STATE_KEY = "dsh.web"


@hookimpl
def dsh_storage_domains():
    """Web sign-ins, shared by the replicas on one database (``web/signins.py``)."""
    return [signins.domain_spec()]


@hookimpl
async def dsh_startup(harness):
    if harness.config.web.enabled and not harness.run_once:
        server = WebServer(harness)
        await server.start()
        harness.plugin_state[STATE_KEY] = server


@hookimpl
async def dsh_shutdown(harness):
    server = harness.plugin_state.pop(STATE_KEY, None)
    if server is not None:
        await server.stop()


@hookimpl
def dsh_register_commands(cli):
    parser = cli.add_command("web", "serve the web UI alone (read-only; works beside dsh run)")
    parser.add_argument("--host", help="override web.host")
    parser.add_argument("--port", type=int, help="override web.port")
    parser.add_argument("--generate-token", action="store_true",
                        help="print a new random access token for web.auth_token and exit")
    # Printing a new token needs no deployment; serving does.
    parser.set_defaults(handler=cmd_web, needs_config=lambda args: not args.generate_token)


async def cmd_web(harness, args) -> int:
    if args.generate_token:
        print(generate_token())
        print("Set it as web.auth_token, e.g. export DSH_WEB_TOKEN=<that> and "
              'auth_token = "${DSH_WEB_TOKEN}" under [web].', file=sys.stderr)
        return 0
    web = harness.config.web
    updates = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    if updates:
        try:  # validated like the config file (model_copy alone would accept port 99999)
            web = WebConfig.model_validate({**web.model_dump(), **updates})
        except ValidationError as exc:
            raise ConfigError("; ".join(f"--{line}" for line in error_lines(exc))) from None
        harness.config = harness.config.model_copy(update={"web": web})
    server = WebServer(harness)
    await server.start()
    print(f"dsh web UI on http://{harness.config.web.host}:{server.port} (Ctrl-C to stop)",
          flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()
    return 0
