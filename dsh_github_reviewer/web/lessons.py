"""The lessons page: every repository's lessons (``work/lessons.py``) with where each came
from, and a remove button (the same as ``/bot forget <n>``).

Removing is a POST of a form from this page. Besides the UI's sign-in (a ``SameSite=Strict``
cookie or a bearer token), a POST is accepted only from this UI's own origin (``same_origin``),
so another site cannot remove lessons through a signed-in browser, or through an open loopback
UI.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from starlette.responses import RedirectResponse, Response

from ..app import ReviewerApp
from ..core.clock import utcnow
from ..work.lessons import REMOVED_ON_WEB, LessonStore
from ..work.records import DOMAIN

PATH = "/github-reviewer/lessons"


def same_origin(request: Any) -> bool:
    """A POST from this UI's own pages. A browser's ``Sec-Fetch-Site`` (no page script can set
    it) decides when present; the UI's ``Referrer-Policy: no-referrer`` makes Chromium send
    ``Origin: null`` on form posts, so ``Origin`` is only compared (with ``Host``) for clients
    that send no ``Sec-Fetch-Site``, and ``null`` is refused then. A client sending neither
    (curl with the bearer token) is no browser a site could drive."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin != "null" and urlsplit(origin).netloc.lower() == host.lower()


async def books(harness: Any) -> list[dict[str, Any]]:
    """Every account's repositories with lessons, each lesson as the page shows it."""
    app = ReviewerApp.of(harness)
    domain = await harness.storage.domain(DOMAIN)
    out = []
    for acct in app.configured.values():
        store = LessonStore(domain, acct.key)
        web = acct.config.web_url.rstrip("/")
        for repo, book in sorted((await store.all_books()).items()):
            rows = []
            for x in reversed(book.lessons):
                finding = x.finding
                rows.append({
                    "id": x.id, "text": x.text, "source": x.source, "taught_by": x.taught_by,
                    "association": x.association, "taught_at": x.taught_at.isoformat(),
                    "number": x.number,
                    "comment_url": f"{web}/{repo}/pull/{x.number}#issuecomment-{x.comment_id}"
                    if x.source == "command" and finding is None else
                    f"{web}/{repo}/pull/{x.number}#discussion_r{x.comment_id}",
                    "finding": None if finding is None else {
                        "where": finding.path + (f":{finding.line}" if finding.line else ""),
                        "text": finding.text, "number": finding.number,
                        "url": finding.url if finding.url.startswith(("https://", "http://"))
                        else ""},
                    "active": x.active, "removed_by": x.removed_by,
                    "removed_at": x.removed_at.isoformat() if x.removed_at else None})
            out.append({"account": acct.key, "repo": repo, "lessons": rows,
                        "active": sum(1 for r in rows if r["active"])})
    return out


def register(router: Any) -> None:
    async def page(request):
        return await router.render(request, "reviewer_lessons.html",
                                   books=await books(router.harness),
                                   error=request.query_params.get("error"))

    async def api(request):
        return router.json({"repositories": await books(router.harness)})

    async def remove(request):
        if not same_origin(request):
            return Response("cross-site request refused", status_code=403)
        form = await request.form()
        account, repo, raw = (str(form.get(k) or "") for k in ("account", "repo", "id"))
        app = ReviewerApp.of(router.harness)
        if account not in app.configured or not raw.isdigit() or "/" not in repo:
            return Response("unknown account, repository or lesson number", status_code=400)
        store = LessonStore(await router.harness.storage.domain(DOMAIN), account)
        lesson, _ = await store.forget(repo, int(raw), by=REMOVED_ON_WEB, at=utcnow(),
                                       comment_id=None)
        if lesson is None:
            return Response(f"{repo} has no lesson {raw}", status_code=404)
        return RedirectResponse(PATH, status_code=303)

    router.add_page(PATH, page, "Lessons")
    router.add_route("/api/github-reviewer/lessons", api)
    router.add_route(PATH + "/remove", remove, methods=("POST",))
