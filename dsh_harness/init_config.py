"""``dsh init``: write a commented ``dsh.toml`` to start from, from the installed packages alone.

The example comes from an installed plugin that ships one (``example_config`` in its
``plugin.toml``), so a wheel installed anywhere can start a deployment without a source
checkout. With no such plugin installed, a harness-only example is written.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from .errors import DshError
from .plugins import Discovered

HARNESS_EXAMPLE = """\
# dsh deployment config. `${VAR}` and `${VAR:-default}` read the environment, so tokens never
# need to live in this file. Check it with `dsh config check`.

# Where sessions, storage and logs live (relative paths are relative to this file).
home = ".dsh"
# <provider>/<model>; the provider is a built-in one or defined under [providers].
default_model = "deepseek/deepseek-v4-flash"

[storage]
backend = "sqlite"          # or "json"

[web]
enabled = false
host = "127.0.0.1"
port = 8765

# Enable a plugin with a block per instance, e.g.
# [plugins.my-instance]
# plugin = "<installed plugin name>"   # see `dsh plugins`
"""


def examples(discovered: list[Discovered]) -> dict[str, str]:
    """Installed plugin name -> the text of the example config it ships."""
    found: dict[str, str] = {}
    for d in discovered:
        if d.manifest is None or not d.manifest.example_config:
            continue
        package = d.module.__name__.split(".")[0]
        try:
            found[d.name] = (resources.files(package) / d.manifest.example_config
                             ).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise DshError(f"plugin {d.name!r} names example_config "
                           f"{d.manifest.example_config!r} but does not ship it ({exc})") from None
    return found


def example_text(discovered: list[Discovered], plugin: str | None) -> tuple[str, str]:
    """(where it came from, the example text) for ``plugin`` or the only one installed."""
    found = examples(discovered)
    if plugin is not None:
        if plugin not in found:
            raise DshError(f"no installed plugin named {plugin!r} ships an example config "
                           f"(ones that do: {', '.join(sorted(found)) or 'none'})")
        return f"{plugin}'s example", found[plugin]
    if len(found) > 1:
        raise DshError(f"several installed plugins ship an example config "
                       f"({', '.join(sorted(found))}); pick one with --plugin NAME")
    if found:
        (name, text), = found.items()
        return f"{name}'s example", text
    return "the harness example", HARNESS_EXAMPLE


def write_example(path: Path, text: str, *, force: bool = False) -> None:
    """Write ``text`` to ``path`` (mode 0600: the file may later hold a token). An existing
    file is never replaced without ``force``: it is the operator's."""
    if path.exists() and not force:
        raise DshError(f"{path} already exists; it was left untouched (pass --force to "
                       "replace it, or --config OTHER.toml to write elsewhere)")
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (0 if force else os.O_EXCL)
    with open(os.open(path, flags, 0o600), "w", encoding="utf-8") as fh:
        fh.write(text)
