"""The web UI's view of all sessions: an index of digests kept up to date incrementally.

Each session's digest (``digest.py``) is folded from its log once, then only from the bytes
appended since (file stamp = mtime and size; a log that shrank is read again). The index
persists in ``<home>/web/index.json``, so a fresh ``dsh web`` over 10,000 sessions starts from
it instead of reading every log. Without a usable index file (the first start, an upgrade that
changed the digests) the index is built in the background: a request waits for it at most
``COLD_WAIT_S``, then gets ``IndexBuilding`` (the app answers 503 with a page that says how far
the build is and reloads itself). Requests never wait for the directory scan once the index is
loaded: a page is served from memory and, when the last scan is older than ``scan_ttl_s``, a
background scan refreshes the index for the next request. A scan stats every log (10,000
logs: ~60 ms of CPU), so the interval also grows with what the last scan cost (``SCAN_BUDGET``
times it, at most ``SCAN_MAX_S``): scans stay a small share of the CPU however big the home.
Session pages follow one log the same way (``LiveLog``), so a poll of a growing log reads only
its new lines. Nothing here writes a session log: reading never resumes a session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sessions.events import SessionHeader, Usage
from . import digest as dg

log = logging.getLogger(__name__)

LOG_CACHE_SIZE = 32
HISTORY = 64  # swaps of the list remembered for ``changes_since`` (readers fall behind little)
INDEX_VERSION = 5  # bump when digest.fold or a facts fold changes: persisted indexes rebuild
SCAN_TTL_S = 2.0
# The next scan waits at least 150 times the CPU the last one took: scans stay under 1 % of a
# core (10,000 logs: a scan costs ~60 ms, so one every 9-20 s), and a request every 2 s does
# not pay for one each time.
SCAN_BUDGET = 150
SCAN_MAX_S = 20.0  # ... but never longer than this (a busy `dsh run` inflates the measure)
# The index file is rewritten after a big change at once, else at most this often (a live
# session changes every poll; losing recent updates only means re-reading those tails).
SAVE_EVERY_S = 30.0
# ... or less often in a big home: a save rewrites the whole file (10,000 sessions: ~13 MB,
# ~80 ms of CPU), so one review recorded every few seconds made saves a third of the list's
# CPU. The interval is at least SAVE_BUDGET times what the last save cost (at most
# SAVE_MAX_S): under 0.1 % of a core. A restart re-reads only the tails appended since.
SAVE_BUDGET = 1000
SAVE_MAX_S = 300.0
COLD_WAIT_S = 3.0  # longer than any small home needs: only big cold starts see the page
# A start over a saved index only loads it and stats the logs (10,000 sessions: about a second
# of CPU): the request waits for that rather than show "building" for an index that exists.
INDEX_WAIT_S = 15.0


class IndexBuilding(Exception):
    """The first index build is still running: ``read`` of ``total`` logs read so far."""

    def __init__(self, read: int, total: int | None):
        super().__init__(f"building the session index: {read:,} of "
                         f"{'?' if total is None else f'{total:,}'} logs read")
        self.read, self.total = read, total


def public_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """Plugin facts without their fold state (keys starting with ``_``, one level down)."""
    return {k: ({kk: vv for kk, vv in v.items() if not str(kk).startswith("_")}
                if isinstance(v, dict) else v)
            for k, v in facts.items() if not str(k).startswith("_")}


class CatalogEntry:
    """One session of the index (read-only view of its digest)."""

    __slots__ = ("_json", "d", "offset", "stamp")

    def __init__(self, d: dict[str, Any], stamp: Any, offset: int):
        self.d, self.stamp, self.offset = d, stamp, offset
        self._json: str | None = None

    def saved(self) -> str:
        """The entry as the index file stores it, serialized once: an entry is replaced, never
        changed, so saving 10,000 entries after one changed serializes one (~200 ms less)."""
        if self._json is None:
            self._json = json.dumps([self.d, self.stamp, self.offset], ensure_ascii=False,
                                    separators=(",", ":"))
        return self._json

    id = property(lambda self: self.d["id"])
    title = property(lambda self: self.d["title"])
    group = property(lambda self: self.d["group"])
    link = property(lambda self: self.d["link"])
    turns = property(lambda self: self.d["turns"])
    open_turn = property(lambda self: self.d["open"])
    facts = property(lambda self: self.d["facts"])
    meta = property(lambda self: self.d["meta"])
    last = property(lambda self: self.d["last"])
    usage = property(lambda self: dg.usage_of(self.d))
    cache_hit_pct = property(lambda self: dg.hit_pct(self.d["usage"]))

    def matches(self, text: str) -> bool:
        hay = " ".join([self.id, self.title or "", *self.group]).lower()
        return all(word in hay for word in text.lower().split())

    def row(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "group": self.group, "link": self.link,
                "last_activity": self.last, "turns": self.turns, "open_turn": self.open_turn,
                "usage": self.usage.model_dump(), "cache_hit_pct": round(self.cache_hit_pct, 1),
                "facts": public_facts(self.facts)}


@dataclass
class LiveLog:
    """A session log followed by a page: events so far and the digest of them."""

    header: SessionHeader
    events: list = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    offset: int = 0
    stamp: Any = None
    digest: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def after(self, seq: int) -> list:
        return self.events[bisect_right(self.seqs, seq):]

    @property
    def usage(self) -> Usage:
        return dg.usage_of(self.digest)


class SessionCatalog:
    def __init__(self, harness: Any, scan_ttl_s: float = SCAN_TTL_S):
        self.harness = harness
        self.scan_ttl_s = scan_ttl_s
        self._entries: dict[str, CatalogEntry] = {}
        self._sorted: list[CatalogEntry] = []
        # (the list before a swap, the ids that changed in it) for the last HISTORY swaps
        self._history: list[tuple[list[CatalogEntry], set[str] | None]] = []
        self._scanned_at: float | None = None
        self._saved_at = 0.0
        self._scan_task: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self._logs: OrderedDict[str, LiveLog] = OrderedDict()
        self._loading: dict[str, asyncio.Lock] = {}
        self._groups: tuple[list, list] | None = None
        self._totals: tuple[list, dict] | None = None
        self._persist_key = self._key()
        self._scan_cpu = 0.0  # CPU seconds the last scan took (its own thread's and the loop's)
        self._save_cpu = 0.0  # CPU seconds the last save of the index file took
        self._read = 0  # logs read by the running scan (the cold-start page shows it)
        self._to_read: int | None = None

    @property
    def store(self) -> Any:
        return self.harness.sessions.store

    @property
    def index_path(self) -> Path:
        return Path(self.harness.home) / "web" / "index.json"

    def _key(self) -> str:
        """Changes when the code that folds digests may have changed: then rebuild."""
        try:
            plugins = sorted(f"{p.name}={p.version}" for p in self.harness.plugin_listing())
        except Exception:
            plugins = []
        return json.dumps([INDEX_VERSION, plugins])

    # -- the index ---------------------------------------------------------------------------

    async def entries(self) -> list[CatalogEntry]:
        """All sessions, newest activity first, from memory; stale ones refresh behind."""
        if self._scanned_at is None:
            if self._scan_task is None or self._scan_task.done():
                self._scan_task = asyncio.create_task(self.refresh(), name="dsh-web-index")
            wait = INDEX_WAIT_S if self._saved_index_exists() else COLD_WAIT_S
            try:
                await asyncio.wait_for(asyncio.shield(self._scan_task), wait)
            except TimeoutError:
                raise IndexBuilding(self._read, self._to_read) from None
        elif (time.monotonic() - self._scanned_at > max(self.scan_ttl_s, min(
                SCAN_MAX_S, SCAN_BUDGET * self._scan_cpu))
              and (self._scan_task is None or self._scan_task.done())):
            self._scan_task = asyncio.create_task(self._background_refresh(),
                                                  name="dsh-web-scan")
        return self._sorted

    @property
    def listing(self) -> list[CatalogEntry]:
        """The current list (what ``entries`` returns), without starting a scan."""
        return self._sorted

    def entry(self, session_id: str) -> CatalogEntry | None:
        """The current entry of one session (None: not in the index)."""
        return self._entries.get(session_id)

    def changes_since(self, listing: Any) -> set[str] | None:
        """The ids of the sessions that changed (updated, added or gone) between ``listing``,
        a list ``entries`` returned before, and the current one; None when unknown (a list
        from too long ago, or the first): a reader then rebuilds from the whole list."""
        if listing is self._sorted:
            return set()
        out: set[str] = set()
        for i in range(len(self._history) - 1, -1, -1):
            before, ids = self._history[i]
            if ids is None:
                return None
            out |= ids
            if before is listing:
                return out
        return None

    def _swap(self, new: list[CatalogEntry], ids: set[str] | None) -> None:
        """Publish a new list; remember which sessions changed since the one before."""
        self._history.append((self._sorted, ids))
        del self._history[:-HISTORY]
        self._sorted = new

    def _saved_index_exists(self) -> bool:
        try:
            return self.index_path.stat().st_size > 0
        except OSError:
            return False

    async def _background_refresh(self) -> None:
        try:
            cpu = time.process_time()   # every thread's: the stats run in a worker thread
            await self.refresh()
            self._scan_cpu = time.process_time() - cpu
        except Exception:  # the next request tries again; the index in memory stays served
            log.exception("web index refresh failed")

    async def refresh(self) -> list[CatalogEntry]:
        """Scan now: only logs whose stamp changed are read, from where they were left."""
        async with self._lock:
            if self._scanned_at is None and not self._entries:
                # Both wait mostly on the disk: the index file and the directory's stamps.
                _, stamps = await asyncio.gather(asyncio.to_thread(self._load_index),
                                                 self.store.list_stamped())
            else:
                stamps = await self.store.list_stamped()
            changed = [(sid, st) for sid, st in stamps
                       if st is None or (e := self._entries.get(sid)) is None or e.stamp != st]
            if not changed and len(stamps) == len(self._entries) and self._sorted:
                # Every log listed has its entry, unchanged, and none is gone: nothing to do.
                self._scanned_at = time.monotonic()
                return self._sorted
            self._read, self._to_read = 0, len(changed)
            updated = await self._read_changed(changed)
            live = {sid for sid, _ in stamps}
            entries = {sid: e for sid, e in self._entries.items() if sid in live}
            entries.update(updated)
            if updated or len(entries) != len(self._entries):
                gone = self._entries.keys() - entries.keys()
                self._entries = entries
                self._swap(sorted(entries.values(), key=lambda e: e.d["last_ts"],
                                  reverse=True), {*updated, *gone})
                if len(updated) > 100 or time.monotonic() - self._saved_at > max(
                        SAVE_EVERY_S, min(SAVE_MAX_S, SAVE_BUDGET * self._save_cpu)):
                    await asyncio.to_thread(self._save_index)
                    self._saved_at = time.monotonic()
            elif not self._sorted and entries:
                self._swap(sorted(entries.values(), key=lambda e: e.d["last_ts"],
                                  reverse=True), None)
            self._scanned_at = time.monotonic()
            return self._sorted

    async def _read_changed(self, changed: list) -> dict[str, CatalogEntry]:
        sync = getattr(self.store, "read_from_sync", None)
        if sync is not None:
            def read_all() -> dict[str, CatalogEntry]:
                out: dict[str, CatalogEntry] = {}
                for sid, st in changed:
                    e = self._advance(sid, st, lambda s, o: sync(s, o))
                    if e is not None:
                        out[sid] = e
                    self._read += 1
                return out
            return await asyncio.to_thread(read_all)
        out = {}
        for sid, st in changed:
            # A store that serves its log's bytes (postgres) is read from where it was left.
            old = self._entries.get(sid)
            size = st[1] if isinstance(st, tuple) else None
            offset = old.offset if old is not None and size is not None \
                and size >= old.offset else 0
            try:
                data = await self.store.read_from(sid, offset)
            except Exception:
                continue
            if data is not None:
                entry = await asyncio.to_thread(self._advance, sid, st,
                                                lambda s, o, data=data, at=offset:
                                                data[o - at:])
                if entry is not None:
                    out[sid] = entry
                continue
            try:  # other stores: whole log through the store's own load
                loaded = await self.store.load(sid)
            except Exception:
                continue
            d = self._new_digest(loaded.header)
            self._fold(d, loaded.header, loaded.events)
            out[sid] = CatalogEntry(d, st, 0)
        return out

    def _advance(self, sid: str, stamp: Any, read) -> CatalogEntry | None:
        """The entry for ``sid`` after reading what was appended (in a worker thread)."""
        old = self._entries.get(sid)
        size = stamp[1] if isinstance(stamp, tuple) else None
        try:
            if old is not None and size is not None and size >= old.offset:
                header_d = old.d
                _, events, used = dg.parse_lines(read(sid, old.offset), want_header=False)
                d = json.loads(json.dumps(header_d))  # a copy: pages may be rendering the old
                self._fold(d, SessionHeader.model_validate(
                    {"id": sid, "created_at": d["created"], "meta": d["meta"]}), events)
                return CatalogEntry(d, stamp, old.offset + used)
            header, events, used = dg.parse_lines(read(sid, 0), want_header=True)
            if header is None or header.id != sid:
                return None
            d = self._new_digest(header)
            self._fold(d, header, events)
            return CatalogEntry(d, stamp, used)
        except Exception as exc:  # corrupted or vanished: its own page says why
            log.debug("web index skips %s: %s", sid, exc)
            return None

    def _new_digest(self, header: SessionHeader) -> dict[str, Any]:
        hook = self.harness.plugins.hook
        group = hook.dsh_session_group(harness=self.harness, session=header) or []
        link = hook.dsh_session_link(harness=self.harness, session=header)
        if not (isinstance(link, str) and link.startswith(("https://", "http://"))):
            link = None
        return dg.new_digest(header, [str(g) for g in group], link)

    def _fold(self, d: dict[str, Any], header: SessionHeader, events: list) -> None:
        dg.fold(d, events)
        if events:
            self.harness.plugins.hook.dsh_web_session_facts(
                harness=self.harness, session=header, facts=d["facts"], events=events)

    # -- persistence -------------------------------------------------------------------------

    def _load_index(self) -> None:
        try:
            data = json.loads(self.index_path.read_bytes())
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or data.get("key") != self._persist_key:
            return
        for sid, (d, stamp, offset) in data.get("sessions", {}).items():
            self._entries[sid] = CatalogEntry(d, tuple(stamp) if stamp else None, offset)

    def _save_index(self) -> None:
        """Best effort (a read-only home just means a slower cold start)."""
        cpu = time.thread_time()   # runs in a worker thread: that thread's CPU is the cost
        try:
            self._write_index()
        finally:
            self._save_cpu = time.thread_time() - cpu

    def _write_index(self) -> None:
        path = self.index_path
        sessions = ",".join(json.dumps(sid, ensure_ascii=False) + ":" + e.saved()
                            for sid, e in list(self._entries.items()) if e.stamp is not None)
        text = ('{"key":' + json.dumps(self._persist_key, ensure_ascii=False)
                + ',"sessions":{' + sessions + "}}")
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp.write_text(text, encoding="utf-8")
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("web index not saved: %s", exc)
            with contextlib.suppress(OSError):
                tmp.unlink()

    # -- one session -------------------------------------------------------------------------

    async def log(self, session_id: str) -> LiveLog:
        """A session's log, reading only what was appended since the last call."""
        live = self._logs.get(session_id)
        stamp = await self.store.stamp(session_id)
        if live is not None and stamp is not None and live.stamp == stamp:
            self._logs.move_to_end(session_id)
            return live
        if live is None or stamp is None or not isinstance(stamp, tuple) \
                or stamp[1] < live.offset:
            # One reader per session: 50 viewers arriving at once share one read.
            lock = self._loading.setdefault(session_id, asyncio.Lock())
            async with lock:
                again = self._logs.get(session_id)
                if again is not None and again is not live and again.stamp == stamp:
                    return again
                live = await self._load_whole(session_id, stamp)
            self._loading.pop(session_id, None)
        else:
            async with live.lock:
                if live.stamp != stamp:
                    data = await self.store.read_from(session_id, live.offset)
                    try:
                        _, events, used = await asyncio.to_thread(dg.parse_lines, data, False)
                    except dg.DigestError:
                        events, used = None, 0
                    if events is None:  # a bad line: the whole load reports where
                        live = await self._load_whole(session_id, stamp)
                    else:
                        self._append(live, events)
                        live.offset += used
                        live.stamp = stamp
        self._logs[session_id] = live
        self._logs.move_to_end(session_id)
        while len(self._logs) > LOG_CACHE_SIZE:
            self._logs.popitem(last=False)
        return live

    async def _load_whole(self, session_id: str, stamp: Any) -> LiveLog:
        data = await self.store.read_from(session_id, 0)
        if data is not None:  # a store that serves its log's bytes: later reads are tails
            try:
                header, events, used = await asyncio.to_thread(dg.parse_lines, data, True)
            except dg.DigestError:
                header = None
            if header is not None and header.id == session_id:
                live = LiveLog(header=header, stamp=stamp, digest=self._new_digest(header))
                if used < len(data):
                    live.notes.append(f"a torn final line of {len(data) - used} bytes is not "
                                      "shown")
                self._append(live, events)
                live.offset = used
                return live
        loaded = await self.store.load(session_id)  # raises with the store's own message
        live = LiveLog(header=loaded.header, notes=list(loaded.notes), stamp=stamp,
                       digest=self._new_digest(loaded.header))
        self._append(live, loaded.events)
        live.offset = 1 << 62  # unknown: any change reloads the whole log
        return live

    def _append(self, live: LiveLog, events: list) -> None:
        live.events.extend(events)
        live.seqs.extend(e.seq for e in events)
        self._fold(live.digest, live.header, events)

    async def exists(self, session_id: str) -> bool:
        try:
            return await self.store.exists(session_id)
        except Exception:
            return False

    def public_error(self, exc: Exception) -> str:
        """An error about a log, fit for a page: file paths replaced by the file's name."""
        text = str(exc)
        directory = getattr(self.store, "directory", None)
        if directory is not None:
            text = text.replace(str(directory) + "/", "")
        return text.replace(str(self.harness.home), "<home>")

    def groups_of(self, entries: list[CatalogEntry]) -> list[tuple[str, int, int]]:
        """The group tree, computed again only when the index list changed."""
        if self._groups is None or self._groups[0] is not entries:
            self._groups = (entries, self.groups(entries))
        return self._groups[1]

    def totals_of(self, entries: list[CatalogEntry]) -> dict[str, Any]:
        """Turns and usage over all sessions (cached like the group tree)."""
        if self._totals is None or self._totals[0] is not entries:
            acc = [0, 0, 0, 0.0]
            turns = 0
            for e in entries:
                turns += e.turns
                for i, v in enumerate(e.d["usage"]):
                    acc[i] += v
            self._totals = (entries, {"turns": turns, "usage": acc,
                                      "cache_hit_pct": dg.hit_pct(acc)})
        return self._totals[1]

    @staticmethod
    def groups(entries: list[CatalogEntry]) -> list[tuple[str, int, int]]:
        """(group path, depth, session count) for the group tree, sorted by path."""
        counts: dict[tuple[str, ...], int] = {}
        for e in entries:
            for depth in range(1, len(e.group) + 1):
                key = tuple(e.group[:depth])
                counts[key] = counts.get(key, 0) + 1
        return [(" / ".join(k), len(k) - 1, n) for k, n in sorted(counts.items())]
