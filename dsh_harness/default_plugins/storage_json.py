"""Built-in plugin: the ``json`` storage backend."""

from pathlib import Path

from ..hookspecs import hookimpl
from ..storage.json_backend import JsonBackend


@hookimpl
def dsh_register_storage_backends(register):
    register("json", lambda directory: JsonBackend(Path(directory)))
