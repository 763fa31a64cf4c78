"""The reviewer's web pages: the pull-request index (``/prs``) and the status page.

The PR index is built from the harness's session index (``router.catalog``): one row per PR,
its persona sessions (team reviews) folded into it, with the facts ``web.facts`` keeps; totals
per repository and account, and a cost-and-cache chart per repository over days. Aggregation is
redone only when the catalog's list changed (the catalog swaps its list on every change). PRs
the bot has a work record of but no session (it gave up before any turn, e.g. on a GitHub
error) are rows too, from the record, so nothing the bot failed on is missing from the list.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from dsh_harness import IndexBuilding

from ..app import ReviewerApp
from ..app.pr_state import LAST_TURN, from_facts, from_record
from ..app.status import status_data
from ..core.clock import utcnow
from ..core.session_key import PrRef, parse_session_id
from ..work.records import DOMAIN, PRS, PrRecord
from ..work.store import WorkStore
from . import attention, noise
from .facts import web_url
from .pr_snapshot import PrSnapshot

log = logging.getLogger(__name__)

PAGE_SIZE = 50
API_PAGE_SIZE = 100  # /api/github-reviewer/prs?page=&per_page= (at most API_MAX_PAGE_SIZE)
API_MAX_PAGE_SIZE = 1000
RECORDS_TTL_S = 2.0  # the list's copy of the work records is read again behind when older
# ... than that, or than RECORDS_BUDGET times the CPU the last read took (at most
# RECORDS_MAX_S): at 10,000 PRs a read of every record costs ~45-60 ms, and the list must not
# spend most of its CPU re-reading records that a page's own rows read fresh anyway (the
# copy serves only record-only rows and the states of rows beyond the page: at 150 times a
# read every ~7 s was a third of /prs's CPU at a reload every 2.2 s; at 300, every ~14 s).
RECORDS_BUDGET = 300
RECORDS_MAX_S = 20.0
FRESH_ROWS = 200  # up to this many rows, states come from their records read now
CHARTS = 10  # cost-per-day charts on /prs: the costliest repositories (or the filtered one)


@dataclass
class PrRow:
    key: tuple[str, str, str, int]
    session_id: str  # "" for a PR known only from its work record (no session)
    title: str = ""
    author: str | None = None
    state: str | None = None
    url: str | None = None
    last_review: dict[str, Any] | None = None
    last_outcome: str | None = None
    reviews: int = 0
    findings: int = 0  # inline findings of every posted review
    questions: int = 0
    turns: int = 0
    usage: list = field(default_factory=lambda: [0, 0, 0, 0.0])
    last: str = ""
    last_ts: float = 0.0
    open_turn: bool = False
    record_state: str | None = None  # from the PR's work record, when it has one
    noise: dict[str, Any] | None = None  # web.noise figures of its main session
    days: dict[str, list] = field(default_factory=dict)  # usage per day, all its sessions
    # (record_state, the row as web.pr_snapshot saves it): a row is rebuilt when its sessions
    # change, so saving 10,000 rows serializes only the changed ones
    saved: tuple[str | None, str] | None = field(default=None, compare=False, repr=False)

    @property
    def shown_state(self) -> str | None:
        return self.record_state or self.state

    @property
    def repo(self) -> str:
        return f"{self.key[1]}/{self.key[2]}"

    @property
    def hit_pct(self) -> float:
        prompt = self.usage[0] + self.usage[1]
        return 100.0 * self.usage[1] / prompt if prompt else 0.0

    def matches(self, q: str) -> bool:
        """Every word is in the title, author, repository, number, account, state or the last
        review's outcome ("merged", "gave up", "posted", "draft")."""
        hay = " ".join([self.title, self.author or "", self.repo, f"#{self.key[3]}",
                        self.key[0], self.shown_state or "", self.last_outcome or ""]).lower()
        return all(w in hay for w in q.lower().split())


def _add(acc: list, u: list) -> None:
    for i in range(4):
        acc[i] += u[i]


def record_row(key: tuple[str, str, str, int], rec: PrRecord, base_url: str) -> PrRow:
    """The row of a PR with a work record and no session: what the record says."""
    _, owner, repo, number = key
    row = PrRow(key, "", title=rec.title or f"{owner}/{repo}#{number}",
                url=web_url(f"{base_url.rstrip('/')}/{owner}/{repo}/pull/{number}"),
                state=from_record(rec)[0])
    gave_up = rec.notices
    if gave_up:
        row.last_outcome = f"gave up on {gave_up[-1].what}: {gave_up[-1].error}"
    elif rec.last_error:
        row.last_outcome = f"not posted ({rec.last_error})"
    elif rec.draft and rec.status == "reviewing":
        row.last_outcome = "draft: waits until ready for review"
    elif rec.paused_by:
        row.last_outcome = f"paused by {rec.paused_by}: automatic reviews wait for /bot resume"
    else:
        row.last_outcome = f"no review yet ({rec.status})"
    row.reviews = rec.reviews_done
    row.last_ts, row.last = rec.updated_at.timestamp(), rec.updated_at.isoformat()
    return row


Key = tuple[str, str, str, int]


def _low(key: Key) -> tuple:
    return (key[0], key[1].lower(), key[2].lower(), key[3])


def _pr_key(e: Any) -> Key | None:
    pr = e.facts.get("pr")
    return (pr["account"], pr["owner"], pr["repo"], pr["number"]) if pr else None


def row_of(key: Key, members: list) -> PrRow:
    """A PR's row from its sessions (the main one and a team's personas). Members are taken
    newest activity first, ties by id, so a row is the same however the index got here."""
    row = PrRow(key, "")
    for e in sorted(members, key=lambda e: (-e.d["last_ts"], e.id)):
        pr = e.facts["pr"]
        main = pr.get("persona") in (None, "coordinator")
        if not row.session_id or (main and (
                pr.get("persona") is None or row.session_id.count(":persona:"))):
            row.session_id = e.id
        if main:
            row.title = pr.get("title") or row.title or e.title or e.id
            row.author = pr.get("author") or row.author
            row.url = web_url(pr.get("url")) or row.url   # an index from before the check
            row.state = from_facts(pr) or row.state
            mine = (pr.get("last_review") or {}).get("at") or ""
            if mine >= ((row.last_review or {}).get("at") or ""):
                row.last_review = pr.get("last_review") or row.last_review
                row.last_outcome = pr.get("last_outcome") or row.last_outcome
            row.reviews += pr.get("reviews", 0)
            row.findings += pr.get("findings", 0)
            row.noise = pr.get("noise") or row.noise
            row.questions += pr.get("questions", 0)
        row.turns += e.turns
        _add(row.usage, e.d["usage"])
        row.open_turn = row.open_turn or e.open_turn
        if e.d["last_ts"] > row.last_ts:
            row.last_ts, row.last = e.d["last_ts"], e.d["last"]
        for day, u in e.d["days"].items():
            _add(row.days.setdefault(day, [0, 0, 0, 0.0]), u)
    return row


def _newest_first(rows: Any) -> list[PrRow]:
    return sorted(rows, key=lambda r: (r.last_ts, r.key), reverse=True)


class PrIndex:
    """The PR rows, kept up to date incrementally: when the session index changed, only the
    PRs of the sessions that changed are folded again (``row_of``), and only the totals of
    their (account, repository) pairs are added up again; without a change list (the first
    build, a catalog that lost track) everything is built. Either way the result is the same
    (tests compare them)."""

    def __init__(self) -> None:
        self._source: Any = None
        self._records: Any = None
        self._merged_for: Any = None
        self._members: dict[Key, dict[str, Any]] = {}   # PR -> its sessions' entries by id
        self._key_of: dict[str, Key] = {}
        self._rows: dict[Key, PrRow] = {}
        self._extra: dict[Key, tuple[PrRecord, PrRow]] = {}   # PRs known only from a record
        self._pairs: dict[tuple[str, str], dict[str, Any]] = {}   # (account, repo) partials
        self._dirty: set[tuple[str, str]] = set()
        self._states: dict[tuple, tuple[PrRecord, str | None]] = {}
        # PRs whose rows were rebuilt since the records were last merged (None: all of them)
        self._touched: set[Key] | None = None
        self.session_rows: list[PrRow] = []
        self.rows: list[PrRow] = []
        self.repos: dict[str, dict[str, Any]] = {}
        self.accounts: dict[str, dict[str, Any]] = {}

    @property
    def source(self) -> Any:
        """The session index list the rows were built from."""
        return self._source

    def build(self, entries: list, changed: set[str] | None = None,
              entry_of: Any = None) -> None:
        """Rows from the session index ``entries``; ``changed``: the ids of the sessions that
        changed since the list last built from (with ``entry_of(id)`` -> entry or None)."""
        if entries is self._source:
            return
        if changed is None or entry_of is None or self._source is None:
            self._members, self._key_of = {}, {}
            for e in entries:
                key = _pr_key(e)
                if key is not None:
                    self._members.setdefault(key, {})[e.id] = e
                    self._key_of[e.id] = key
            self._rows = {k: row_of(k, list(m.values())) for k, m in self._members.items()}
            self._dirty = {(k[0], f"{k[1]}/{k[2]}") for k in self._rows} | set(self._pairs)
            self._touched = None
        else:
            touched: set[Key] = set()
            for sid in changed:
                old = self._key_of.pop(sid, None)
                if old is not None:
                    self._members.get(old, {}).pop(sid, None)
                    touched.add(old)
                e = entry_of(sid)
                key = _pr_key(e) if e is not None else None
                if key is not None:
                    self._members.setdefault(key, {})[sid] = e
                    self._key_of[sid] = key
                    touched.add(key)
            for key in touched:
                members = self._members.get(key)
                if members:
                    self._rows[key] = row_of(key, list(members.values()))
                else:
                    self._members.pop(key, None)
                    self._rows.pop(key, None)
                self._dirty.add((key[0], f"{key[1]}/{key[2]}"))
            if self._touched is not None:
                self._touched |= touched
        self.session_rows = self.rows = _newest_first(self._rows.values())
        self._source = entries
        self._merged_for = None   # with_records merges the records and adds up the totals

    def with_records(self, records: dict[tuple, tuple[PrRecord, str]]) -> None:
        """Add the PRs known only from work records (keys lower case: GitHub's names are not
        case-sensitive), then the totals; redone only when either side changed."""
        if records is self._records and self._merged_for is self._source:
            return
        if records is self._records and self._touched is not None:
            self._merge_touched(records)
        else:
            self._merge_all(records)
        self._touched = set()
        rows = self.session_rows
        if self._extra:
            rows = _newest_first([*rows, *(row for _, row in self._extra.values())])
        self.rows = rows
        self._totals()
        self._records, self._merged_for = records, self._source

    def _state(self, row: PrRow, low: tuple, got: tuple | None) -> None:
        if got is None:
            row.record_state = None
            self._states.pop(low, None)
            return
        known = self._states.get(low)   # from_record again only for a changed record
        if known is None or known[0] is not got[0]:
            known = self._states[low] = (got[0], from_record(got[0])[0])
        row.record_state = known[1]

    def _merge_touched(self, records: dict[tuple, tuple[PrRecord, str]]) -> None:
        """The same records, some PRs' rows rebuilt: merge only those."""
        for key in self._touched or ():
            low = _low(key)
            row = self._rows.get(key)
            if row is not None:
                self._state(row, low, records.get(low))
                if self._extra.pop(low, None) is not None:
                    self._dirty.add((low[0], f"{low[1]}/{low[2]}"))
            elif low in records and low not in self._extra and not any(
                    _low(k) == low for k in self._rows):   # its last session went
                rec, web = records[low]
                self._extra[low] = (rec, record_row(low, rec, web))
                self._dirty.add((low[0], f"{low[1]}/{low[2]}"))

    def _merge_all(self, records: dict[tuple, tuple[PrRecord, str]]) -> None:
        have = set()
        states: dict[tuple, tuple[PrRecord, str | None]] = {}
        for r in self.session_rows:
            low = _low(r.key)
            have.add(low)
            got = records.get(low)
            if got is None:
                r.record_state = None
                continue
            known = self._states.get(low)   # from_record again only for a changed record
            if known is None or known[0] is not got[0]:
                known = (got[0], from_record(got[0])[0])
            states[low] = known
            r.record_state = known[1]
        self._states = states
        extra: dict[Key, tuple[PrRecord, PrRow]] = {}
        for key, (rec, web) in records.items():
            if key in have:
                continue
            old = self._extra.get(key)
            if old is not None and old[0] is rec:
                extra[key] = old
            else:
                extra[key] = (rec, record_row(key, rec, web))
                self._dirty.add((key[0], f"{key[1]}/{key[2]}"))
        for key in self._extra.keys() - extra.keys():
            self._dirty.add((key[0], f"{key[1]}/{key[2]}"))
        self._extra = extra

    def _totals(self) -> None:
        """Totals per repository and account, from partial sums per (account, repository):
        only the pairs whose rows changed are added up again."""
        if self._dirty:
            dirty, fresh = self._dirty, {}
            # At 10,000 rows and one dirty pair (a review recorded) building every row's
            # "owner/name" text cost more than the sums: only rows whose account and name
            # end can match are looked at closely (every tail after a "/": names are data).
            ends = {(a, repo[i + 1:]) for a, repo in dirty
                    for i, c in enumerate(repo) if c == "/"}
            for r in self.rows:
                k = r.key
                if (k[0], k[2]) not in ends:
                    continue
                pair = (k[0], r.repo)
                if pair in dirty:
                    t = fresh.get(pair)
                    if t is None:
                        t = fresh[pair] = _zero()
                    _count(t, r)
            for pair in dirty:
                if pair in fresh:
                    self._pairs[pair] = fresh[pair]
                else:
                    self._pairs.pop(pair, None)
            self._dirty = set()
        repos: dict[str, dict[str, Any]] = {}
        accounts: dict[str, dict[str, Any]] = {}
        for (account, repo), part in sorted(self._pairs.items()):
            for table, name in ((repos, repo), (accounts, account)):
                t = table.get(name)
                if t is None:
                    t = table[name] = _zero()
                _merge(t, part)
        for table in (repos, accounts):
            for t in table.values():
                t["noise"] = noise.rates(t.pop("_noise"), t["reviewed"], t["usage"][3])
                days = t.pop("_days")
                if table is repos:
                    t["days"] = days
        self.repos, self.accounts = repos, accounts


def _zero() -> dict[str, Any]:
    return {"prs": 0, "reviews": 0, "questions": 0, "turns": 0, "usage": [0, 0, 0, 0.0],
            "reviewed": 0, "_noise": noise.empty(), "_days": {}}


def _count(t: dict[str, Any], r: PrRow) -> None:
    t["prs"] += 1
    t["reviews"] += r.reviews
    t["questions"] += r.questions
    t["turns"] += r.turns
    _add(t["usage"], r.usage)
    t["reviewed"] += r.reviews > 0
    if r.noise:
        noise.add(t["_noise"], r.noise)
    for day, u in r.days.items():
        _add(t["_days"].setdefault(day, [0, 0, 0, 0.0]), u)


def _merge(t: dict[str, Any], part: dict[str, Any]) -> None:
    for k in ("prs", "reviews", "questions", "turns", "reviewed"):
        t[k] += part[k]
    _add(t["usage"], part["usage"])
    noise.add(t["_noise"], part["_noise"])
    for day, u in part["_days"].items():
        _add(t["_days"].setdefault(day, [0, 0, 0, 0.0]), u)


class RecordCache:
    """Every account's PR records, keyed like the rows (lower case). Read once, then again
    behind the requests when older than ``RECORDS_TTL_S`` or ``RECORDS_BUDGET`` times what the
    last read cost (a list request never waits for a scan of the store after the first)."""

    def __init__(self) -> None:
        self.records: dict[tuple, tuple[PrRecord, str]] = {}
        self.read_at: float | None = None
        self._task: asyncio.Task | None = None
        self._texts: dict[str, str] = {}   # stored key -> the text its record was parsed from
        self._cost = 0.0   # CPU seconds the last read behind the requests took

    async def get(self, harness: Any) -> dict[tuple, tuple[PrRecord, str]]:
        if self.read_at is None:
            await self._read(harness)
        elif time.monotonic() - self.read_at > max(RECORDS_TTL_S, min(
                RECORDS_MAX_S, RECORDS_BUDGET * self._cost)) and (
                self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._read_quietly(harness),
                                             name="dsh-reviewer-records")
        return self.records

    async def _read_quietly(self, harness: Any) -> None:
        try:
            cpu = time.process_time()   # every thread's: parsing may run in a worker thread
            await self._read(harness)
            self._cost = time.process_time() - cpu
        except Exception:  # the list keeps the records it has; the next request tries again
            log.exception("reading the PR records for the web UI failed")

    async def _read(self, harness: Any) -> None:
        """Reads the stored texts and validates only those that changed since the last read;
        ``records`` stays the same object when nothing changed (the list then re-aggregates
        nothing): at 10,000 PRs a refresh costs a read of the texts, not 10,000 validations."""
        app = ReviewerApp.of(harness)
        domain = await harness.storage.domain(DOMAIN)
        texts = dict(await domain.texts(PRS))
        old = self._texts
        if texts == old and self.read_at is not None:
            self.read_at = time.monotonic()
            return
        by_key = {(k[0], f"{k[1]}/{k[2]}", k[3]): v for k, v in self.records.items()}
        changed = [k for k, t in texts.items() if old.get(k) != t]

        def parse() -> dict[str, PrRecord]:
            return {k: domain.parse(PRS, k, texts[k]) for k in changed}  # type: ignore[misc]
        fresh = await asyncio.to_thread(parse) if len(changed) > 200 else parse()
        out: dict[tuple, tuple[PrRecord, str]] = {}
        for key in texts:
            ref = PrRef.parse(key)
            account, repo, number = ref.account, ref.repo, ref.number
            acct = app.configured.get(account)
            if acct is None:
                continue
            owner, name = ref.owner, ref.name
            rec = fresh.get(key) or by_key[(account, repo, number)][0]
            out[(account, owner, name, number)] = (rec, acct.config.web_url)
        self.records, self._texts, self.read_at = out, texts, time.monotonic()


async def states_of(harness: Any, rows: list[PrRow],
                    cached: dict[tuple, tuple[PrRecord, str]] | None = None
                    ) -> dict[tuple, tuple[str | None, str]]:
    """(state, why) per row. A PR's state in its facts is as of its last turn, and a PR
    closed or merged since gets no new turn; its work record says so (``closed_seen_at``, set
    by the poller or a webhook), or is gone (pruned days after closing, once the account has
    polled). Reads the shown rows' records (a page costs O(page)); more rows than
    ``FRESH_ROWS`` use the ``cached`` records (read behind the requests, see RecordCache)."""
    app = ReviewerApp.of(harness)
    domain = await harness.storage.domain(DOMAIN)
    stores: dict[str, tuple[WorkStore, bool, dict[str, Any] | None]] = {}
    out: dict[tuple, tuple[str | None, str]] = {}
    for r in rows:
        acct = app.configured.get(r.key[0])
        if acct is None or r.state in ("merged", "closed"):
            out[r.key] = (r.state, LAST_TURN)
            continue
        if acct.key not in stores:
            store = WorkStore(domain, acct.key)
            polled = (await store.load_account()).last_tick_at is not None
            stores[acct.key] = (store, polled, None)
        store, polled, _ = stores[acct.key]
        if cached is not None and len(rows) > FRESH_ROWS:
            rec = (cached.get((acct.key, r.key[1].lower(), r.key[2].lower(), r.key[3]))
                   or (None, ""))[0]
        else:
            rec = await store.pr(PrRef(acct.key, r.repo, r.key[3]))
        if rec is not None:
            out[r.key] = from_record(rec)
        elif rec is None and polled and r.repo.lower() in {
                x.lower() for x in acct.config.repositories}:
            out[r.key] = ("closed", "closed or merged days ago (its record was pruned)")
        else:
            out[r.key] = (r.state, LAST_TURN)
    return out


LOOP = "github-reviewer:web-loop"   # harness.plugin_state: the loop serving the web UI
STATE_WAIT_S = 5.0


async def record_state(harness: Any, session_id: str) -> tuple[str, str] | None:
    """(state, why) of a PR session's PR from its work record; None without one."""
    key = parse_session_id(session_id)
    app = ReviewerApp.of(harness)
    if key is None or key.account not in app.configured:
        return None
    store = WorkStore(await harness.storage.domain(DOMAIN), key.account)
    rec = await store.pr(key.ref)
    return from_record(rec) if rec is not None else None


def state_now(harness: Any, session_id: str) -> tuple[str, str] | None:
    """``record_state`` for the PR page, whose view is built in a worker thread: the read runs
    on the web UI's loop (one record), the thread waits for it. None when it cannot be read
    (the page then shows the state of the PR's last turn)."""
    loop = harness.plugin_state.get(LOOP)
    if loop is None or loop.is_closed():
        return None
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        return None   # called on the loop itself (not by the page): never block it
    try:
        return asyncio.run_coroutine_threadsafe(record_state(harness, session_id), loop).result(
            STATE_WAIT_S)
    except Exception:  # the header falls back to the last turn's state; the page still shows
        log.warning("reading the work record of %s for its page failed", session_id,
                    exc_info=True)
        return None


def hit(u: list) -> float:
    prompt = u[0] + u[1]
    return 100.0 * u[1] / prompt if prompt else 0.0


def register(router: Any) -> None:
    index = PrIndex()
    records = RecordCache()
    try:
        router.harness.plugin_state[LOOP] = asyncio.get_running_loop()
    except RuntimeError:
        pass   # built outside a loop: PR pages show the state of the PR's last turn

    snapshot = PrSnapshot(Path(router.harness.home) / "web" / "prs.json")
    warm: dict[str, Any] = {}   # the saved list served after a restart until ``index`` is built
    charts: dict[str, Any] = {}   # the /prs charts, for the totals (``repos``) they show

    async def real() -> PrIndex:
        # The first request after a start reads the session index and the work records at
        # once (each mostly in a worker thread).
        catalog = router.catalog
        _, recs = await asyncio.gather(catalog.entries(), records.get(router.harness))
        entries = catalog.listing   # the newest list (a scan may have ended meanwhile)
        index.build(entries, catalog.changes_since(index.source), catalog.entry)
        index.with_records(recs)
        if snapshot.due(index.source, recs):
            data = snapshot.take(index, index.source, recs)
            keep(asyncio.create_task(asyncio.to_thread(snapshot.write, data)))
        return index

    def keep(task: asyncio.Task) -> None:
        warm.setdefault("writes", set()).add(task)
        task.add_done_callback(warm["writes"].discard)

    async def current() -> PrIndex:
        """The PR index; right after a restart, the saved one while the real one builds."""
        if index.source is not None or warm.get("none"):
            return await real()
        if "load" not in warm:
            warm["load"] = asyncio.create_task(asyncio.to_thread(snapshot.load, PrRow))
        got = await warm["load"]
        if got is None:
            warm["none"] = True
            return await real()
        if "index" not in warm:
            saved = warm["index"] = PrIndex()
            saved.rows = saved.session_rows = got["rows"]
            saved.repos, saved.accounts = got["repos"], got["accounts"]
        return warm["index"]

    async def build_behind() -> None:
        try:
            await real()
        except IndexBuilding:
            pass   # a cold session index: the next request starts this again
        except Exception as exc:  # the saved list stays served; the next request tries again
            log.warning("building the PR list behind the saved one failed: %s", exc)

    def behind(handler):
        """A handler that, once its page is made from the saved list, builds the real index
        behind it (so the first page after a restart never waits for that build)."""
        async def wrapped(request):
            response = await handler(request)
            if index.source is None and "index" in warm and (
                    warm.get("task") is None or warm["task"].done()):
                warm["task"] = asyncio.create_task(build_behind(), name="dsh-reviewer-prs")
            return response
        return wrapped

    async def prs_page(request):
        index = await current()
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
        if charts.get("for") is not index.repos:   # totals added up again: charts too
            charts.clear()
            charts["for"], charts["html"] = index.repos, {}
        html = charts["html"]

        def chart_of(name: str, make: Any) -> Any:
            # A chart per repository is an SVG over its days; the totals change only when a
            # scan brought a change, so most requests reuse the charts of the one before
            # (``make`` is the template's day_chart; the page's redaction still applies).
            if name not in html:
                html[name] = make(index.repos[name]["days"],
                                  f"{name}: cost and cache hits per day")
            return html[name]
        return await router.render(
            request, "reviewer_prs.html", rows=rows, chart_of=chart_of,
            total=len(shown), page=page, pages=pages, q=q, repo=repo, page_url=page_url,
            repos=index.repos, accounts=index.accounts, hit=hit,
            state_of=lambda r: states[r.key],
            charted=[repo] if repo in index.repos else sorted(
                index.repos, key=lambda n: index.repos[n]["usage"][3], reverse=True)[:CHARTS])

    async def prs_api(request):
        """Paged (``?page=`` from 1, ``?per_page=`` up to API_MAX_PAGE_SIZE), newest first; the
        totals cover every PR."""
        index = await current()
        try:
            per_page = min(API_MAX_PAGE_SIZE, max(1, int(request.query_params.get(
                "per_page", API_PAGE_SIZE))))
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            return router.json({"error": "page and per_page must be whole numbers"},
                               status=400)
        pages = max(1, math.ceil(len(index.rows) / per_page))
        rows = index.rows[(page - 1) * per_page: page * per_page]
        states = await states_of(router.harness, rows, await records.get(router.harness))
        return router.json({"total": len(index.rows), "page": page, "pages": pages,
                            "per_page": per_page, "prs": [{
            "account": r.key[0], "repo": r.repo, "number": r.key[3], "session": r.session_id,
            "title": r.title, "author": r.author, "state": states[r.key][0], "url": r.url,
            "last_review": r.last_review, "last_outcome": r.last_outcome,
            "reviews": r.reviews, "findings": r.findings, "questions": r.questions,
            "turns": r.turns,
            "cost_usd": r.usage[3], "cache_hit_pct": round(r.hit_pct, 1),
            "last_activity": r.last} for r in rows],
            "repositories": {k: {**v, "cache_hit_pct": round(hit(v["usage"]), 1)}
                             for k, v in index.repos.items()},
            "accounts": {k: {**v, "cache_hit_pct": round(hit(v["usage"]), 1)}
                         for k, v in index.accounts.items()}})

    async def status_page(request):
        data = await status_data(router.harness)
        # Link a PR to its session when it has one (a team review's is the coordinator's),
        # else to its row in the PR list: never to a page that does not exist.
        index = await current()
        sessions = {(r.key[0], f"{r.key[1]}/{r.key[2]}".lower(), r.key[3]): r.session_id
                    for r in index.rows if r.session_id}
        for a in data:
            for p in a["prs"]:
                repo, number = p["repo"], p["number"]
                p["session"] = sessions.get((a["account"], repo, number))
                p["list_url"] = "/prs?" + urlencode({"repo": repo, "q": f"#{number}"})
        return await router.render(request, "reviewer_status.html", accounts=data,
                                   default_model=router.harness.config.default_model)

    async def status_api(request):
        return router.json(await status_data(router.harness))

    async def attention_items(request) -> tuple[list[attention.Attention], str, str, str]:
        index = await current()
        recs = await records.get(router.harness)
        app = ReviewerApp.of(router.harness)
        domain = await router.harness.storage.domain(DOMAIN)
        accounts = {name: await WorkStore(domain, name).load_account()
                    for name in app.configured}
        now = utcnow()
        items = []
        for r in index.rows:
            got = recs.get((r.key[0], r.key[1].lower(), r.key[2].lower(), r.key[3]))
            a = attention.reasons_of(r, got[0] if got else None, accounts.get(r.key[0]), now)
            if a.reasons:
                items.append(a)
        q = request.query_params.get("q", "").strip()
        repo = request.query_params.get("repo", "").strip()
        reason = request.query_params.get("reason", "").strip()
        shown = [a for a in items if (not repo or a.row.repo == repo)
                 and (not reason or reason in a.reasons) and (not q or a.matches(q))]
        return shown, q, repo, reason

    async def attention_page(request):
        shown, q, repo, reason = await attention_items(request)
        return await router.render(
            request, "reviewer_attention.html", items=shown, counts=attention.counts(shown),
            q=q, repo=repo, reason=reason, reasons=attention.REASON_WORDS,
            state_of=lambda r: (r.shown_state, ""))

    async def attention_api(request):
        shown, *_ = await attention_items(request)
        return router.json({"total": len(shown), "by_repository": attention.counts(shown),
                            "prs": [{"account": a.row.key[0], "repo": a.row.repo,
                                     "number": a.row.key[3], "title": a.row.title,
                                     "session": a.row.session_id, "state": a.row.shown_state,
                                     "reasons": a.reasons, "why": a.why,
                                     "open_by_severity": (a.row.noise or {}).get(
                                         "open_by_severity", {})} for a in shown]})

    async def repository_page(request):
        index = await current()
        name = request.query_params.get("name", "").strip()
        t = index.repos.get(name)
        if t is None:
            return await router.render(request, "reviewer_repository.html", name=name,
                                       t=None, hit=hit, status=404)
        return await router.render(request, "reviewer_repository.html", name=name, t=t,
                                   hit=hit)

    router.add_page("/prs", behind(prs_page), "Pull requests", home=True)
    router.add_page("/attention", behind(attention_page), "Needs a maintainer")
    router.add_route("/repository", behind(repository_page))
    router.add_route("/api/github-reviewer/attention", behind(attention_api))
    router.add_route("/api/github-reviewer/prs", behind(prs_api))
    router.add_page("/github-reviewer", behind(status_page), "Reviewer status")
    router.add_route("/api/github-reviewer/status", status_api)
