"""The reviewer's web pages: the pull-request index (``/prs``) and the status page.

The PR index is built from the harness's session index (``router.catalog``): one row per PR,
its persona sessions (team reviews) folded into it, with the facts ``web_facts`` keeps; totals
per repository and account, and a cost-and-cache chart per repository over days. Aggregation is
redone only when the catalog's list changed (the catalog swaps its list on every change).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from .. import cli as cli_commands
from ..app import ReviewerApp
from ..core.session_key import PrKey
from ..work.records import DOMAIN, pr_key
from ..work.store import WorkStore

PAGE_SIZE = 50
CHARTS = 10  # cost-per-day charts on /prs: the costliest repositories (or the filtered one)


@dataclass
class PrRow:
    key: tuple[str, str, str, int]
    session_id: str
    title: str = ""
    author: str | None = None
    state: str | None = None
    url: str | None = None
    last_review: dict[str, Any] | None = None
    last_outcome: str | None = None
    reviews: int = 0
    questions: int = 0
    turns: int = 0
    usage: list = field(default_factory=lambda: [0, 0, 0, 0.0])
    last: str = ""
    last_ts: float = 0.0
    open_turn: bool = False

    @property
    def repo(self) -> str:
        return f"{self.key[1]}/{self.key[2]}"

    @property
    def hit_pct(self) -> float:
        prompt = self.usage[0] + self.usage[1]
        return 100.0 * self.usage[1] / prompt if prompt else 0.0

    def matches(self, q: str) -> bool:
        hay = " ".join([self.title, self.author or "", self.repo, f"#{self.key[3]}",
                        self.key[0]]).lower()
        return all(w in hay for w in q.lower().split())


def _add(acc: list, u: list) -> None:
    for i in range(4):
        acc[i] += u[i]


class PrIndex:
    def __init__(self) -> None:
        self._source: Any = None
        self.rows: list[PrRow] = []
        self.repos: dict[str, dict[str, Any]] = {}
        self.accounts: dict[str, dict[str, Any]] = {}

    def build(self, entries: list) -> None:
        if entries is self._source:
            return
        rows: dict[tuple, PrRow] = {}
        days: dict[str, dict[str, list]] = {}
        for e in entries:
            pr = e.facts.get("pr")
            if not pr:
                continue
            key = (pr["account"], pr["owner"], pr["repo"], pr["number"])
            main = pr.get("persona") in (None, "coordinator")
            row = rows.get(key)
            if row is None:
                row = rows[key] = PrRow(key, e.id)
            if main and (pr.get("persona") is None or row.session_id.count(":persona:")):
                row.session_id = e.id
            if main:
                row.title = pr.get("title") or row.title or e.title or e.id
                for attr in ("author", "state", "url"):
                    setattr(row, attr, pr.get(attr) or getattr(row, attr))
                mine = (pr.get("last_review") or {}).get("at") or ""
                if mine >= ((row.last_review or {}).get("at") or ""):
                    row.last_review = pr.get("last_review") or row.last_review
                    row.last_outcome = pr.get("last_outcome") or row.last_outcome
                row.reviews += pr.get("reviews", 0)
                row.questions += pr.get("questions", 0)
            row.turns += e.turns
            _add(row.usage, e.d["usage"])
            row.open_turn = row.open_turn or e.open_turn
            if e.d["last_ts"] > row.last_ts:
                row.last_ts, row.last = e.d["last_ts"], e.d["last"]
            per_repo = days.setdefault(row.repo, {})
            for day, u in e.d["days"].items():
                _add(per_repo.setdefault(day, [0, 0, 0, 0.0]), u)
        self.rows = sorted(rows.values(), key=lambda r: r.last_ts, reverse=True)
        self.repos, self.accounts = {}, {}
        for r in self.rows:
            for table, name in ((self.repos, r.repo), (self.accounts, r.key[0])):
                t = table.setdefault(name, {"prs": 0, "reviews": 0, "questions": 0, "turns": 0,
                                            "usage": [0, 0, 0, 0.0]})
                t["prs"] += 1
                t["reviews"] += r.reviews
                t["questions"] += r.questions
                t["turns"] += r.turns
                _add(t["usage"], r.usage)
        for name, t in self.repos.items():
            t["days"] = days.get(name, {})
        self._source = entries


LAST_TURN = "as of the PR's last turn"


async def states_of(harness: Any, rows: list[PrRow]) -> dict[tuple, tuple[str | None, str]]:
    """(state, why) per row. A PR's state in its facts is as of its last turn, and a PR
    closed or merged since gets no new turn; its work record says so (``closed_seen_at``, set
    by the poller or a webhook), or is gone (pruned days after closing, once the account has
    polled). Reads the shown rows' records only (a page costs O(page)), all at once for more."""
    app = ReviewerApp.of(harness)
    domain = await harness.storage.domain(DOMAIN)
    stores: dict[str, tuple[WorkStore, bool, dict[str, Any] | None]] = {}
    out: dict[tuple, tuple[str | None, str]] = {}
    for r in rows:
        acct = app.accounts.get(r.key[0])
        if acct is None or r.state not in (None, "open"):
            out[r.key] = (r.state, LAST_TURN)
            continue
        if acct.key not in stores:
            store = WorkStore(domain, acct.key)
            polled = (await store.load_account()).last_tick_at is not None
            stores[acct.key] = (store, polled,
                                await store.prs() if len(rows) > PAGE_SIZE else None)
        store, polled, every = stores[acct.key]
        key = pr_key(acct.key, r.repo, r.key[3])
        rec = every.get(key) if every is not None else await store.pr(key)
        if rec is not None and rec.closed_seen_at is not None:
            out[r.key] = ("closed", "seen closed or merged since its last turn")
        elif rec is None and polled and r.repo.lower() in {
                x.lower() for x in acct.config.repositories}:
            out[r.key] = ("closed", "closed or merged days ago (its record was pruned)")
        else:
            out[r.key] = (r.state, LAST_TURN)
    return out


def hit(u: list) -> float:
    prompt = u[0] + u[1]
    return 100.0 * u[1] / prompt if prompt else 0.0


def register(router: Any) -> None:
    index = PrIndex()

    async def prs_page(request):
        index.build(await router.catalog.entries())
        q = request.query_params.get("q", "").strip()
        repo = request.query_params.get("repo", "").strip()
        try:
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            page = 1
        shown = [r for r in index.rows
                 if (not q or r.matches(q)) and (not repo or r.repo == repo)]
        pages = max(1, math.ceil(len(shown) / PAGE_SIZE))
        page = min(page, pages)
        rows = shown[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
        states = await states_of(router.harness, rows)

        def page_url(n: int) -> str:
            return "/prs?" + urlencode({k: v for k, v in (("q", q), ("repo", repo), ("page", n))
                                        if v})
        return await router.render(
            request, "reviewer_prs.html", rows=rows,
            total=len(shown), page=page, pages=pages, q=q, repo=repo, page_url=page_url,
            repos=index.repos, accounts=index.accounts, hit=hit,
            state_of=lambda r: states[r.key],
            charted=[repo] if repo in index.repos else sorted(
                index.repos, key=lambda n: index.repos[n]["usage"][3], reverse=True)[:CHARTS])

    async def prs_api(request):
        index.build(await router.catalog.entries())
        states = await states_of(router.harness, index.rows)
        return router.json({"prs": [{
            "account": r.key[0], "repo": r.repo, "number": r.key[3], "session": r.session_id,
            "title": r.title, "author": r.author, "state": states[r.key][0], "url": r.url,
            "last_review": r.last_review, "last_outcome": r.last_outcome,
            "reviews": r.reviews, "questions": r.questions, "turns": r.turns,
            "cost_usd": r.usage[3], "cache_hit_pct": round(r.hit_pct, 1),
            "last_activity": r.last} for r in index.rows],
            "repositories": {k: {**v, "cache_hit_pct": round(hit(v["usage"]), 1)}
                             for k, v in index.repos.items()},
            "accounts": {k: {**v, "cache_hit_pct": round(hit(v["usage"]), 1)}
                         for k, v in index.accounts.items()}})

    async def status_page(request):
        data = await cli_commands.status_data(router.harness)
        for a in data:
            for p in a["prs"]:
                p["session"] = session_of(a["account"], p["pr"])
        return await router.render(request, "reviewer_status.html", accounts=data)

    async def status_api(request):
        return router.json(await cli_commands.status_data(router.harness))

    router.add_page("/prs", prs_page, "Pull requests", home=True)
    router.add_route("/api/github-reviewer/prs", prs_api)
    router.add_page("/github-reviewer", status_page, "Reviewer status")
    router.add_route("/api/github-reviewer/status", status_api)


def session_of(account: str, pr_key: str) -> str | None:
    """The session id of a status row's ``owner/repo#n``."""
    repo, _, number = pr_key.rpartition("#")
    owner, _, name = repo.partition("/")
    if not (owner and name and number.isdigit()):
        return None
    return PrKey(account, owner, name, int(number)).session_id
