"""A thin async GitHub REST client over httpx2.

Why not gidgethub: its ETag cache is keyed by URL alone and shared by whatever token the
instance holds, it does not tell the caller that an answer was a free 304 (the API-budget
tests count them), it raises 429 as a generic error without the wait, and its pagination has no
page cap. These four behaviours are the point of this client, so it owns them: per-credential
conditional requests, rate-limit classification with the wait time (and no call before it has
passed), a page cap, truncated error bodies, URL-encoded path segments and GHES base URLs.
"""

from __future__ import annotations

import base64
import functools
import json as jsonlib
import logging
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx2
import pydantic_core
from pydantic import BaseModel, TypeAdapter, ValidationError

from dsh_harness import OPEN_FENCE, Fence, stop_point

from .auth import fingerprint
from .errors import (
    BadCredentials,
    GitHubError,
    NotFound,
    RateLimited,
    transport_error,
    truncate,
)
from .models import (
    CollaboratorPermission,
    Comparison,
    FileContent,
    InstallationRepos,
    IssueComment,
    PullFile,
    PullRequest,
    PullSummary,
    Reaction,
    Repo,
    Review,
    ReviewComment,
)

log = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
DEFAULT_PAGE_CAP = 10
# The ETag cache keeps, per URL, the ETag and the response's raw text (what a 304 needs to
# give the answer back), bounded by the total size of those texts, least recently used out.
ETAG_CACHE_BYTES = 32 * 1024 * 1024
# Parsed lists kept by their pages' ETags (``_list_of``), bounded by their items in all.
LIST_MEMO_ITEMS = 10_000
T = TypeVar("T", bound=BaseModel)
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


class TokenSource(Protocol):
    mode: str

    async def token(self) -> str: ...


def seg(*parts: str | int) -> str:
    """URL-encode path segments (owner, repo, a file path's pieces) and join them with '/'."""
    return "/".join(quote(str(p), safe="") for p in parts)


def file_path(path: str) -> str:
    return "/".join(quote(p, safe="") for p in path.strip("/").split("/"))


@dataclass
class Response:
    status: int
    data: Any
    headers: httpx2.Headers
    not_modified: bool = False
    # The ETag the answer is remembered by (None: not kept for a 304) and, for a ``lazy``
    # request answered 304, the remembered text not yet decoded (``data`` is None then).
    etag: str | None = None
    raw: str | None = None


@dataclass(slots=True)
class _Page:
    """One page of a parsed list of ``_list_of``: its ETag, its models and the decoded JSON
    they were validated from."""

    etag: str
    items: list[Any]
    raw: list[Any]


@dataclass(slots=True)
class _Parsed:
    """A parsed list of ``_list_of``, page by page."""

    pages: tuple[_Page, ...]

    @property
    def size(self) -> int:
        return sum(len(p.items) for p in self.pages)

    def items(self) -> list[Any]:
        return [item for p in self.pages for item in p.items]


@functools.cache
def _adapter(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    """The validator of a list of ``model`` (built once per model, not per listing)."""
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def _item_key(raw: Any) -> Any:
    """What tells one item of a GitHub list from the others: its id (a file: its name)."""
    if isinstance(raw, dict):
        return raw.get("id") or raw.get("filename")
    return None


@dataclass
class Counters:
    requests: int = 0
    not_modified: int = 0
    rate_limited: int = 0


# A rate limit without a stated wait: GitHub's guidance is at least a minute.
RATE_LIMIT_DEFAULT_S = 60.0
RATE_LIMIT_MAX_S = 3600.0   # the primary limit's window: never longer than its reset


def rate_limit_bounds(wait_s: float) -> float:
    return min(max(1.0, wait_s), RATE_LIMIT_MAX_S)


class GitHubClient:
    """The REST and GraphQL client of one account. A PR's work uses ``fenced(fence)``: the same
    client whose every write (POST, PATCH, PUT, DELETE, a GraphQL mutation) first proves the
    PR's lease (``Fence.check``) just before it is sent; the account's client itself writes
    unfenced (``OPEN_FENCE``: one process, CI)."""

    #: Proven before every write (see the class doc).
    fence: Fence = OPEN_FENCE

    def __init__(self, api_url: str, auth: TokenSource, http: httpx2.AsyncClient, *,
                 page_cap: int = DEFAULT_PAGE_CAP, clock: Callable[[], float] = time.time):
        self.api_url = api_url.rstrip("/")
        self.auth, self.http, self.page_cap, self.clock = auth, http, page_cap, clock
        # credential fingerprint -> URL -> (etag, raw text): a 304 is only free for the same
        # token. Bounded by bytes across tokens (``cache_bytes``).
        self._etags: dict[str, OrderedDict[str, tuple[str, str]]] = {}
        self.cache_bytes = 0
        self.cache_limit = ETAG_CACHE_BYTES
        # credential fingerprint -> URL -> ETag of the polled URLs (``poll_page``): no body is
        # kept, since a 304 there only means "nothing new", so the next tick's entries take a
        # few bytes per repository and are never evicted by other traffic.
        self._poll_etags: dict[str, dict[str, str]] = {}
        # (first page's URL, model) -> per page: its ETag, the parsed items, their decoded
        # JSON (see _list_of).
        self._lists: OrderedDict[tuple[str, str], _Parsed] = OrderedDict()
        self._list_items = 0
        self.blocked_until = 0.0
        self.counters = Counters()

    def fenced(self, fence: Fence) -> GitHubClient:
        """This client, its writes fenced by ``fence`` (a PR's lease); caches, rate-limit
        state and counters stay shared with the account's client."""
        return FencedClient(self, fence)

    # -- transport ------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.api_url}/{path.lstrip('/')}"

    async def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                      json: Any = None, accept: str = "application/vnd.github+json",
                      conditional: bool | None = None, write: bool | None = None,
                      lazy: bool = False) -> Response:
        """``write`` (default: any method but GET) proves the fence right before sending.
        ``lazy``: a 304 comes back with the remembered text in ``raw``, not decoded."""
        wait = self.blocked_until - self.clock()
        if wait > 0:
            raise RateLimited(f"GitHub rate limit: waiting {wait:.0f} s more before calling",
                              wait)
        token = await self.auth.token()
        url = self.url(path)
        conditional = method == "GET" if conditional is None else conditional
        cache_key = url + ("?" + str(httpx2.QueryParams(params)) if params else "")
        cache = self._etags.setdefault(fingerprint(token), OrderedDict())
        headers = {"Authorization": f"Bearer {token}", "Accept": accept,
                   "X-GitHub-Api-Version": API_VERSION}
        cached = cache.get(cache_key) if conditional else None
        if cached:
            headers["If-None-Match"] = cached[0]
        stop_point(f"github:{method} {path}")  # (the replica pause tests stop here)
        if method != "GET" if write is None else write:
            # As close to the send as the client gets: what remains is the request's transit
            # (docs/deploy.en.md, "Replicas": the fencing window).
            await self.fence.check(f"{method} {path}")
        try:
            resp = await self.http.request(method, url, params=params, json=json,
                                           headers=headers)
        except httpx2.HTTPError as exc:
            raise transport_error(method, path, url, exc) from None
        self.counters.requests += 1
        if resp.status_code == 304 and cached:
            self.counters.not_modified += 1
            cache.move_to_end(cache_key)
            if lazy:
                return Response(304, None, resp.headers, not_modified=True, etag=cached[0],
                                raw=cached[1])
            return Response(304, self._decode(method, path, cached[1], True), resp.headers,
                            not_modified=True, etag=cached[0])
        self._raise_for(method, path, resp)
        is_json = "json" in resp.headers.get("content-type", "")
        text = resp.text
        data = self._decode(method, path, text, is_json)
        etag = resp.headers.get("etag")
        if conditional and etag and is_json:
            self._remember(cache, cache_key, etag, text)
        return Response(resp.status_code, data, resp.headers,
                        etag=etag if conditional and is_json else None)

    async def poll_page(self, path: str, params: dict[str, Any], *, fresh: bool) -> Response:
        """The first page of a polled list, as a conditional request that keeps only the ETag.

        A 304 comes back as ``not_modified`` with no data: the caller already recorded what
        this page said. ``fresh`` asks unconditionally (the last answer was never recorded) and
        still remembers the new ETag.
        """
        wait = self.blocked_until - self.clock()
        if wait > 0:
            raise RateLimited(f"GitHub rate limit: waiting {wait:.0f} s more before calling",
                              wait)
        token = await self.auth.token()
        url = self.url(path)
        key = url + "?" + str(httpx2.QueryParams(params))
        etags = self._poll_etags.setdefault(fingerprint(token), {})
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
                   "X-GitHub-Api-Version": API_VERSION}
        known = None if fresh else etags.get(key)
        if known:
            headers["If-None-Match"] = known
        try:
            resp = await self.http.request("GET", url, params=params, headers=headers)
        except httpx2.HTTPError as exc:
            raise transport_error("GET", path, url, exc) from None
        self.counters.requests += 1
        if resp.status_code == 304 and known:
            self.counters.not_modified += 1
            return Response(304, None, resp.headers, not_modified=True)
        self._raise_for("GET", path, resp)
        data = self._decode("GET", path, resp.text, "json" in resp.headers.get("content-type", ""))
        if not isinstance(data, list):
            raise GitHubError(f"GET {path}: expected a JSON list")
        etag = resp.headers.get("etag")
        if etag:
            etags[key] = etag
        else:
            etags.pop(key, None)
        return Response(resp.status_code, data, resp.headers)

    async def _rest_of(self, path: str, first: Response, cap: int,
                       stop: Callable[[list[Any]], bool] | None = None) -> tuple[list[Any], bool]:
        """The items of ``first`` and the pages after it, until ``stop(page)`` says so, the
        last page, or ``cap`` pages; (items, read to the end or the stop)."""
        items = list(first.data)
        resp, pages = first, 1
        while not (stop and stop(resp.data)):
            m = _NEXT.search(resp.headers.get("link", ""))
            if not m:
                return items, True
            if pages >= cap:
                return items, False
            resp = await self.request("GET", m.group(1), conditional=False)
            if not isinstance(resp.data, list):
                raise GitHubError(f"GET {path}: expected a JSON list")
            items.extend(resp.data)
            pages += 1
        return items, True

    @staticmethod
    def _decode(method: str, path: str, text: str, is_json: bool) -> Any:
        if not is_json:
            return text
        if not text.strip():
            return None
        try:
            # pydantic's JSON parser (jiter, already installed with pydantic) decodes a PR's
            # long lists in about half the time of the json module, to the same values.
            return pydantic_core.from_json(text)
        except ValueError:
            pass   # e.g. a lone surrogate escape (\ud800), which jiter refuses and json takes
        try:
            return jsonlib.loads(text)
        except ValueError as exc:
            # Malformed JSON is GitHub failing this endpoint, not a bug of ours.
            raise GitHubError(f"{method} {path}: response is not valid JSON ({exc})") from None

    def _remember(self, cache: OrderedDict[str, tuple[str, str]], key: str, etag: str,
                  text: str) -> None:
        old = cache.pop(key, None)
        if old is not None:
            self.cache_bytes -= len(old[1])
        if len(text) > self.cache_limit // 4:
            return  # one huge answer would evict everything else
        cache[key] = (etag, text)
        self.cache_bytes += len(text)
        while self.cache_bytes > self.cache_limit:
            biggest = max(self._etags.values(), key=len)
            _, (_, dropped) = biggest.popitem(last=False)
            self.cache_bytes -= len(dropped)

    def _raise_for(self, method: str, path: str, resp: httpx2.Response) -> None:
        status = resp.status_code
        if status < 400:
            return
        body = truncate(resp.text)
        remaining = resp.headers.get("x-ratelimit-remaining")
        retry_after = resp.headers.get("retry-after")
        if status == 429 or (status == 403 and (remaining == "0" or retry_after)):
            wait = self._rate_limit_wait(resp.headers)
            self.blocked_until = max(self.blocked_until, self.clock() + wait)
            self.counters.rate_limited += 1
            raise RateLimited(f"{method} {path}: rate limited (HTTP {status}); retry in "
                              f"{wait:.0f} s", wait, status)
        if status == 404:
            raise NotFound(f"{method} {path}: not found", status)
        if status == 401:
            raise BadCredentials(f"{method} {path}: HTTP 401: GitHub rejected the token (bad, "
                                 "revoked or expired credentials)", status)
        raise GitHubError(f"{method} {path}: HTTP {status}: {body}", status)

    def _rate_limit_wait(self, headers: httpx2.Headers) -> float:
        """GitHub's own wait (Retry-After, else the reset time), within bounds: a forged or
        broken header neither spins (< 1 s) nor stops the account for days."""
        try:
            if headers.get("retry-after") is not None:
                return rate_limit_bounds(float(headers["retry-after"]))
            if headers.get("x-ratelimit-reset") is not None:
                return rate_limit_bounds(float(headers["x-ratelimit-reset"]) - self.clock())
        except ValueError:
            pass
        return RATE_LIMIT_DEFAULT_S

    def block(self, wait_s: float) -> None:
        """Make no request for ``wait_s`` (a rate limit another caller of GitHub with this
        token saw, e.g. github-mcp-server): requests raise ``RateLimited`` until then."""
        self.blocked_until = max(self.blocked_until, self.clock() + rate_limit_bounds(wait_s))

    async def paginate(self, path: str, params: dict[str, Any] | None = None,
                       per_page: int = 100, max_pages: int | None = None,
                       unlimited: bool = False) -> tuple[list[Any], bool]:
        """All items of a list endpoint up to the page cap (none when ``unlimited``);
        (items, all pages were 304)."""
        pages = await self._pages(path, params, per_page, max_pages, unlimited, lazy=False)
        return self._items(path, pages), all(p.not_modified for p in pages)

    async def _pages(self, path: str, params: dict[str, Any] | None, per_page: int,
                     max_pages: int | None, unlimited: bool, lazy: bool) -> list[Response]:
        """The pages of a list endpoint, following ``Link: rel="next"`` up to the page cap
        (none when ``unlimited``); ``lazy``: a 304 page is not decoded (``Response.raw``)."""
        pages: list[Response] = []
        next_url: str | None = path
        page_params: dict[str, Any] | None = {**(params or {}), "per_page": per_page}
        cap = max_pages or self.page_cap
        while next_url is not None:
            if not unlimited and len(pages) >= cap:
                log.warning("GET %s: stopped at the page cap of %d pages", path, cap)
                break
            resp = await self.request("GET", next_url, params=page_params, lazy=lazy)
            if resp.raw is None and not isinstance(resp.data, list):
                raise GitHubError(f"GET {path}: expected a JSON list")
            pages.append(resp)
            m = _NEXT.search(resp.headers.get("link", ""))
            next_url, page_params = (m.group(1), None) if m else (None, None)
        return pages

    def _items(self, path: str, pages: list[Response]) -> list[Any]:
        """The items of ``pages``, a lazy 304 page decoded from its remembered text."""
        items: list[Any] = []
        for p in pages:
            data = p.data if p.raw is None else self._decode("GET", path, p.raw, True)
            if not isinstance(data, list):
                raise GitHubError(f"GET {path}: expected a JSON list")
            items.extend(data)
        return items

    async def _list_of(self, model: type[T], path: str, params: dict[str, Any] | None = None,
                       max_pages: int | None = None, unlimited: bool = False
                       ) -> tuple[list[T], bool]:
        """``paginate`` and ``parse_list`` in one: (items, all pages were 304).

        A PR's review work lists the same reviews and comments several times per review, and
        these lists grow with the PR. A page that is a 304 with the ETag it was last parsed
        under is that same page, so its models are handed back without decoding or validating
        it again; only a page that changed is decoded, and of its items only those whose JSON
        changed are validated. A list that grows at its end (GitHub lists reviews and comments
        oldest first) thus costs the last page, not the whole list. Equal ETags mean equal
        answers whichever token asked, so the ETags alone are the key's proof."""
        pages = await self._pages(path, params, 100, max_pages, unlimited, lazy=True)
        all_cached = all(p.not_modified for p in pages)
        key = (self.url(path) + "?" + str(httpx2.QueryParams(params or {})), model.__name__)
        known = self._lists.get(key)
        old = known.pages if known is not None else ()
        out: list[_Page | None] = []
        changed: list[int] = []
        for i, p in enumerate(pages):
            if p.not_modified and i < len(old) and p.etag and old[i].etag == p.etag:
                out.append(old[i])   # the same page: neither decoded nor validated again
            else:
                changed.append(i)
                out.append(None)
        if changed:
            before = {_item_key(raw): (raw, done) for page in old
                      for raw, done in zip(page.raw, page.items, strict=True)}
            for i in changed:
                raw = self._items(path, [pages[i]])
                try:
                    items = self._parse_again(model, raw, before)
                except ValidationError as exc:
                    # Parsed whole, so the error names the item's index in the whole list.
                    self.parse_list(model, self._items(path, pages), f"GET {path}")
                    raise GitHubError(f"GET {path}: unexpected payload: "
                                      f"{exc.errors()[0]['msg']}") from None
                out[i] = _Page(pages[i].etag or "", items, raw)
        parsed = _Parsed(tuple(p for p in out if p is not None))
        if changed or known is None:
            self._memo_list(key, parsed)
        else:
            self._lists.move_to_end(key)
        return parsed.items(), all_cached

    @staticmethod
    def _parse_again(model: type[T], items: list[Any],
                     before: dict[Any, tuple[Any, Any]]) -> list[T]:
        """The models of ``items``, reusing the model of every item whose decoded JSON equals
        the one it was parsed from last time (``before``: item key -> (JSON, model)), so a
        page that grew by one review validates that one. Raises ``ValidationError``."""
        out: list[Any] = []
        fresh: list[int] = []
        for raw in items:
            prior = before.get(_item_key(raw))
            if prior is not None and prior[0] == raw:
                out.append(prior[1])
            else:
                fresh.append(len(out))
                out.append(None)
        if fresh:
            parsed = _adapter(model).validate_python([items[i] for i in fresh])
            for i, item in zip(fresh, parsed, strict=True):
                out[i] = item
        return out

    def _memo_list(self, key: tuple[str, str], entry: _Parsed) -> None:
        old = self._lists.pop(key, None)
        if old is not None:
            self._list_items -= old.size
        if any(not p.etag for p in entry.pages) or entry.size > LIST_MEMO_ITEMS // 4:
            return   # a page without an ETag is never a 304; a huge list would evict the rest
        self._lists[key] = entry
        self._list_items += entry.size
        while self._list_items > LIST_MEMO_ITEMS:
            _, dropped = self._lists.popitem(last=False)
            self._list_items -= dropped.size

    @staticmethod
    def parse(model: type[T], data: Any, what: str) -> T:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise GitHubError(f"{what}: unexpected payload: {exc.errors()[0]['loc']} "
                              f"{exc.errors()[0]['msg']}") from None

    @staticmethod
    def parse_list(model: type[T], data: list[Any], what: str) -> list[T]:
        try:
            return _adapter(model).validate_python(data)
        except ValidationError as exc:
            raise GitHubError(f"{what}: unexpected payload: {exc.errors()[0]['loc']} "
                              f"{exc.errors()[0]['msg']}") from None

    # -- endpoints --------------------------------------------------------------------------

    async def open_pull_pages(self, owner: str, repo: str
                              ) -> AsyncIterator[list[PullSummary]]:
        """Every open PR, a page at a time, asked unconditionally and kept out of the ETag
        cache: a poll lists in full only once per repository (then it reads what changed), so
        caching these pages would only evict what the next tick needs, and one page at a time
        keeps the memory of a 10,000-PR listing to that of 100 PRs."""
        path = f"repos/{seg(owner, repo)}/pulls"
        next_url: str | None = path
        params: dict[str, Any] | None = {"state": "open", "sort": "created",
                                         "direction": "asc", "per_page": 100}
        # No page cap: a cap would leave the newest PRs of a busy repository unreviewed.
        while next_url is not None:
            resp = await self.request("GET", next_url, params=params, conditional=False)
            if not isinstance(resp.data, list):
                raise GitHubError(f"GET {path}: expected a JSON list")
            yield self.parse_list(PullSummary, resp.data, f"GET {path}")
            m = _NEXT.search(resp.headers.get("link", ""))
            next_url, params = (m.group(1), None) if m else (None, None)

    async def list_open_pulls(self, owner: str, repo: str) -> tuple[list[PullSummary], bool]:
        path = f"repos/{seg(owner, repo)}/pulls"
        # Every open PR, each page a conditional request: a page cap would leave the newest
        # PRs of a busy repository unreviewed forever.
        return await self._list_of(PullSummary, path, {"state": "open", "sort": "created",
                                                      "direction": "asc"}, unlimited=True)

    async def pulls_updated_since(self, owner: str, repo: str, since: datetime | None, *,
                                  fresh: bool) -> PullChanges:
        """PRs of any state updated at or after ``since``, newest first: what changed since the
        last tick. Opening, pushing, retargeting, closing and merging all move a PR's
        ``updated_at``, so a quiet repository answers page 1 with a free 304 whatever its
        number of open PRs. ``since=None`` reads page 1 only, for the watermark."""
        path = f"repos/{seg(owner, repo)}/pulls"
        first = await self.poll_page(path, {"state": "all", "sort": "updated",
                                            "direction": "desc", "per_page": 100}, fresh=fresh)
        if first.not_modified:
            return PullChanges([], unchanged=True)
        if since is None:
            page = self.parse_list(PullSummary, first.data, f"GET {path}")
            return PullChanges([], newest=page[0].updated_at if page else None)

        def older(page: list[Any]) -> bool:
            return bool(page) and _updated(page[-1]) < since

        items, reached = await self._rest_of(path, first, self.page_cap, older)
        pulls = [p for p in self.parse_list(PullSummary, items, f"GET {path}")
                 if p.updated_at >= since]
        return PullChanges(pulls, newest=max((p.updated_at for p in pulls), default=None),
                           reached=reached)

    async def authenticated_login(self) -> str:
        """The login of the token's user (``GET /user``; PAT mode)."""
        data = (await self.request("GET", "user")).data
        login = data.get("login") if isinstance(data, dict) else None
        if not isinstance(login, str) or not login:
            raise GitHubError("GET user: unexpected payload: no login")
        return login

    async def get_pull(self, owner: str, repo: str, number: int) -> PullRequest:
        path = f"repos/{seg(owner, repo)}/pulls/{int(number)}"
        return self.parse(PullRequest, (await self.request("GET", path)).data, f"GET {path}")

    async def list_pull_files(self, owner: str, repo: str, number: int,
                              max_pages: int | None = None) -> list[PullFile]:
        path = f"repos/{seg(owner, repo)}/pulls/{int(number)}/files"
        return (await self._list_of(PullFile, path, max_pages=max_pages))[0]

    async def compare(self, owner: str, repo: str, base: str, head: str) -> Comparison:
        """``base...head``: commits and file changes since their merge base (conditional, so
        a repeated comparison of the same heads is a free 304)."""
        path = f"repos/{seg(owner, repo)}/compare/{quote(base, safe='')}...{quote(head, safe='')}"
        resp = await self.request("GET", path, params={"per_page": 100})
        return self.parse(Comparison, resp.data, f"GET {path}")

    def graphql_url(self) -> str:
        # github.com: /graphql beside the REST root; GHES: /api/graphql beside /api/v3.
        if self.api_url.endswith("/api/v3"):
            return self.api_url[: -len("/v3")] + "/graphql"
        return f"{self.api_url}/graphql"

    async def graphql(self, query: str, variables: dict[str, Any]) -> Any:
        """One GraphQL query; GraphQL errors (HTTP 200 with ``errors``) raise ``GitHubError``."""
        resp = await self.request("POST", self.graphql_url(),
                                  json={"query": query, "variables": variables},
                                  write=query.lstrip().startswith("mutation"))
        data = resp.data if isinstance(resp.data, dict) else {}
        if data.get("errors"):
            first = data["errors"][0]
            message = first.get("message") if isinstance(first, dict) else first
            raise GitHubError(f"GraphQL: {truncate(str(message))}")
        if "data" not in data:
            raise GitHubError("GraphQL: the answer has no data")
        return data["data"]

    async def list_dir(self, owner: str, repo: str, path: str, ref: str) -> list[str]:
        """The file paths directly in a directory at ``ref``; ``NotFound`` when there is none."""
        api = f"repos/{seg(owner, repo)}/contents/{file_path(path)}"
        resp = await self.request("GET", api, params={"ref": ref})
        if not isinstance(resp.data, list):
            raise NotFound(f"GET {api}: not a directory")
        return [str(e["path"]) for e in resp.data
                if isinstance(e, dict) and e.get("type") == "file" and e.get("path")]

    async def get_file_text(self, owner: str, repo: str, path: str, ref: str) -> str:
        """A file's text at ``ref``; ``NotFound`` when it does not exist there."""
        api = f"repos/{seg(owner, repo)}/contents/{file_path(path)}"
        resp = await self.request("GET", api, params={"ref": ref})
        if isinstance(resp.data, list):
            raise NotFound(f"GET {api}: is a directory")
        content = self.parse(FileContent, resp.data, f"GET {api}")
        if content.type != "file" or content.content is None:
            raise NotFound(f"GET {api}: not a file")
        try:
            return base64.b64decode(content.content).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise GitHubError(f"GET {api}: file is not UTF-8 text") from None

    async def _feed(self, path: str, model: type[T], since: datetime, fresh: bool
                    ) -> tuple[list[T], bool]:
        """A repository-wide comment feed, oldest update first; (items, unchanged: the first
        page was a 304, so it holds nothing the last recorded poll did not)."""
        first = await self.poll_page(path, {"since": iso(since), "sort": "updated",
                                            "direction": "asc", "per_page": 100}, fresh=fresh)
        if first.not_modified:
            return [], True
        items, _ = await self._rest_of(path, first, self.page_cap)
        return self.parse_list(model, items, f"GET {path}"), False

    async def issue_comments_since(self, owner: str, repo: str, since: datetime, *,
                                   fresh: bool = False) -> tuple[list[IssueComment], bool]:
        return await self._feed(f"repos/{seg(owner, repo)}/issues/comments", IssueComment,
                                since, fresh)

    async def review_comments_since(self, owner: str, repo: str, since: datetime, *,
                                    fresh: bool = False) -> tuple[list[ReviewComment], bool]:
        return await self._feed(f"repos/{seg(owner, repo)}/pulls/comments", ReviewComment,
                                since, fresh)

    async def list_issue_comments(self, owner: str, repo: str, number: int) -> list[IssueComment]:
        path = f"repos/{seg(owner, repo)}/issues/{int(number)}/comments"
        return (await self._list_of(IssueComment, path))[0]

    async def list_review_comments(self, owner: str, repo: str, number: int
                                   ) -> list[ReviewComment]:
        path = f"repos/{seg(owner, repo)}/pulls/{int(number)}/comments"
        return (await self._list_of(ReviewComment, path))[0]

    async def post_issue_comment(self, owner: str, repo: str, number: int, body: str
                                 ) -> IssueComment:
        path = f"repos/{seg(owner, repo)}/issues/{int(number)}/comments"
        resp = await self.request("POST", path, json={"body": body})
        return self.parse(IssueComment, resp.data, f"POST {path}")

    async def edit_issue_comment(self, owner: str, repo: str, comment_id: int, body: str
                                 ) -> IssueComment:
        path = f"repos/{seg(owner, repo)}/issues/comments/{int(comment_id)}"
        resp = await self.request("PATCH", path, json={"body": body})
        return self.parse(IssueComment, resp.data, f"PATCH {path}")

    async def reply_to_review_comment(self, owner: str, repo: str, number: int,
                                      comment_id: int, body: str) -> ReviewComment:
        path = f"repos/{seg(owner, repo)}/pulls/{int(number)}/comments/{int(comment_id)}/replies"
        resp = await self.request("POST", path, json={"body": body})
        return self.parse(ReviewComment, resp.data, f"POST {path}")

    async def add_reaction(self, owner: str, repo: str, comment_id: int, content: str, *,
                           review_comment: bool) -> bool:
        """A reaction on an issue or review comment; True if created, False if the bot had
        already reacted so (GitHub answers 200 then, 201 when it creates one)."""
        kind = "pulls" if review_comment else "issues"
        path = f"repos/{seg(owner, repo)}/{kind}/comments/{int(comment_id)}/reactions"
        resp = await self.request("POST", path, json={"content": content})
        return resp.status == 201

    async def list_reactions(self, owner: str, repo: str, comment_id: int, *,
                             review_comment: bool) -> list[Reaction]:
        """Every reaction on an issue or review comment: who reacted, with what."""
        kind = "pulls" if review_comment else "issues"
        path = f"repos/{seg(owner, repo)}/{kind}/comments/{int(comment_id)}/reactions"
        return (await self._list_of(Reaction, path))[0]

    async def collaborator_permission(self, owner: str, repo: str, login: str
                                      ) -> CollaboratorPermission:
        """A person's permission on the repository; ``NotFound`` when GitHub knows no such
        user (or the repository), ``GitHubError`` with status 403 when the token may not read
        it. Conditional like every GET, so asking again while nothing changed is a free 304."""
        path = f"repos/{seg(owner, repo, 'collaborators', login, 'permission')}"
        resp = await self.request("GET", path)
        return self.parse(CollaboratorPermission, resp.data, f"GET {path}")

    async def list_reviews(self, owner: str, repo: str, number: int) -> list[Review]:
        path = f"repos/{seg(owner, repo)}/pulls/{int(number)}/reviews"
        return (await self._list_of(Review, path))[0]

    async def create_review(self, owner: str, repo: str, number: int, *, commit_id: str,
                            body: str, event: str, comments: list[dict[str, Any]]) -> Review:
        path = f"repos/{seg(owner, repo)}/pulls/{int(number)}/reviews"
        resp = await self.request("POST", path, json={"commit_id": commit_id, "body": body,
                                                      "event": event, "comments": comments})
        return self.parse(Review, resp.data, f"POST {path}")

    async def delete_pending_review(self, owner: str, repo: str, number: int,
                                    review_id: int) -> None:
        path = f"repos/{seg(owner, repo)}/pulls/{int(number)}/reviews/{int(review_id)}"
        await self.request("DELETE", path)

    async def list_repositories(self) -> list[str]:
        """``owner/repo`` of every repository the credential can see."""
        if self.auth.mode == "app":
            items: list[Any] = []
            for page in range(1, self.page_cap + 1):
                resp = await self.request("GET", "installation/repositories",
                                          params={"per_page": 100, "page": page})
                batch = self.parse(InstallationRepos, resp.data, "GET installation/repositories")
                items += batch.repositories
                if len(items) >= batch.total_count or not batch.repositories:
                    break
            return [r.full_name for r in items]
        data, _ = await self.paginate("user/repos")
        return [r.full_name for r in self.parse_list(Repo, data, "GET user/repos")]


@dataclass
class PullChanges:
    """What ``pulls_updated_since`` saw: the changed PRs (open and closed), the newest update
    among them, whether page 1 was a 304, and whether the read reached ``since`` (False: the
    page cap stopped it first, so the caller lists the open PRs in full)."""

    pulls: list[PullSummary]
    unchanged: bool = False
    newest: datetime | None = None
    reached: bool = True


class FencedClient(GitHubClient):
    """``GitHubClient.fenced``: the account's client seen through one PR's fence. Every
    attribute but the fence is the account client's (read and written through), so the
    methods run unchanged with this object as ``self`` and their writes meet the fence."""

    def __init__(self, root: GitHubClient, fence: Fence):
        object.__setattr__(self, "_root", root)
        object.__setattr__(self, "fence", fence)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._root, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._root, name, value)

    def fenced(self, fence: Fence) -> GitHubClient:
        return FencedClient(self._root, fence)


def _updated(item: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(item["updated_at"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        raise GitHubError("GET pulls: an item without a valid updated_at") from None


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
