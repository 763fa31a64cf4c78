"""The inbox, the exactly-once core: what one recording writes, and what it
must not.

A real store (JSON backend in a temp directory) and real payload models; no GitHub, no model.
Each test records observations as a poll or a webhook delivery would and reads the records
back, so a mutant that drops a write, skips a command or queues one twice is seen.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from dsh_github_reviewer.config import AccountConfig
from dsh_github_reviewer.core.session_key import PrRef
from dsh_github_reviewer.core.triggers import BotIdentity, Trigger
from dsh_github_reviewer.github.feeds import FeedMarks
from dsh_github_reviewer.github.models import IssueComment, PullSummary, ReviewComment
from dsh_github_reviewer.work.inbox import Inbox, Observations
from dsh_github_reviewer.work.records import (
    AccountRecord,
    Command,
    PrRecord,
    Reaction,
    RepoState,
)
from dsh_github_reviewer.work.store import WorkStore, domain_spec
from dsh_harness import Domain
from dsh_harness.storage.json_backend import JsonBackend

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REPO = "acme/shop"
HEAD, HEAD2, BASE, BASE2 = "a" * 40, "c" * 40, "b" * 40, "d" * 40
DRAFT_LINE = " is a draft; reviewed only if its base says auto_review.drafts = true"


def key(number: int = 1, repo: str = REPO) -> PrRef:
    return PrRef("demo", repo, number)


def auto(head: str = HEAD) -> Trigger:
    return Trigger.auto("demo", head)


def pull(number: int = 1, head: str = HEAD, *, base_ref: str = "main", base: str = BASE,
         title: str = "Add search", author: str = "alice", draft: bool = False) -> PullSummary:
    repo = {"name": "shop", "full_name": REPO, "owner": {"login": "acme"}}
    return PullSummary.model_validate({
        "number": number, "title": title, "user": {"login": author}, "state": "open",
        "draft": draft, "html_url": f"https://github.example/{REPO}/pull/{number}",
        "updated_at": T0.isoformat(),
        "head": {"ref": f"feature-{number}", "sha": head, "repo": repo},
        "base": {"ref": base_ref, "sha": base, "repo": repo}})


def comment(cid: int, body: str, *, number: int = 1, login: str = "maintainer",
            association: str = "OWNER", at: datetime = T0, bot: bool = False) -> IssueComment:
    return IssueComment.model_validate({
        "id": cid, "body": body, "author_association": association,
        "user": {"login": login, "type": "Bot" if bot else "User"},
        "created_at": at.isoformat(), "updated_at": at.isoformat(),
        "issue_url": f"https://api.github.example/repos/{REPO}/issues/{number}"})


def review_comment(cid: int, body: str, *, number: int = 1, line: int | None = 7,
                   original_line: int | None = None, reply_to: int | None = None,
                   association: str = "member", at: datetime = T0) -> ReviewComment:
    return ReviewComment.model_validate({
        "id": cid, "body": body, "author_association": association,
        "user": {"login": "reviewer", "type": "User"},
        "created_at": at.isoformat(), "updated_at": at.isoformat(),
        "pull_request_url": f"https://api.github.example/repos/{REPO}/pulls/{number}",
        "path": "shop/cart.py", "line": line, "original_line": original_line,
        "in_reply_to_id": reply_to})


def marks(at: datetime = T0) -> FeedMarks:
    return FeedMarks(issue_comments_since=at, review_comments_since=at)


@pytest.fixture
async def store(tmp_path):
    domain = await Domain.open(domain_spec(), JsonBackend(tmp_path))
    yield WorkStore(domain, "demo")
    await domain.close()


def inbox(store: WorkStore, **config) -> Inbox:
    return Inbox(store, AccountConfig(name="demo", repositories=[REPO], **config),
                 BotIdentity("shop-review-bot"))


async def record(ib: Inbox, **kw) -> list[str]:
    kw.setdefault("at", T0)
    return await ib.record(Observations(repo=kw.pop("repo", REPO), **kw))


async def put(store: WorkStore, rec: PrRecord, number: int = 1) -> None:
    await store.update_pr(key(number), lambda _: rec)


def reviewed(head: str = HEAD, **kw) -> PrRecord:
    fields = {"status": "reviewed", "updated_at": T0 - timedelta(days=1),
              "reviewed_head_sha": head, "base_sha": BASE, "base_ref": "main", **kw}
    return PrRecord(head_sha=head, **fields)


# -- pulls ---------------------------------------------------------------------------------

async def test_a_new_pr_owes_a_review_of_its_head(store):
    ib = inbox(store)
    touched = await record(ib, pulls=[pull(title="Add\u200b search\n  now")])
    assert touched == [key()]
    rec = await store.pr(key())
    assert rec == PrRecord(head_sha=HEAD, status="reviewing", updated_at=T0,
                           title="Add search now", base_sha=BASE, base_ref="main",
                           trigger=auto())


async def test_the_same_observation_again_changes_and_wakes_nothing(store):
    ib = inbox(store)
    await record(ib, pulls=[pull()])
    before = await store.pr(key())
    assert await record(ib, pulls=[pull()], at=T0 + timedelta(hours=1)) == []
    assert await store.pr(key()) == before


async def test_a_new_head_owes_a_review_and_forgets_the_old_heads_failures(store):
    await put(store, reviewed(fail_count=3, last_failed_sha=HEAD, last_failed_at=T0,
                              not_before=T0, reviews_done=1, status="gave_up"))
    at = T0 + timedelta(minutes=5)
    touched = await record(inbox(store), pulls=[pull(head=HEAD2, title="v2", base=BASE2)],
                           at=at)
    assert touched == [key()]
    rec = await store.pr(key())
    assert (rec.status, rec.head_sha, rec.trigger, rec.updated_at) == (
        "reviewing", HEAD2, auto(HEAD2), at)
    assert (rec.title, rec.base_sha, rec.base_ref, rec.requested_by) == ("v2", BASE2, "main",
                                                                         None)
    assert (rec.fail_count, rec.last_failed_sha, rec.last_failed_at, rec.not_before) == (
        0, None, None, None)
    assert rec.reviews_done == 1


@pytest.mark.parametrize("done,owed", [(1, True), (2, False), (3, False)])
async def test_max_reviews_per_pr_stops_new_heads(store, caplog, done, owed):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    await put(store, reviewed(reviews_done=done))
    ib = inbox(store, review={"max_reviews_per_pr": 2})
    touched = await record(ib, pulls=[pull(head=HEAD2)])
    rec = await store.pr(key())
    assert (rec.status == "reviewing") is owed and (touched == [key()]) is owed
    assert rec.head_sha == (HEAD2 if owed else HEAD)
    await record(ib, pulls=[pull(head=HEAD2)])
    capped = [r for r in caplog.records if "(cap)" in r.getMessage()]
    assert len(capped) == (0 if owed else 1), "the cap is logged once"


async def test_no_cap_means_any_number_of_reviews(store):
    await put(store, reviewed(reviews_done=50))
    await record(inbox(store), pulls=[pull(head=HEAD2)])
    assert (await store.pr(key())).status == "reviewing"


async def test_a_retarget_owes_a_review_of_the_same_head(store):
    await put(store, reviewed(reviews_done=1))
    touched = await record(inbox(store), pulls=[pull(base_ref="release", base=BASE2)])
    assert touched == [key()]
    rec = await store.pr(key())
    assert (rec.status, rec.head_sha, rec.base_ref, rec.base_sha) == (
        "reviewing", HEAD, "release", BASE2)
    assert rec.trigger == Trigger.retarget("demo", HEAD, BASE2) and rec.updated_at == T0


async def test_the_base_branch_moving_on_is_no_retarget(store):
    await put(store, reviewed())
    assert await record(inbox(store), pulls=[pull(base=BASE2)]) == []
    rec = await store.pr(key())
    assert rec.status == "reviewed" and rec.base_sha == BASE


async def test_a_retarget_while_a_review_is_owed_changes_nothing(store):
    await put(store, reviewed(status="reviewing", trigger=auto()))
    await record(inbox(store), pulls=[pull(base_ref="release", base=BASE2)])
    rec = await store.pr(key())
    assert rec.trigger == auto() and rec.base_ref == "main"


async def test_a_retarget_respects_max_reviews_per_pr(store):
    await put(store, reviewed(reviews_done=2))
    ib = inbox(store, review={"max_reviews_per_pr": 2})
    assert await record(ib, pulls=[pull(base_ref="release", base=BASE2)]) == []
    rec = await store.pr(key())
    assert rec.status == "reviewed" and rec.base_ref == "main"


async def test_a_record_without_a_base_ref_adopts_it_without_a_review(store):
    rec = reviewed()
    rec.base_ref = None
    await put(store, rec)
    await record(inbox(store), pulls=[pull(base_ref="release")])
    rec = await store.pr(key())
    assert rec.status == "reviewed" and rec.base_ref == "release"


async def test_a_draft_owes_the_procedure_its_decision_and_ignored_authors_nothing(store,
                                                                                 caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    ib = inbox(store, ignore_authors=["dependabot*"])
    touched = await record(ib, pulls=[pull(1, draft=True), pull(2, author="dependabot[bot]")])
    assert touched == [key(1)] and await store.pr(key(2)) is None
    rec = await store.pr(key(1))
    assert rec.draft and rec.status == "reviewing" and rec.due_at(60, T0) == T0, \
        "the review procedure reads whether the base reviews drafts"
    rec.draft_waits = HEAD                      # it said no for this head: nothing is due
    assert rec.due_at(60, T0) is None
    assert await record(ib, pulls=[pull(1, draft=True), pull(2, author="dependabot[bot]")]) \
        == []
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [f"{key(1)}" + DRAFT_LINE,
                        f"{key(2)}: author dependabot[bot] is ignored"], "each logged once"


async def test_turning_draft_holds_the_owed_work_and_ready_releases_it(store):
    await put(store, reviewed(status="reviewing", trigger=auto()))
    ib = inbox(store)
    assert await record(ib, pulls=[pull(draft=True)]) == [key()], "the procedure decides"
    rec = await store.pr(key())
    assert rec.draft and rec.status == "reviewing" and rec.due_at(60, T0) == T0
    rec.draft_waits = HEAD                      # the procedure found it must wait
    await put(store, rec)
    assert (await store.pr(key())).due_at(60, T0) is None
    assert await record(ib, pulls=[pull()]) == [key()]
    rec = await store.pr(key())
    assert not rec.draft and rec.due_at(60, T0) == T0


async def test_a_pr_seen_again_is_reopened(store):
    await put(store, reviewed(closed_seen_at=T0 - timedelta(hours=1)))
    await record(inbox(store), pulls=[pull()])
    assert (await store.pr(key())).closed_seen_at is None


async def test_closed_prs_are_noted_once(store):
    first = T0 - timedelta(hours=1)
    await put(store, reviewed(), 1)
    await put(store, reviewed(closed_seen_at=first), 2)
    touched = await record(inbox(store), closed=[1, 2, 3])
    assert touched == []
    assert (await store.pr(key(1))).closed_seen_at == T0
    assert (await store.pr(key(2))).closed_seen_at == first
    assert await store.pr(key(3)) is None


# -- comments ------------------------------------------------------------------------------

async def test_a_bot_command_is_queued_once_with_what_the_reply_needs(store):
    await put(store, reviewed())
    ib = inbox(store)
    c = comment(11, "/bot  why is this slow?", association="member")
    touched = await record(ib, pulls=[pull()], comments=[c])
    assert touched == [key()]
    rec = await store.pr(key())
    assert rec.queued == [Command(comment_id=11, kind="bot", source="issue",
                                  author="maintainer", association="MEMBER",
                                  message="why is this slow?", created_at=T0)]
    assert rec.processed(11) and rec.status == "reviewed"
    # The same comment seen again (the next poll, a redelivery): nothing more.
    assert await record(ib, pulls=[pull()], comments=[c]) == []
    assert len((await store.pr(key())).queued) == 1


async def test_a_review_comment_command_keeps_its_place_in_the_diff(store):
    await put(store, reviewed())
    await record(inbox(store), comments=[
        review_comment(21, "/bot is this right?"),
        review_comment(22, "/bot and this?", line=None, original_line=9, reply_to=21)])
    first, second = (await store.pr(key())).queued
    assert (first.source, first.path, first.line, first.thread_root) == (
        "review", "shop/cart.py", 7, 21)
    assert (second.line, second.thread_root, second.association) == (9, 21, "MEMBER")


async def test_commands_are_taken_in_the_order_they_were_written(store):
    await put(store, reviewed())
    later = T0 + timedelta(seconds=5)
    await record(inbox(store), comments=[comment(33, "/bot third", at=later),
                                         comment(32, "/bot second", at=T0),
                                         comment(31, "/bot first", at=T0)])
    assert [c.message for c in (await store.pr(key())).queued] == ["first", "second", "third"]


async def test_a_review_command_owes_a_review_for_whoever_asked(store):
    await put(store, reviewed(fail_count=2, last_failed_sha=HEAD, last_failed_at=T0,
                              status="gave_up"))
    touched = await record(inbox(store), comments=[comment(41, "/review")])
    assert touched == [key()]
    rec = await store.pr(key())
    assert (rec.status, rec.trigger, rec.requested_by) == (
        "reviewing", Trigger.cmd("demo", 41), "maintainer")
    assert (rec.fail_count, rec.last_failed_sha, rec.updated_at) == (0, None, T0)
    assert rec.processed(41)


async def test_a_review_command_older_than_the_last_review_is_covered(store):
    started = T0 + timedelta(minutes=1)
    await put(store, reviewed(last_review_started_at=started))
    old = comment(42, "/review", at=started - timedelta(seconds=1))
    same = comment(43, "/review", at=started)
    await record(inbox(store), comments=[old])
    rec = await store.pr(key())
    assert rec.status == "reviewed" and rec.processed(42)
    await record(inbox(store), comments=[same])   # not older: owed
    assert (await store.pr(key())).trigger == Trigger.cmd("demo", 43)


async def test_a_review_command_while_one_is_owed_takes_over(store):
    started = T0 + timedelta(minutes=1)
    await put(store, reviewed(status="reviewing", trigger=auto(), last_review_started_at=started))
    await record(inbox(store), comments=[comment(44, "/review", at=T0)])
    assert (await store.pr(key())).trigger == Trigger.cmd("demo", 44)


async def test_commands_from_outsiders_are_marked_and_never_run(store, caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    await put(store, reviewed())
    ib = inbox(store)
    touched = await record(ib, comments=[comment(51, "/bot hi", association="NONE",
                                                 login="drive-by")])
    assert touched == [key()], "only for the 😕"
    rec = await store.pr(key())
    assert rec.queued == [] and rec.processed(51) and rec.status == "reviewed"
    assert rec.reactions == [Reaction(comment_id=51, source="issue", content="confused")]
    assert f"{key()}: refusing /bot from drive-by (NONE)" in caplog.messages
    # Allowed by configuration ("*" = anyone):
    await record(inbox(store, review={"command_author_associations": ["*"]}),
                 comments=[comment(52, "/bot hi", association="NONE")])
    assert [c.comment_id for c in (await store.pr(key())).queued] == [52]


async def test_an_outsiders_command_on_an_unknown_pr_creates_no_record(store):
    await record(inbox(store), pulls=[pull(2, draft=True)],
                 comments=[comment(53, "/bot hi", association="NONE")])
    assert await store.pr(key()) is None


async def test_the_bots_own_comments_never_command(store):
    await put(store, reviewed())
    ib = Inbox(store, AccountConfig(name="demo", repositories=[REPO]),
               BotIdentity("Shop-Review-Bot"))
    await record(ib, comments=[
        comment(61, "/bot from the App", bot=True),
        comment(62, "/bot quoted <!-- dsh-github-reviewer:reply-to:1 -->"),
        comment(63, "/bot as the PAT's user", login="shop-review-bot"),
        comment(64, "just talking"),
        comment(65, "/bot from a person")])
    rec = await store.pr(key())
    # A person's command holding a bot marker is a command like any other.
    assert [c.comment_id for c in rec.queued] == [62, 65]
    assert not any(rec.processed(i) for i in (61, 63, 64))


def test_only_the_bots_login_is_the_bot(store):
    ib = inbox(store)
    assert ib.is_own(comment(1, "/bot hi", login="SHOP-review-bot"))
    assert not ib.is_own(comment(1, "/bot hi <!-- dsh-github-reviewer:summary -->"))
    assert ib.is_own(comment(1, "x", bot=True))


async def test_a_command_on_a_pr_not_recorded_yet_records_it(store):
    touched = await record(inbox(store), pulls=[pull()], comments=[comment(71, "/bot hi")])
    assert touched == [key()]
    rec = await store.pr(key())
    assert rec.status == "reviewing" and rec.trigger == auto()
    assert [c.comment_id for c in rec.queued] == [71]


async def test_a_review_command_on_a_new_pr_is_the_review_it_owes(store):
    await record(inbox(store), pulls=[pull()], comments=[comment(72, "/review")])
    rec = await store.pr(key())
    assert rec.trigger == Trigger.cmd("demo", 72) and rec.requested_by == "maintainer"


async def test_a_command_on_a_pr_the_account_does_not_know_is_ignored(store):
    assert await record(inbox(store), comments=[comment(73, "/bot hi", number=9)]) == []
    assert await store.pr(key(9)) is None


async def test_a_full_listing_ignores_commands_on_prs_not_open(store):
    await put(store, reviewed(), 2)
    touched = await record(inbox(store), pulls=[pull(1)], complete=True,
                           comments=[comment(81, "/bot closed?", number=2),
                                     comment(82, "/bot open?", number=1)])
    assert sorted(touched) == [key(1), key(2)]
    closed = await store.pr(key(2))
    assert closed.queued == [] and [r.content for r in closed.reactions] == ["confused"]
    assert [c.comment_id for c in (await store.pr(key(1))).queued] == [82]
    # Without a complete listing (a delivery), a known PR's command is taken.
    await record(inbox(store), comments=[comment(83, "/bot still?", number=2)])
    assert [c.comment_id for c in (await store.pr(key(2))).queued] == [83]


async def test_a_command_on_a_pr_seen_closed_is_ignored(store):
    await put(store, reviewed(closed_seen_at=T0), 1)
    await put(store, reviewed(), 2)
    await record(inbox(store), comments=[comment(84, "/bot hi", number=1),
                                         comment(86, "/bot open?", number=2)])
    rec = await store.pr(key(1))
    assert rec.queued == [] and [r.content for r in rec.reactions] == ["confused"]
    assert [c.comment_id for c in (await store.pr(key(2))).queued] == [86]


async def test_a_command_in_the_same_write_as_the_close_is_ignored(store):
    await put(store, reviewed())
    await record(inbox(store), closed=[1], comments=[comment(85, "/bot hi")])
    rec = await store.pr(key())
    assert rec.closed_seen_at == T0 and rec.queued == []


async def test_commands_on_drafts_and_ignored_authors_prs_are_skipped(store):
    await put(store, reviewed(), 1)
    await put(store, reviewed(), 2)
    ib = inbox(store, ignore_authors=["bot-*"])
    await record(ib, pulls=[pull(1, draft=True), pull(2, author="bot-7")],
                 comments=[comment(91, "/bot a", number=1), comment(92, "/bot b", number=2)])
    for n in (1, 2):
        assert (await store.pr(key(n))).queued == []


async def test_a_pull_and_its_command_in_one_write_keep_both(store):
    await put(store, reviewed())
    touched = await record(inbox(store), pulls=[pull(head=HEAD2)],
                           comments=[comment(93, "/bot and now?")])
    assert touched == [key()]
    rec = await store.pr(key())
    assert rec.head_sha == HEAD2 and rec.trigger == auto(HEAD2)
    assert [c.comment_id for c in rec.queued] == [93]


# -- feed marks and the account record ------------------------------------------------------

async def test_feed_marks_move_in_the_same_write_and_clear_the_repos_error(store):
    await store.update_account(lambda a: a.repos.setdefault(
        REPO, RepoState(last_error="HTTP 502", last_error_at=T0 - timedelta(minutes=1))))
    new = marks(T0 + timedelta(minutes=3))
    await record(inbox(store), repo="Acme/Shop", pulls=[pull()], marks=new)
    account = await store.load_account()
    assert account.feeds == {REPO: new}
    assert account.repos[REPO] == RepoState(last_ok_at=T0)
    assert await store.pr(key()) is not None, "the key is lower case"


async def test_without_marks_the_account_record_is_not_written(store):
    await record(inbox(store), pulls=[pull()])
    assert await store.accounts.get("demo") is None
    assert await store.load_account() == AccountRecord()


async def test_marks_alone_are_recorded(store):
    await record(inbox(store), marks=marks())
    assert (await store.load_account()).feeds[REPO] == marks()


async def test_without_a_time_the_recording_uses_now(store):
    before = datetime.now(UTC)
    await inbox(store).record(Observations(repo=REPO, pulls=[pull()]))
    rec = await store.pr(key())
    assert before <= rec.updated_at <= datetime.now(UTC)


async def test_only_prs_that_owe_work_are_woken(store):
    await put(store, reviewed(), 1)
    await put(store, reviewed(), 2)
    touched = await record(inbox(store), pulls=[pull(1, title="renamed"), pull(2, head=HEAD2)])
    assert touched == [key(2)], "a reviewed PR seen again owes nothing"


# -- what one recording must not do (mutation-tested: scripts/mutation work/inbox.py) -------

async def test_a_refused_command_does_not_stop_the_ones_after_it(store):
    await put(store, reviewed(), 1)
    await put(store, reviewed(), 2)
    later = T0 + timedelta(seconds=1)
    await record(inbox(store), pulls=[pull(1, draft=True), pull(2)],
                 comments=[comment(101, "/bot on a draft", number=1),
                           comment(102, "/bot after it", number=2, at=later)])
    assert [c.comment_id for c in (await store.pr(key(2))).queued] == [102]
    draft = await store.pr(key(1))
    assert draft.queued == [] and [r.content for r in draft.reactions] == ["confused"]


async def test_an_ignored_authors_command_does_not_stop_the_ones_after_it(store, caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    await put(store, reviewed(), 1)
    await put(store, reviewed(), 2)
    later = T0 + timedelta(seconds=1)
    await record(inbox(store, ignore_authors=["bot-*"]),
                 pulls=[pull(1, author="bot-1"), pull(2)],
                 comments=[comment(103, "/bot a", number=1),
                           comment(104, "/bot b", number=2, at=later)])
    assert [c.comment_id for c in (await store.pr(key(2))).queued] == [104]
    assert caplog.messages == [f"{key(1)}: author bot-1 is ignored"], "once, with its key"


async def test_the_draft_and_cap_lines_are_logged_once_per_pr_and_head(store, caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    ib = inbox(store)
    await record(ib, pulls=[pull(1, draft=True), pull(2, draft=True)])
    await record(ib, pulls=[pull(1, HEAD2, draft=True)])
    await record(ib, pulls=[pull(1, HEAD2, draft=True)])
    assert caplog.messages == [f"{key(n)}{DRAFT_LINE}" for n in (1, 2, 1)]


async def test_the_cap_line_names_the_pr_and_the_head(store, caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    await put(store, reviewed(reviews_done=1))
    ib = inbox(store, review={"max_reviews_per_pr": 1})
    await record(ib, pulls=[pull(head=HEAD2)])
    await record(ib, pulls=[pull(head="e" * 40)])
    assert caplog.messages == [
        f"{key()}: 1 automatic reviews done (cap); not reviewing head {HEAD2}",
        f"{key()}: 1 automatic reviews done (cap); not reviewing head {'e' * 40}"]


async def test_the_retarget_lines_name_the_pr_and_the_branches(store, caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    await put(store, reviewed(reviews_done=1), 1)
    await put(store, reviewed(reviews_done=1), 2)
    await record(inbox(store), pulls=[pull(1, base_ref="release", base=BASE2)])
    capped = inbox(store, review={"max_reviews_per_pr": 1})
    for base_ref in ("release", "release", "next"):
        await record(capped, pulls=[pull(2, base_ref=base_ref, base=BASE2)])
    assert caplog.messages == [
        f"{key(1)}: base branch main -> release; reviewing head {HEAD} again",
        f"{key(2)}: 1 automatic reviews done (cap); not reviewing the retarget to release",
        f"{key(2)}: 1 automatic reviews done (cap); not reviewing the retarget to next"]


async def test_a_covered_review_command_says_so(store, caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    started = T0 + timedelta(minutes=1)
    await put(store, reviewed(last_review_started_at=started))
    await record(inbox(store), comments=[comment(105, "/review")])
    assert caplog.messages == [
        f"{key()}: /review 105 is older than the last review; already covered"]


async def test_a_pr_in_backoff_is_woken_for_a_new_command(store):
    await put(store, reviewed(status="reviewing", trigger=auto(), fail_count=2,
                              last_failed_sha=HEAD, last_failed_at=T0))
    touched = await record(inbox(store), comments=[comment(106, "/bot meanwhile?")])
    assert touched == [key()]
    rec = await store.pr(key())
    assert rec.fail_count == 2 and [c.comment_id for c in rec.queued] == [106]


async def test_marks_keep_the_rest_of_the_account_record(store):
    other = marks(T0 - timedelta(days=1))

    def seed(a: AccountRecord) -> None:
        a.feeds["acme/other"], a.bot_login = other, "shop-review-bot"
    await store.update_account(seed)
    await record(inbox(store), marks=marks())
    account = await store.load_account()
    assert account.feeds == {"acme/other": other, REPO: marks()}
    assert account.bot_login == "shop-review-bot"


async def test_a_command_on_a_closed_pr_gets_a_confused_reaction_once(store, caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    await put(store, reviewed(closed_seen_at=T0))
    ib = inbox(store)
    cs = [review_comment(111, "/bot closed?"), comment(112, "no command"),
          comment(113, "/bot mine", login="shop-review-bot")]
    await record(ib, comments=cs)
    await record(ib, comments=cs)                       # seen again: nothing more
    rec = await store.pr(key())
    assert rec.reactions == [Reaction(comment_id=111, source="review", content="confused")]
    assert rec.processed(111) and not rec.processed(112) and not rec.processed(113)
    assert caplog.messages == ["refusing command comment 111 on a closed pull request (#1)"]


async def test_a_command_on_an_unrecorded_draft_records_the_draft(store, caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    touched = await record(inbox(store), pulls=[pull(draft=True)],
                           comments=[comment(114, "/review please")])
    assert touched == [key()], "for the 😕 only"
    rec = await store.pr(key())
    assert rec.draft and rec.head_sha == HEAD and rec.updated_at == T0
    assert rec.reactions == [Reaction(comment_id=114, source="issue", content="confused")]
    assert rec.due_at(60, T0) == T0 and rec.trigger == auto(), \
        "the 😕, and the procedure reads whether the base reviews drafts (not the /review)"
    assert "refusing command comment 114 on a draft pull request (#1)" in caplog.messages


async def test_a_recorded_command_gets_eyes_from_its_own_source(store):
    await put(store, reviewed())
    await record(inbox(store), comments=[review_comment(115, "/bot here?"),
                                         comment(116, "/bot there?", at=T0 + timedelta(1))])
    rec = await store.pr(key())
    assert rec.reactions == [Reaction(comment_id=115, source="review", content="eyes"),
                             Reaction(comment_id=116, source="issue", content="eyes")]


async def test_an_outsiders_review_comment_gets_confused_from_its_source(store):
    await put(store, reviewed())
    await record(inbox(store), comments=[review_comment(117, "/bot hi", association="NONE")])
    assert (await store.pr(key())).reactions == [
        Reaction(comment_id=117, source="review", content="confused")]


async def test_ignored_and_capped_lines_are_per_pr(store, caplog):
    caplog.set_level(logging.INFO, logger="dsh_github_reviewer.work.inbox")
    ib = inbox(store, ignore_authors=["bot-*"], review={"max_reviews_per_pr": 1})
    await record(ib, pulls=[pull(1, author="bot-1"), pull(2, author="bot-1")])
    await record(ib, pulls=[pull(1, HEAD2, author="bot-1")])
    await put(store, reviewed(reviews_done=1), 3)
    await put(store, reviewed(reviews_done=1), 4)
    await record(ib, pulls=[pull(3, HEAD2), pull(4, HEAD2)])
    await record(ib, pulls=[pull(3, HEAD2, base_ref="rel"), pull(4, HEAD2, base_ref="rel")])
    await put(store, reviewed(reviews_done=1), 5)
    await put(store, reviewed(reviews_done=1), 6)
    await record(ib, pulls=[pull(5, base_ref="rel"), pull(6, base_ref="rel")])
    assert caplog.messages == [
        f"{key(1)}: author bot-1 is ignored", f"{key(2)}: author bot-1 is ignored",
        f"{key(1)}: author bot-1 is ignored",
        f"{key(3)}: 1 automatic reviews done (cap); not reviewing head {HEAD2}",
        f"{key(4)}: 1 automatic reviews done (cap); not reviewing head {HEAD2}",
        f"{key(5)}: 1 automatic reviews done (cap); not reviewing the retarget to rel",
        f"{key(6)}: 1 automatic reviews done (cap); not reviewing the retarget to rel"]


async def test_a_push_while_paused_never_swallows_an_owed_review_command(store):
    """``/bot pause``, then ``/review``, then a push before it ran: the push's automatic
    review waits for ``/bot resume``, but the ``/review`` somebody asked for (and got 👀 on)
    still runs, on the new head."""
    ib = inbox(store)
    await put(store, reviewed())
    await record(ib, pulls=[pull()], comments=[comment(11, "/bot pause")])
    await record(ib, pulls=[pull()], comments=[comment(12, "/review", at=T0 + timedelta(1))])
    rec = await store.pr(key())
    assert rec.trigger == Trigger.cmd("demo", 12) and not rec.waits_for_resume
    await record(ib, pulls=[pull(head="f" * 40)])
    rec = await store.pr(key())
    assert rec.head_sha == "f" * 40 and rec.trigger == Trigger.cmd("demo", 12)
    assert not rec.waits_for_resume and rec.due_at(60, T0) is not None


async def test_a_maintainers_reply_after_the_merge_or_on_a_draft_may_still_teach(store):
    """People often dismiss a finding with 👎 and a reason after the merge: the reply is queued
    to be read for a lesson like on an open PR (a command there still gets 😕); on a draft it
    waits with the PR's other work."""
    await put(store, reviewed(), 2)
    await record(inbox(store), pulls=[pull(1, draft=True)], complete=True,
                 comments=[review_comment(91, "Intended: we trust this input.", number=2,
                                          reply_to=50),
                           review_comment(92, "By design, see the ADR.", number=1, reply_to=60)])
    closed, draft = await store.pr(key(2)), await store.pr(key(1))
    assert [(c.comment_id, c.action) for c in closed.queued] == [(91, "teach")]
    assert [(c.comment_id, c.action) for c in draft.queued] == [(92, "teach")]
