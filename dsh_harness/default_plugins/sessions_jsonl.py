"""Built-in plugin: the ``jsonl`` session store (one file per session)."""

from pathlib import Path

from ..hookspecs import hookimpl
from ..sessions.jsonl_store import JsonlSessionStore


@hookimpl
def dsh_register_session_stores(register):
    register("jsonl", lambda home: JsonlSessionStore(Path(home) / "sessions"))
