"""The poll reads only what changed since the last tick: closures, reopenings and new PRs are
still recorded, and an idle tick touches no record. No model runs here: the pollers record
work, nothing drains it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import FEATURE, REPO, build_shop, model_server


@pytest.fixture
async def dep(tmp_path):
    with SandboxGitHub() as sb, model_server() as model:
        build_shop(sb, prs=3)
        d = await Deployment(tmp_path, sb, model).start()
        try:
            yield d
        finally:
            await d.stop()
        assert model.served == []


async def test_closed_and_merged_prs_are_noted_and_their_commands_ignored(dep):
    poller, st = dep.pollers["demo"], dep.sb.state
    await poller.tick()                       # the first poll lists every open PR
    assert all([await dep.entry(n) for n in (1, 2, 3)])
    st.advance(5)
    st.close_pull(REPO, 2)
    st.close_pull(REPO, 3, merged=True)
    st.add_issue_comment(REPO, 2, "maintainer", "/bot still there?")
    dep.sb.reset_log()
    await poller.tick()
    assert len(dep.sb.log) == 3, "one listing page and two feeds, whatever is open"
    assert (await dep.entry(2)).closed_seen_at is not None
    assert (await dep.entry(3)).closed_seen_at is not None
    # The listing says which were merged: the web UI shows "merged", not "closed".
    assert [(await dep.entry(n)).merged for n in (2, 3)] == [False, True]
    assert (await dep.entry(2)).queued == [], "a command on a closed PR is not work"
    assert (await dep.entry(1)).closed_seen_at is None
    st.advance(5)
    st.reopen_pull(REPO, 2)
    await poller.tick()
    assert (await dep.entry(2)).closed_seen_at is None


async def test_a_new_pr_and_a_push_are_recorded_by_an_incremental_tick(dep):
    poller, st = dep.pollers["demo"], dep.sb.state
    await poller.tick()
    st.advance(5)
    st.commit(REPO, "feature-4", dict(FEATURE))
    st.open_pull(REPO, "feature-4", title="four", author="alice")
    head = st.commit(REPO, "feature-1", {"shop/extra.py": "x = 1\n"})
    result = await poller.tick()
    assert result.new_work == 2
    assert (await dep.entry(4)).status == "reviewing"
    assert (await dep.entry(1)).head_sha == head


def spy_on_records(store) -> list[str]:
    """Every read or write of PR records by ``store`` (a WorkStore), in order. (The account's
    own record, its tick times, is written once per tick whatever the number of PRs.)"""
    calls: list[str] = []
    for name in ("pr", "update_pr", "prs", "mark_draft", "delete_pr", "instructions",
                 "start_review"):
        original = getattr(store, name)

        def counting(*args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)
        setattr(store, name, counting)
    transaction = store.domain.transaction

    def counting_transaction(*args, **kwargs):
        calls.append("transaction")
        return transaction(*args, **kwargs)
    store.domain.transaction = counting_transaction
    return calls


async def test_an_idle_tick_reads_and_writes_no_record_and_prunes_once_a_day(dep):
    poller, st = dep.pollers["demo"], dep.sb.state
    await poller.tick()
    st.advance(5)
    st.close_pull(REPO, 3)
    await poller.tick()
    rec = await dep.entry(3)
    calls = spy_on_records(poller.store)
    # An idle tick the same day: three free 304s, no record read or written.
    dep.sb.reset_log()
    await poller.tick()
    assert len(dep.sb.log) == 3 and all(e.status == 304 for e in dep.sb.log)
    assert calls == [], f"an idle tick touched the records: {calls}"
    # Seven days later the closed PR's record is pruned by the daily housekeeping of an idle
    # repository, without any GitHub call of its own: one scan of the records.
    later = rec.closed_seen_at + timedelta(days=8)
    poller.clock = lambda: later
    dep.sb.reset_log()
    await poller.tick()
    assert await dep.entry(3) is None and await dep.entry(1) is not None
    assert len(dep.sb.log) == 3 and all(e.status == 304 for e in dep.sb.log)
    assert calls.count("prs") == 1, calls
    # Later that day: idle again, no second scan; the next day, one more.
    calls.clear()
    poller.clock = lambda: later + timedelta(hours=23)
    await poller.tick()
    assert calls == [], f"housekeeping ran twice in one day: {calls}"
    poller.clock = lambda: later + timedelta(days=1, minutes=1)
    await poller.tick()
    assert calls.count("prs") == 1, calls
