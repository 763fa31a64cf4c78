"""The work records' arithmetic: backoff, what is due when, attempts, caps and pruning.

Intervals and failure counts are chosen so that ``2 ** n * interval`` differs from ``2 * n *
interval``, ``n ** 2 * interval`` and ``2 ** n / interval``, and the caps are probed at their
exact edges.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsh_github_reviewer.core.session_key import PrKey, PrRef
from dsh_github_reviewer.core.triggers import Trigger
from dsh_github_reviewer.work.records import (
    FIX_ATTEMPTS,
    MAX_BACKOFF,
    NOTICES_KEPT,
    PROCESSED_IDS_CAP,
    PRUNE_AFTER,
    Command,
    Notice,
    PrRecord,
    backoff,
    instructions_key,
    migrate_v1,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def sec(s: float) -> timedelta:
    return timedelta(seconds=s)


@pytest.mark.parametrize(("attempts", "interval", "wait"), [
    (0, 3, 3),            # 2**0 = 1: one interval
    (1, 3, 6),
    (3, 3, 24),           # not 2*3*3 = 18, 3**2*3 = 27, 2**3/3
    (4, 5, 80),
    (3, 0.5, 4),          # fractional intervals multiply, not divide
    (10, 1, 1024),        # the exponent stops at 10...
    (11, 1, 1024),        # ...so 11 failures wait as long as 10
    (40, 1, 1024),
    (1, 900, 1800),       # exactly the cap
    (1, 901, 1800),       # above it: the cap
    (5, 60, 1800),        # 32 min -> 30 min
    (4, 112.5, 1800),     # 16 * 112.5 = 1800 exactly
])
def test_backoff(attempts, interval, wait):
    assert backoff(attempts, interval) == sec(wait)


def test_max_backoff_is_thirty_minutes():
    assert MAX_BACKOFF == timedelta(minutes=30)


def pr(**kw) -> PrRecord:
    return PrRecord(head_sha="h", status=kw.pop("status", "reviewing"), updated_at=T0, **kw)


def command(cid: int, **kw) -> Command:
    return Command(comment_id=cid, kind="bot", source="issue", author="a", created_at=T0, **kw)


def notice(trigger: str, **kw) -> Notice:
    return Notice(**{"trigger": f"acct:auto:{trigger}", "what": "review", "error": "e",
                     "created_at": T0, **kw})


@pytest.mark.parametrize(("kw", "until"), [
    ({}, None),                                                    # never failed: now
    ({"fail_count": 3, "last_failed_at": T0}, T0 + sec(24)),       # interval 3 s
    ({"fail_count": 3}, None),                                     # no failure time: now
    ({"fail_count": 0, "last_failed_at": T0}, None),
    ({"not_before": T0 + sec(5)}, T0 + sec(5)),                    # a pause, not a failure
    ({"fail_count": 3, "last_failed_at": T0, "not_before": T0 + sec(100)}, T0 + sec(100)),
    ({"fail_count": 3, "last_failed_at": T0, "not_before": T0 + sec(1)}, T0 + sec(24)),
    ({"status": "reviewed", "fail_count": 3, "last_failed_at": T0}, None),
    ({"status": "gave_up", "not_before": T0 + sec(5)}, None),
])
def test_backoff_until(kw, until):
    assert pr(**kw).backoff_until(3) == until


def test_review_due_at():
    now = T0 + sec(1)
    assert pr().review_due_at(3, now) == now
    assert pr(fail_count=2, last_failed_at=T0).review_due_at(3, now) == T0 + sec(12)
    assert pr(status="reviewed").review_due_at(3, now) is None
    assert pr(status="missing_instructions").review_due_at(3, now) is None


def test_a_closed_pr_owes_no_review_until_reopened_but_its_commands_run():
    now = T0 + sec(1)
    rec = pr(queued=[command(1, next_attempt_at=T0 + sec(7))])
    rec.closed(T0)
    assert rec.status == "reviewing" and rec.review_due_at(3, now) is None
    assert rec.due_at(3, now) == T0 + sec(7)         # the command still runs
    rec.queued.clear()
    assert rec.due_at(3, now) is None                # nothing owed: the inbox wakes no one
    rec.reopened()
    assert rec.review_due_at(3, now) == now          # the review it owed is owed again


def test_due_at_is_the_earliest_owed_item():
    now = T0 + sec(1)
    assert pr(status="reviewed").due_at(3, now) is None
    later, soon = T0 + sec(50), T0 + sec(7)
    rec = pr(status="reviewed", queued=[command(1, next_attempt_at=later),
                                        command(2, next_attempt_at=soon)])
    assert rec.due_at(3, now) == soon
    rec.notices = [notice("n1", next_attempt_at=T0 + sec(2))]
    assert rec.due_at(3, now) == T0 + sec(2)
    rec.notices = [notice("n1", next_attempt_at=T0 - sec(9), posted=True)]
    assert rec.due_at(3, now) == soon               # a posted notice owes nothing
    rec.queued.append(command(3))                    # no backoff: due now
    assert rec.due_at(3, now) == now
    failing = pr(fail_count=1, last_failed_at=T0, queued=[command(4, next_attempt_at=later)])
    assert failing.due_at(3, now) == T0 + sec(6)
    owed = pr(queued=[command(4, next_attempt_at=later)])   # a review owed without backoff
    assert owed.due_at(3, now) == now
    assert pr(status="reviewed", notices=[notice("n", posted=True)]).due_at(3, now) is None


def test_processed_ids_keep_the_newest_up_to_the_cap():
    rec = pr()
    for cid in range(1, PROCESSED_IDS_CAP + 1):
        rec.mark_processed(cid)
    assert len(rec.processed_comment_ids) == PROCESSED_IDS_CAP and rec.processed(1)
    rec.mark_processed(5)                            # already there: no change
    assert rec.processed_comment_ids[0] == 1 and len(rec.processed_comment_ids) == 500
    rec.mark_processed(10_000)
    assert rec.processed_comment_ids == [*range(2, PROCESSED_IDS_CAP + 1), 10_000]
    assert not rec.processed(1) and rec.processed(10_000) and rec.processed(2)


def test_notices_are_unique_and_only_posted_ones_are_pruned():
    rec = pr()
    rec.add_notice(notice("t1"))
    rec.add_notice(notice("t1", what="again"))
    assert [n.what for n in rec.notices] == ["review"]
    for i in range(2, NOTICES_KEPT + 5):
        rec.add_notice(notice(f"t{i}"))
    assert len(rec.notices) == NOTICES_KEPT + 4      # unposted notices are never dropped
    for n in rec.notices[:6]:
        n.posted = True
    rec.add_notice(notice("new"))
    # Over the limit by 5: the 5 oldest posted notices go, the 6th posted one stays.
    assert len(rec.notices) == NOTICES_KEPT
    assert [n.trigger.ident for n in rec.notices[:2]] == ["t6", "t7"]
    assert rec.notices[0].posted and not rec.notices[1].posted
    assert rec.notices[-1].trigger.ident == "new"


def test_pr_keys():
    # The wire layout is the one records were always stored under: old records keep loading.
    assert PrRef("acct", "Octo/App", 7).format() == "acct:octo/app#7"
    ref = PrRef.parse("acct:octo/app#7")
    assert ref == PrRef("acct", "octo/app", 7)
    assert (ref.account, ref.repo, ref.owner, ref.name, ref.number) == (
        "acct", "octo/app", "octo", "app", 7)
    assert PrRef.parse(PrRef("a.b-c", "O/R", 12).format()) == PrRef("a.b-c", "o/r", 12)


def test_pr_ref_owner_and_name_come_from_the_repository():
    ref = PrRef("acct", "Octo-Org/App.js", 3)
    assert (ref.owner, ref.name, ref.repo) == ("octo-org", "app.js", "octo-org/app.js")
    assert f"{ref.owner}/{ref.name}" == ref.repo
    # Hashable and equal by value: a dict key of the scheduler and the store's listing.
    assert {ref: 1}[PrRef.parse("acct:octo-org/app.js#3")] == 1


def test_pr_ref_names_its_sessions():
    ref = PrRef("demo", "Acme/Shop", 9)
    assert ref.session().session_id == "github:demo:acme:shop:pr:9"
    assert ref.session("verifier").session_id == "github:demo:acme:shop:pr:9:persona:verifier"
    assert ref.session().ref == ref
    assert ref.session("coordinator").title == "Review acme/shop PR 9 · coordinator"


def test_pr_ref_reads_version_1_keys():
    assert PrRef.parse_v1("acct", "Octo/App#7") == PrRef("acct", "octo/app", 7)
    for bad in ["octo/app", "octo/app#x", "octo/app#0", "app#7", "o/a/b#7"]:
        with pytest.raises(ValueError):
            PrRef.parse_v1("acct", bad)


@pytest.mark.parametrize("key", [
    "acct:octo/app.js#7", "a.b-c:o-1/r_2#123456", "team_a:octo/App#1",
])
def test_pr_ref_round_trip(key: str):
    ref = PrRef.parse(key)
    assert PrRef.parse(ref.format()) == ref
    assert ref.format() == key.lower()   # the repository is compared lower-cased
    assert str(ref) == ref.format()
    # The session's typed key names the same record.
    assert PrKey(ref.account, ref.owner, ref.name, ref.number).ref == ref


@pytest.mark.parametrize("key", [
    "", "octo/app#7", ":octo/app#7", "acct:octo/app", "acct:octo/app#", "acct:octo/app#x",
    "acct:octo/app#0", "acct:octo/app#-1", "acct:octo/app#١", "acct:app#7",
    "acct:/app#7", "acct:octo/#7", "acct:o/a/b#7", "acct:o#x/app#7",
])
def test_pr_ref_rejects_malformed_keys(key: str):
    with pytest.raises(ValueError) as err:
        PrRef.parse(key)
    assert repr(key) in str(err.value)


def test_pr_ref_rejects_bad_parts():
    for args in [("a:b", "o/r", 1), ("", "o/r", 1), ("a", "or", 1), ("a", "o/r", 0),
                 ("a", "o/r", True)]:
        with pytest.raises(ValueError):
            PrRef(*args)  # type: ignore[arg-type]


def test_instructions_key_separates_source_and_text():
    assert instructions_key("a", "bc") != instructions_key("ab", "c")
    assert len(instructions_key("s", "t")) == 32
    assert instructions_key("s", "t") == instructions_key("s", "t")


def v1_command(cid: int, kind: str, author: str = "u") -> dict:
    return {"comment_id": cid, "kind": kind, "source": "issue", "author": author,
            "created_at": "2026-01-01T12:00:00Z"}


def test_migrate_v1_splits_the_account_record_into_pr_records():
    v1 = {"accounts": {"acct": {
        "prs": {
            "Octo/App#7": {"head_sha": "h7", "status": "reviewed", "updated_at": "t",
                           "inflight": v1_command(5, "bot"),
                           "queued": [v1_command(8, "bot"), v1_command(6, "review", "rev"),
                                      v1_command(9, "review", "late")],
                           "instructions": {"source": "s", "text": "t"},
                           "last_seen_open_at": "t"},
            "octo/lib#2": {"head_sha": "h2", "status": "reviewing", "updated_at": "t",
                           "queued": [v1_command(3, "review")]},
        },
        "feeds": {"octo/app": {"x": 1}}, "last_tick_at": "t", "last_error": None}}}
    ikey = instructions_key("s", "t")
    assert migrate_v1(v1) == {
        "accounts": {"acct": {"feeds": {"octo/app": {"x": 1}}, "last_tick_at": "t",
                              "last_error": None}},
        "prs": {
            # the in-flight /bot goes back to the front; the first /review makes the PR owe a
            # review answering it; a later /review is already covered
            "acct:octo/app#7": {"head_sha": "h7", "status": "reviewing", "updated_at": "t",
                                "queued": [v1_command(5, "bot"), v1_command(8, "bot")],
                                "trigger": "acct:cmd:6", "requested_by": "rev",
                                "instructions_key": ikey},
            # already reviewing: a queued /review adds nothing
            "acct:octo/lib#2": {"head_sha": "h2", "status": "reviewing", "updated_at": "t",
                                "queued": []},
        },
        "instructions": {ikey: {"source": "s", "text": "t"}},
    }
    assert migrate_v1({}) == {"accounts": {}, "prs": {}, "instructions": {}}
    assert migrate_v1({"accounts": {"a": {"prs": None}}}) == {
        "accounts": {"a": {}}, "prs": {}, "instructions": {}}


def test_a_closed_pr_is_pruned_after_seven_days_when_it_owes_nothing():
    closed = pr(status="reviewed", closed_seen_at=T0)
    week = timedelta(days=7)
    assert PRUNE_AFTER == week
    assert not closed.prunable(T0 + week)                         # exactly 7 days: kept
    assert closed.prunable(T0 + week + sec(1))
    assert not pr(status="reviewed").prunable(T0 + 10 * week)     # never seen closed
    owing = pr(status="reviewed", closed_seen_at=T0, queued=[command(1)])
    assert not owing.prunable(T0 + 2 * week)                      # an unanswered /bot
    unposted = pr(status="gave_up", closed_seen_at=T0, notices=[notice("n")])
    assert not unposted.prunable(T0 + 2 * week)                   # a give-up notice to post
    unposted.notices[0].posted = True
    assert unposted.prunable(T0 + 2 * week)


# -- the state machine -----------------------------------------------------------------------
# The table is read from docs/architecture.en.md, "The PR record's states".

AUTO = Trigger.auto("acct", "h")
CMD = Trigger.cmd("acct", 5)


def _owe(r: PrRecord) -> None:
    r.owe_review(CMD, T0, requested_by="rev")


def _reviewed(r: PrRecord) -> None:
    r.reviewed("h", T0, counted=True, answers=(r.trigger,))


def _reviewed_other(r: PrRecord) -> None:
    # The record moved on during the turn: the review answered another trigger.
    r.reviewed("h", T0, counted=True, answers=(Trigger.auto("acct", "older"),))


def _failed(r: PrRecord) -> None:
    r.failed("h", T0, "boom", 3, AUTO)


def _failed_last(r: PrRecord) -> None:
    r.fail_count, r.last_failed_sha = 2, "h"
    r.failed("h", T0, "boom", 3, AUTO)


TRANSITIONS = {
    "owe_review": _owe,
    "reviewed": _reviewed,
    "reviewed (record moved on)": _reviewed_other,
    "failed": _failed,
    "failed (max_attempts)": _failed_last,
    "paused": lambda r: r.paused(T0 + sec(60), "rate limited"),
    "missing_instructions": lambda r: r.missing_instructions(T0, "none"),
    "closed": lambda r: r.closed(T0),
    "answered_elsewhere": lambda r: r.answered_elsewhere(Trigger.auto("acct", "h2"), "h1"),
    "skipped": lambda r: r.skipped("h", T0, "not reviewed automatically"),
}

STATUSES = ("reviewing", "reviewed", "gave_up", "missing_instructions")
DOCS = Path(__file__).resolve().parents[3] / "docs"
_CODE = re.compile(r"`([^`]+)`")


def _rows(path: Path, heading: str) -> list[list[str]]:
    """The cells of the table under ``heading`` in a docs page."""
    text = path.read_text(encoding="utf-8").split(heading, 1)[1]
    lines = [line for line in text.split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]


def docs_table() -> dict[tuple[str, str], str]:
    """(from, transition) -> to, as docs/architecture.en.md says ("The PR record's states");
    a transition missing there is never applied from that state."""
    table = {}
    for start, change, end in _rows(DOCS / "architecture.en.md", "## The PR record's states"):
        name = _CODE.findall(change)[0]
        if name == "reviewed" and "moved on" in change:
            name = "reviewed (record moved on)"
        elif name == "failed" and "reaching" in change:
            name = "failed (max_attempts)"
        if name not in TRANSITIONS:
            assert name == "PrRecord.owing", f"the docs name an unknown transition {name}"
            continue
        froms = STATUSES if start == "any" else _CODE.findall(start)
        for s in froms:
            table[s, name] = s if end == "unchanged" else _CODE.findall(end)[0]
    return table


TABLE = docs_table()


def test_both_guides_have_the_same_transition_table():
    en = _rows(DOCS / "architecture.en.md", "## The PR record's states")
    zh = _rows(DOCS / "architecture.md", "## The PR record's states")
    assert [_CODE.findall(r[1])[:1] for r in en] == [_CODE.findall(r[1])[:1] for r in zh]
    assert [_CODE.findall(r[2]) for r in en] == [_CODE.findall(r[2]) for r in zh]
    assert len(TABLE) >= 17 and ("reviewing", "skipped") in TABLE


@pytest.mark.parametrize(("start", "name"), sorted(TABLE))
def test_the_pr_record_state_machine(start, name):
    rec = pr(status=start, trigger=AUTO if start == "reviewing" else None)
    TRANSITIONS[name](rec)
    assert rec.status == TABLE[start, name]


def test_owing_work_starts_afresh_and_a_give_up_leaves_a_notice():
    rec = PrRecord.owing(head_sha="h", title="t", base_sha="b", base_ref="main", trigger=AUTO,
                         now=T0)
    assert (rec.status, rec.trigger, rec.base_ref) == ("reviewing", AUTO, "main")
    for _ in range(3):
        rec.failed("h", T0, "boom", 3, AUTO)
    assert rec.status == "gave_up" and [n.trigger for n in rec.notices] == [AUTO]
    rec.owe_review(CMD, T0 + sec(1), requested_by="rev")
    assert (rec.fail_count, rec.last_failed_sha, rec.last_failed_at, rec.not_before) == (
        0, None, None, None)
    assert (rec.trigger, rec.requested_by) == (CMD, "rev")
    rec.reviewed("h2", T0 + sec(2), counted=False, answers=(CMD,))
    assert (rec.status, rec.trigger, rec.head_sha, rec.reviews_done) == ("reviewed", None,
                                                                          "h2", 0)


def test_a_stored_trigger_keeps_its_string_form():
    raw = {"head_sha": "h", "status": "reviewing", "updated_at": T0.isoformat(),
           "trigger": "acct:retarget:h:b",
           "notices": [{"trigger": "acct:bot:7", "what": "w", "error": "e",
                        "created_at": T0.isoformat()}]}
    rec = PrRecord.model_validate(raw)
    assert rec.trigger == Trigger.retarget("acct", "h", "b") and rec.trigger.automatic
    assert rec.notices[0].trigger == Trigger.bot("acct", 7)
    dumped = rec.model_dump(mode="json")
    assert dumped["trigger"] == "acct:retarget:h:b"
    assert dumped["notices"][0]["trigger"] == "acct:bot:7"
    rec.trigger = "acct:cmd:9"  # assignments are validated
    assert rec.trigger == Trigger.cmd("acct", 9)
    with pytest.raises(ValueError, match="kind 'later'"):
        PrRecord.model_validate({**raw, "trigger": "acct:later:1"})


def test_an_owed_fix_resolution_backs_off_runs_for_drafts_and_gives_up():
    rec = PrRecord(head_sha="a" * 40, status="reviewed", updated_at=T0, draft=True)
    fix = rec.owe_fix(7, "HTTP 502", T0, 3)
    assert fix is not None and fix.attempts == 1 and fix.next_attempt_at == T0 + backoff(1, 3)
    assert rec.due_at(3, T0) == T0 + backoff(1, 3), "due although a draft: it is posted work"
    rec.closed(T0)
    assert not rec.prunable(T0 + PRUNE_AFTER + sec(1)), "owed work keeps the record"
    assert rec.owe_fix(7, "HTTP 502", T0, 3).attempts == 2 and len(rec.fixes) == 1
    for _ in range(FIX_ATTEMPTS - 3):
        assert rec.owe_fix(7, "HTTP 502", T0, 3) is not None
    assert rec.owe_fix(7, "HTTP 502", T0, 3) is None and rec.fixes == []
    rec.owe_fix(8, "HTTP 502", T0, 3)
    rec.fix_done(8)
    assert rec.fixes == [] and rec.due_at(3, T0) is None


def test_a_paused_pr_owes_its_automatic_review_until_resumed():
    """``/bot pause``: an automatic review stays owed but is not due; a ``/review`` is; a push
    before a ``/review full`` runs keeps it full until a review is posted."""
    now = T0 + sec(1)
    rec = pr(trigger=Trigger.auto("demo", "a" * 40))
    rec.pause("maintainer", T0)
    assert rec.waits_for_resume and rec.review_due_at(3, now) is None
    rec.owe_review(Trigger.cmd("demo", 7), now)
    assert not rec.waits_for_resume and rec.review_due_at(3, now) == now
    rec.full_review = True
    rec.owe_review(Trigger.auto("demo", "b" * 40), now)
    assert rec.review_due_at(3, now) is None and rec.full_review
    rec.resume()
    assert rec.review_due_at(3, now) == now
    rec.reviewed("b" * 40, now, counted=True, answers=(rec.trigger,))
    assert rec.status == "reviewed" and not rec.full_review
