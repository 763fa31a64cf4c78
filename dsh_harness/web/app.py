"""The harness web UI: sessions index, session pages, settings, plugin pages, a JSON API.

Read-only over the session logs, so it can run beside ``dsh run`` (``dsh web``) or inside it
(``[web] enabled``). Configured secrets are redacted from the raw text before escaping
(``redact.Redactor``); untrusted text reaches pages only through Jinja's autoescaping or safe
Markdown; ``shield.Shield`` checks the Host header and puts the security headers on every
response; templates render in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import DshError
from . import auth, render, signins
from .catalog import CatalogEntry, IndexBuilding, LiveLog, SessionCatalog, public_facts
from .digest import DigestError
from .redact import Redactor
from .router import WebRouter
from .shield import Shield, allowed_hosts

PAGE_SIZE = 50
CHUNK_CACHE = 256
EVENT_PAGE = 200
HIDDEN_EVENTS = {"step_start", "step_end", "tool_call"}
MAX_ID = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
NOT_FOUND = "No session with that id."
STATIC_DIR = Path(__file__).with_name("static")


def static_version() -> str:
    """A short hash of the static files: pages link ``/static/x?v=<it>``, which the browser
    may keep for a year, and an upgrade that changes a file changes every link to it."""
    digest = hashlib.sha256()
    for path in sorted(STATIC_DIR.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def valid_session_id(session_id: str) -> bool:
    """Checked before any file access: ids that could not name a stored session are 404."""
    return (0 < len(session_id) <= MAX_ID and not session_id.startswith(".")
            and not _CONTROL.search(session_id) and len(quote(session_id, safe="")) <= 240)


class WebApp:
    def __init__(self, harness: Any):
        self.harness = harness
        self.catalog = SessionCatalog(harness)
        self.router = WebRouter(harness)
        self.router.catalog = self.catalog
        harness.plugins.call("dsh_register_web_routes", router=self.router)
        loaders = [PackageLoader("dsh_harness.web", "templates"),
                   *(FileSystemLoader(str(d)) for d in self.router.template_dirs)]
        self.redactor: Redactor = harness.redactor
        red = self.redactor.text
        finalize = self.redactor.finalize
        self.env = Environment(loader=ChoiceLoader(loaders),
                               finalize=lambda v: render.neutral(finalize(v)),
                               autoescape=select_autoescape(default=True, default_for_string=True))
        # Filters that transform text redact their input first (escaping happens after them).
        self.env.filters.update(markdown=lambda t: render.markdown(red(t or "")),
                                pretty_args=lambda a: render.pretty_args(red(a)),
                                usage_line=render.usage_line, urlq=lambda s: quote(s, safe=""),
                                weburl=render.web_url,
                                when=render.when)
        self.env.globals.update(preview=render.preview, EVENT_PAGE=EVENT_PAGE,
                                static_v=static_version(),
                                turn_chart=render.turn_chart, day_chart=render.day_chart,
                                cost_chart=render.cost_chart,
                                HIDDEN_EVENTS=HIDDEN_EVENTS)
        self.router.render = self.render
        self._chunks: OrderedDict[tuple, Markup] = OrderedDict()
        self._chunks_lock = threading.Lock()
        self.router.json = self.json

    # -- responses --------------------------------------------------------------------------

    def render_sync(self, request: Request, template: str, status: int = 200, **ctx: Any
                    ) -> HTMLResponse:
        html = self.env.get_template(template).render(
            request=request, nav_pages=self.router.pages, path=request.url.path,
            home=self.router.home[0] if self.router.home else "/sessions", **ctx)
        return HTMLResponse(self.redactor.scrub(html), status_code=status)

    async def render(self, request: Request, template: str, status: int = 200, **ctx: Any
                     ) -> HTMLResponse:
        """Rendered in a worker thread: a big page must not stall other requests."""
        return await asyncio.to_thread(self.render_sync, request, template, status, **ctx)

    def json(self, data: Any, status: int = 200) -> Response:
        text = json.dumps(self.redactor.data(data), ensure_ascii=False, default=str)
        return Response(self.redactor.scrub(text), status_code=status,
                        media_type="application/json")

    def events_html(self, log: LiveLog, events: list) -> Markup:
        """Rendered events, cached: events never change, and 50 viewers of one live session
        ask for the same ranges (runs in a worker thread)."""
        if not events:
            return Markup("")
        key = (log.header.id, events[0].seq, events[-1].seq, len(events))
        with self._chunks_lock:
            hit = self._chunks.get(key)
            if hit is not None:
                self._chunks.move_to_end(key)
                return hit
        html = Markup(self.redactor.scrub(self.env.get_template("events.html").render(
            events=events, log=log)))
        with self._chunks_lock:
            self._chunks[key] = html
            while len(self._chunks) > CHUNK_CACHE:
                self._chunks.popitem(last=False)
        return html

    async def not_found(self, request: Request, message: str = NOT_FOUND) -> Response:
        return await self.render(request, "error.html", status=404, message=message)

    # -- sessions index ----------------------------------------------------------------------

    async def _listing(self, request: Request) -> dict[str, Any]:
        entries = await self.catalog.entries()
        q = request.query_params.get("q", "").strip()
        group = request.query_params.get("group", "").strip()
        try:
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            page = 1
        shown = entries if not (q or group) else [
            e for e in entries
            if (not q or e.matches(q)) and (not group or " / ".join(e.group).startswith(group))]
        pages = max(1, math.ceil(len(shown) / PAGE_SIZE))
        page = min(page, pages)
        return {"entries": shown[(page - 1) * PAGE_SIZE: page * PAGE_SIZE], "total": len(shown),
                "all": len(entries), "page": page, "pages": pages, "q": q, "group": group,
                "groups": self.catalog.groups_of(entries),
                "totals": self.catalog.totals_of(entries)}

    async def index(self, request: Request) -> Response:
        data = await self._listing(request)

        def page_url(n: int) -> str:
            return "/sessions?" + urlencode({k: v for k, v in (("q", data["q"]),
                                                               ("group", data["group"]),
                                                               ("page", n)) if v})
        return await self.render(request, "index.html", page_url=page_url, **data)

    async def api_sessions(self, request: Request) -> Response:
        data = await self._listing(request)
        return self.json({"sessions": [e.row() for e in data["entries"]],
                          "total": data["total"], "page": data["page"], "pages": data["pages"],
                          "totals": data["totals"],
                          "groups": [{"path": g, "depth": d, "count": n}
                                     for g, d, n in data["groups"]]})

    # -- one session ---------------------------------------------------------------------------

    async def _log(self, session_id: str):
        """(log, None) or (None, a message that names no file path)."""
        if not valid_session_id(session_id):
            return None, NOT_FOUND
        try:
            return await self.catalog.log(session_id), None
        except (DshError, DigestError) as exc:
            if not await self.catalog.exists(session_id):
                return None, NOT_FOUND
            return None, self.catalog.public_error(exc)

    @staticmethod
    def _after(request: Request) -> tuple[int, int]:
        try:
            after = int(request.query_params.get("after", "0"))
            limit = min(EVENT_PAGE, max(1, int(request.query_params.get("limit", EVENT_PAGE))))
        except ValueError:
            after, limit = 0, EVENT_PAGE
        return after, limit

    async def session_page(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        log, error = await self._log(session_id)
        if log is None:
            return await self.not_found(request, error)
        events = log.events[:EVENT_PAGE]
        entry = CatalogEntry(dict(log.digest), log.stamp, log.offset)
        view = await asyncio.to_thread(self._plugin_view, log)
        html = await asyncio.to_thread(self.events_html, log, events)
        return await self.render(request, "session.html", log=log, entry=entry, view=view,
                                 events_html=html, more=len(log.events) > EVENT_PAGE,
                                 last_seq=events[-1].seq if events else 0)

    def _plugin_view(self, log: LiveLog) -> dict[str, Any] | None:
        view = self.harness.plugins.hook.dsh_web_session_view(
            harness=self.harness, session=log.header, events=list(log.events),
            facts=log.digest["facts"])
        if not (isinstance(view, dict) and isinstance(view.get("template"), str)):
            return None
        title = view.get("title")
        return {"template": view["template"], "context": dict(view.get("context") or {}),
                "title": title if isinstance(title, str) and title.strip() else None}

    @staticmethod
    def _live_headers(resp: Response, log: LiveLog) -> None:
        """Header totals for the live page (ASCII JSON: header values are latin-1)."""
        entry = CatalogEntry(log.digest, log.stamp, log.offset)
        resp.headers["X-Open-Turn"] = "1" if entry.open_turn else "0"
        resp.headers["X-Totals"] = json.dumps({"turns": entry.turns,
                                               "usage": render.usage_line(entry.usage),
                                               "open": entry.open_turn})

    async def events_fragment(self, request: Request) -> Response:
        session_id = request.query_params.get("id", "")
        log, error = await self._log(session_id)
        if log is None:
            return self.json({"error": error}, status=404)
        after, limit = self._after(request)
        newer = log.after(after)
        events = newer[:limit]
        if not events:
            resp: Response = Response(status_code=204)
            self._live_headers(resp, log)
            return resp
        resp = HTMLResponse(await asyncio.to_thread(self.events_html, log, events))
        resp.headers["X-Last-Seq"] = str(events[-1].seq)
        resp.headers["X-More"] = "1" if len(newer) > len(events) else "0"
        self._live_headers(resp, log)
        return resp

    async def tool_result(self, request: Request) -> Response:
        session_id = request.query_params.get("id", "")
        log, error = await self._log(session_id)
        try:
            seq = int(request.query_params.get("seq", ""))
        except ValueError:
            seq = -1
        found = log.after(seq - 1)[:1] if log else []
        event = next((e for e in found if e.seq == seq and e.type == "tool_result"), None)
        if event is None:
            return await self.not_found(request, error or "No such tool result.")
        return await self.render(request, "result.html", log=log, event=event)

    async def api_session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        log, error = await self._log(session_id)
        if log is None:
            return self.json({"error": error}, status=404)
        after, limit = self._after(request)
        newer = log.after(after)
        d = log.digest
        summary = {"id": d["id"], "title": d["title"], "pinned_title": d["pinned"],
                   "created_at": d["created"], "last_activity": d["last"], "turns": d["turns"],
                   "open_turn": d["open"], "events": d["events"],
                   "usage": log.usage.model_dump(), "cache_hit_pct": round(
                       CatalogEntry(d, None, 0).cache_hit_pct, 1),
                   "facts": public_facts(d["facts"])}
        return self.json({"header": log.header.model_dump(mode="json"), "summary": summary,
                          "events": [e.model_dump(mode="json") for e in newer[:limit]],
                          "more": len(newer) > limit, "notes": log.notes})

    # -- settings ------------------------------------------------------------------------------

    def settings_data(self) -> dict[str, Any]:
        cfg = self.harness.config
        providers = {}
        for name, p in cfg.providers.items():
            # An inline key wins over the variable, so the page names where the key is from.
            inline = p.api_key is not None
            has_key = inline or bool(p.api_key_env and self.harness.env.get(p.api_key_env))
            providers[name] = {"kind": p.kind, "base_url": p.base_url,
                               "api_key_env": None if inline else p.api_key_env,
                               "api_key": "set (inline)" if inline
                               else "set" if has_key else "unset",
                               "reasoning_replay": p.reasoning_replay,
                               "models": {m: s.model_dump() for m, s in p.models.items()}}
        plugins = [{"name": p.name, "origin": p.origin, "version": p.version,
                    "enabled": p.enabled, "hooks": p.hooks}
                   for p in self.harness.plugin_listing()]
        return {"config": self.harness.loaded.source, "home": str(self.harness.home),
                "storage": {"backend": cfg.storage.backend, "routes": dict(cfg.storage.routes)},
                "sessions": {"store": cfg.sessions.store},
                "default_model": cfg.default_model, "providers": providers,
                "compaction": cfg.compaction.model_dump(),
                "web": {"host": cfg.web.host, "port": cfg.web.port,
                        "auth_token": "set" if cfg.web.auth_token else "unset",
                        "allowed_hosts": sorted(allowed_hosts(cfg.web.host,
                                                              cfg.web.allowed_hosts))},
                "plugins": plugins,
                "instances": [{"id": iid, "plugin": plugin}
                              for iid, plugin in self.harness.instances.items()]}

    async def settings(self, request: Request) -> Response:
        return await self.render(request, "settings.html", s=self.settings_data())

    async def api_settings(self, request: Request) -> Response:
        return self.json(self.settings_data())

    # -- the app ---------------------------------------------------------------------------------

    def app(self, auth_token: str | None) -> Shield:
        home = self.router.home[1] if self.router.home else self.index
        routes = [
            Route("/", home, methods=["GET"]),
            Route("/sessions", self.index, methods=["GET"]),
            Route("/sessions/{session_id:path}", self.session_page),
            Route("/fragments/events", self.events_fragment),
            Route("/results", self.tool_result),
            Route("/settings", self.settings),
            Route("/api/sessions", self.api_sessions),
            Route("/api/sessions/{session_id:path}", self.api_session),
            Route("/api/settings", self.api_settings),
            Route("/login", auth.login, methods=["GET", "POST"]),
            Route("/logout", auth.logout),
            *self.router.routes,
            Mount("/static", StaticFiles(directory=str(STATIC_DIR)),
                  name="static"),
        ]
        access = (auth.Access(auth_token, shared=signins.SharedSignIns(self.harness))
                  if auth_token else None)
        middleware = [Middleware(auth.TokenAuth, access=access)] if access else []
        app = Starlette(routes=routes, middleware=middleware,
                        exception_handlers={404: self._http_404,
                                            IndexBuilding: self._building})
        app.state.access = access
        app.state.web = self
        web = self.harness.config.web
        return Shield(app, allowed_hosts(web.host, web.allowed_hosts))

    async def _building(self, request: Request, exc: Exception) -> Response:
        """A cold start over many sessions: the index builds behind; say so, try again soon."""
        assert isinstance(exc, IndexBuilding)
        headers = {"Retry-After": "2"}
        if request.url.path.startswith("/api/"):
            resp = self.json({"error": str(exc), "building": True, "read": exc.read,
                              "total": exc.total}, status=503)
        else:
            resp = await self.render(request, "building.html", status=503, read=exc.read,
                                     total=exc.total)
        resp.headers.update(headers)
        return resp

    async def _http_404(self, request: Request, exc: Exception) -> Response:
        return await self.not_found(request, "No such page.")


def build_app(harness: Any) -> Shield:
    """The ASGI app; raises ConfigError for a public bind without a long enough token."""
    web = harness.config.web
    token = auth.required_token(web.host, web.auth_token.get_secret_value()
                                if web.auth_token else None)
    return WebApp(harness).app(token)
