"""What ``dsh_register_web_routes`` receives: a way for plugins to add pages and routes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.routing import Route

from ..errors import PluginError


class WebRouter:
    def __init__(self, harness: Any):
        self.harness = harness
        self.routes: list[Route] = []
        self.pages: list[tuple[str, str]] = []
        self.template_dirs: list[Path] = []
        # The page ``/`` shows (a plugin's ``add_page(..., home=True)``; the first one wins),
        # else the sessions index. The sessions index is always at ``/sessions`` too.
        self.home: tuple[str, Callable[..., Any]] | None = None
        # Set by the web app before plugins' endpoints run: render(request, template, **ctx)
        # and json(data); both redact configured secrets and add the security headers.
        self.render: Callable[..., Any] | None = None
        self.json: Callable[..., Any] | None = None
        # The sessions index (``await router.catalog.entries()``: digests with plugin facts,
        # newest first), for plugin pages that list sessions their own way.
        self.catalog: Any = None

    def _check(self, path: str) -> None:
        if not path.startswith("/") or path == "/" or path.startswith(
                ("/api/sessions", "/static", "/login", "/sessions")):
            raise PluginError(f"web route {path!r} must start with / and not shadow the "
                              "harness's own routes")
        if any(r.path == path for r in self.routes):
            raise PluginError(f"web route {path!r} is registered twice")

    def add_page(self, path: str, endpoint: Callable[..., Any], title: str,
                 home: bool = False) -> None:
        """A navigable page (listed in the top navigation); ``home``: also what ``/`` shows,
        the page a user opening the UI expects first (listed first)."""
        self._check(path)
        self.routes.append(Route(path, endpoint, methods=["GET"]))
        if home and self.home is None:
            self.home = (path, endpoint)
            self.pages.insert(0, (path, title))
        else:
            self.pages.append((path, title))

    def add_route(self, path: str, endpoint: Callable[..., Any],
                  methods: tuple[str, ...] = ("GET",)) -> None:
        """A plain route (e.g. a JSON API)."""
        self._check(path)
        self.routes.append(Route(path, endpoint, methods=list(methods)))

    def add_template_dir(self, path: Path) -> None:
        self.template_dirs.append(Path(path))
