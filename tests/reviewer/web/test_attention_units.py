"""Needs a maintainer, one PR record at a time: a give-up the bot has since moved past (a later
review of a new head started after it) no longer needs anyone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dsh_github_reviewer.web.attention import reasons_of
from dsh_github_reviewer.work.records import Notice, PrRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Row:
    shown_state, noise = "open", {}

    def matches(self, word: str) -> bool:
        return False


def gave_up_on_head_a(**kw) -> PrRecord:
    notice = Notice(trigger="demo:auto:" + "a" * 40, what="the review of head aaaa",
                    error="GitHub answered 502", created_at=T0, posted=True)
    return PrRecord(head_sha="b" * 40, updated_at=T0, notices=[notice], **kw)


def test_a_give_up_on_an_earlier_head_is_not_a_failure_once_a_later_review_ran():
    later = gave_up_on_head_a(status="reviewed", last_review_started_at=T0 + timedelta(hours=1))
    assert reasons_of(Row(), later, None, T0 + timedelta(hours=2)).reasons == []


def test_a_give_up_still_standing_is_listed():
    standing = gave_up_on_head_a(status="gave_up", last_review_started_at=T0 - timedelta(1))
    assert reasons_of(Row(), standing, None, T0).reasons == ["failed"]
    chat = gave_up_on_head_a(status="reviewed", last_review_started_at=T0 - timedelta(1))
    assert reasons_of(Row(), chat, None, T0).reasons == ["failed"], "a /bot given up since"
