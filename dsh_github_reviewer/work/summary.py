"""Keeping the PR's summary comment current (``pr_output/summary.py`` renders and posts it):
when a review starts ("reviewing <sha>…"), after it is posted, and after a ``/bot`` answer.
It never fails the work it follows: a GitHub error is logged and the next update catches up.

The findings, their states and the session's cost are read in full once per review (after it
is posted, or after a /bot answer); the "reviewing"/"waiting" update at the start of the next
review only changes the head line and the walkthrough, so it re-renders the findings this
process read last time instead of listing every bot comment and thread state again (per-review
CPU stays flat as a PR's history grows). Another process, or a restart, reads them in full.
The session log is scanned incrementally (see ``_from_session``)."""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import replace
from typing import Any

from ..core.session_key import PrRef
from ..core.severity import SEVERITIES
from ..core.triggers import Trigger, is_bot_review, meta_trigger, posted_trigger
from ..github import votes
from ..github.errors import GitHubError
from ..github.models import ReviewComment
from ..github.threads import ThreadState, thread_states
from ..pr_output.summary import (
    Drafted,
    Summary,
    Waiting,
    findings_of,
    listed_findings,
    render,
    upsert,
)
from ..reviewers.team.personas import COORDINATOR
from . import second_look, second_look_summary
from .context import ReviewDeps, WorkContext

log = logging.getLogger(__name__)
FILES_PAGE_CAP = 30
COMMENT_TOOL = "add_comment_to_pending_review"
# The last summary read in full, per (account, PR): at most this many PRs.
LAST_READ_CAP = 512
_last_read: OrderedDict[tuple[str, str, PrRef], Summary] = OrderedDict()


def _remember(at: tuple[str, str, PrRef], summary: Summary) -> None:
    _last_read[at] = summary
    _last_read.move_to_end(at)
    while len(_last_read) > LAST_READ_CAP:
        _last_read.popitem(last=False)


async def update_summary(ctx: ReviewDeps | WorkContext, ref: PrRef, *, reviewing: str | None,
                         last_reviewed: str | None, waiting: Waiting | None = None,
                         states: dict[int, ThreadState] | None = None) -> None:
    """``waiting``: the review cannot run while the account is paused (said instead of
    "reviewing", which would otherwise stay up for the whole pause). ``states``: the bot's
    threads' resolution states as the caller just read them (a thread missing is open);
    None: read here."""
    if not ctx.cfg.review.summary:
        return
    owner, name, number = ref.owner, ref.name, ref.number
    client, me = ctx.client, ctx.acct.identity
    try:
        files = await client.list_pull_files(owner, name, number, max_pages=FILES_PAGE_CAP)
        at = (ctx.cfg.api_url, ctx.acct.key, ref)
        known = _last_read.get(at) if (reviewing or waiting) else None
        # Only what was read after the review the record last recorded (another process's
        # later review, or another GitHub with the same names, is read in full).
        if known is not None and known.last_reviewed == last_reviewed:
            summary = replace(known, files=files, reviewing=None if waiting else reviewing,
                              waiting=waiting, last_reviewed=last_reviewed)
            await upsert(client, owner, name, number, render(summary), me)
            return
        reviews = [r for r in await client.list_reviews(owner, name, number)
                   if r.state != "PENDING" and is_bot_review(r, me)]
        ids = {r.id for r in reviews}
        comments = await client.list_review_comments(owner, name, number) if ids else []
        roots = any(c.pull_request_review_id in ids and c.in_reply_to_id is None
                    for c in comments)
        if states is None:
            states = await thread_states(client, owner, name, number) if roots else {}
        down = await _voted_down(ctx, owner, name, number, comments, ids)
        summary = Summary(files=files, findings=findings_of(comments, ids, states, me, down),
                          reviewing=None if waiting else reviewing, waiting=waiting,
                          last_reviewed=last_reviewed, reviews=len(reviews))
        drafted = await _from_session(ctx, ref, summary)
        posted = {t: r.html_url for r in reviews
                  if (t := posted_trigger(r, me)) is not None}
        # The second look's dropped findings are listed in their own section, not as open.
        # (Recorded by the daemon's work only: CI keeps no records, so it has none.)
        found = await second_look.outcomes(ctx.store.domain, ref) \
            if ctx.store is not None else []
        dropped = second_look_summary.dropped_of(found, posted)
        gone = {(t, c.path, c.line, c.text) for t, c in dropped}
        drafted = [d for d in drafted if (d.trigger, d.path, d.line,
                                          d.body.strip().split("\n", 1)[0]) not in gone]
        summary.second_look = await second_look_summary.section(ctx, ref, dropped)
        summary.findings += listed_findings(drafted, posted, comments, ids)
        _remember((ctx.cfg.api_url, ctx.acct.key, ref), summary)
        await upsert(client, owner, name, number, render(summary), me)
    except GitHubError as exc:
        log.warning("%s: summary comment not updated: %s", ref, exc)


async def _voted_down(ctx: ReviewDeps | WorkContext, owner: str, name: str, number: int,
                      comments: list[ReviewComment], ids: set[int]) -> set[int]:
    """The bot's threads a 👎 that counts dismissed (``github/votes.py``); the PR (for its
    author) and the reaction lists are read only when some thread's roll-up shows a 👎."""
    # (The 👎 test first: it is rare, and this runs over every comment at every update.)
    roots = [c for c in comments if c.reactions is not None and c.reactions.minus_one > 0
             and c.in_reply_to_id is None and c.pull_request_review_id in ids
             and ctx.acct.identity.wrote(c)]
    if not roots:
        return set()
    author = (await ctx.client.get_pull(owner, name, number)).user.login
    return set(await votes.dismissed(ctx.client, owner, name, number, roots, comments, author,
                                     ctx.cfg.review.command_author_associations))


async def _from_session(ctx: ReviewDeps | WorkContext, ref: PrRef, summary: Summary
                        ) -> list[Drafted]:
    """From the PR session's log (no model call): its tokens and cost, into ``summary``, and
    the findings each review trigger's last attempt drafted (the accepted
    add_comment_to_pending_review calls: facts the log keeps as data), returned — from the
    team coordinator's session too, where a team account drafts its findings.

    Each log is scanned once: what a scan found is kept with the last event it saw, and the
    next update scans only the events after it when the session's events are the same list
    grown (a released session kept in memory); any other log is scanned whole."""
    pr = ref.session()
    harness = getattr(ctx.runner, "harness", None)   # the reviewers hold the harness
    if harness is None:
        return []
    by_trigger: dict[Trigger, list[Drafted]] = {}
    for sid, costs in ((pr.session_id, True), (pr.with_persona(COORDINATOR).session_id, False)):
        try:
            events = await harness.sessions.read_events(sid)
        except Exception:   # no such session (or unreadable): nothing from it
            continue
        scan = _scans.get(sid)
        if scan is None or not scan.continues(events):
            scan = _Scan()
        scan.feed(events)
        _scans[sid] = scan
        _scans.move_to_end(sid)
        while len(_scans) > LAST_READ_CAP:
            _scans.popitem(last=False)
        if costs:
            summary.cost_usd += scan.cost_usd
            summary.prompt_tokens += scan.prompt_tokens
            summary.cache_read_tokens += scan.cache_read_tokens
        for trigger, found in scan.by_trigger.items():
            by_trigger[trigger] = list(found)   # a later attempt (or session) replaces it
    return [d for found in by_trigger.values() for d in found]


class _Scan:
    """What one session log's events said so far, and where the scan stopped (the count of
    events seen and the last one itself: the same object at that place means the same log)."""

    def __init__(self) -> None:
        self.count = 0
        self.last: object | None = None
        self.cost_usd = 0.0
        self.prompt_tokens = 0
        self.cache_read_tokens = 0
        self.trigger: Trigger | None = None
        self.calls: dict[str, dict[str, Any]] = {}
        self.by_trigger: dict[Trigger, list[Drafted]] = {}

    def continues(self, events: list) -> bool:
        return self.count > 0 and len(events) >= self.count \
            and events[self.count - 1] is self.last

    def feed(self, events: list) -> None:
        for e in events[self.count:]:
            usage = getattr(e, "usage", None) if e.type in (
                "assistant_message", "compaction") else None
            if usage is not None:
                self.cost_usd += usage.cost_usd
                self.prompt_tokens += usage.prompt
                self.cache_read_tokens += usage.cache_read
            if e.type == "turn_start":
                meta = e.meta or {}
                # (An old turn's meta that names no trigger drafted nothing for a posted one.)
                trigger = meta_trigger(meta) if meta.get("flow") == "review" else None
                self.trigger = trigger
                if trigger is not None:
                    self.by_trigger[trigger] = []   # a new attempt: only the last one posted
                self.calls = {}
            elif e.type == "assistant_message" and self.trigger is not None:
                for c in e.tool_calls:
                    if c.name == COMMENT_TOOL:
                        self.calls[c.id] = _args(c.arguments)
            elif e.type == "tool_result" and self.trigger is not None and not e.is_error \
                    and e.call_id in self.calls:
                if (d := _drafted(self.trigger, self.calls.pop(e.call_id))) is not None:
                    self.by_trigger[self.trigger].append(d)
        self.count = len(events)
        self.last = events[-1] if events else None


# The scan of each session log read last (by session id): at most LAST_READ_CAP of them.
_scans: OrderedDict[str, _Scan] = OrderedDict()


def _args(arguments: str) -> dict[str, Any]:
    try:
        args = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return {}
    return args if isinstance(args, dict) else {}


def _drafted(trigger: Trigger, args: dict[str, Any]) -> Drafted | None:
    """An accepted call's arguments (the guard validated them before accepting)."""
    path, body = args.get("path"), args.get("body")
    if not isinstance(path, str) or not isinstance(body, str):
        return None

    def number(k: str) -> int | None:
        v = args.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    line = number("line") if args.get("subjectType") == "LINE" else None
    sev = args.get("severity")
    return Drafted(trigger=trigger, path=path.strip().removeprefix("./"), body=body,
                   severity=sev if sev in SEVERITIES else None, line=line,
                   side=args.get("side") if line and args.get("side") == "LEFT" else None,
                   start_line=number("startLine") if line else None)
