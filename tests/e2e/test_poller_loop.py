"""The poll loop itself: an immediate first tick, no overlapping ticks, graceful stop."""

from __future__ import annotations

import asyncio

import pytest

from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import build_shop
from dsh_harness.testing import ScriptedModelServer
from tests.waiting import wait_until

from .conftest import Deployment

pytestmark = pytest.mark.slow
LEFT = pytest.StashKey()


def slow_policy(req):
    reply = reviewer_policy(req)
    reply.chunk_delay_s = 0.05
    return reply


async def test_first_tick_is_immediate_and_ticks_never_overlap(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, poll_interval_s=3600).start()
    poller = dep.pollers["demo"]
    dep.work.start()
    await wait_until(lambda: dep.reviews())   # no hour-long wait: the first tick runs at once
    await dep.work.stop()
    sandbox80.reset_log()
    first = asyncio.create_task(poller.tick())
    await asyncio.sleep(0)             # the first tick holds the tick lock...
    skipped = await poller.tick()      # ...so this one is skipped, not run alongside
    await first
    assert skipped.skipped
    lists = [e for e in sandbox80.log if e.path == "/repos/acme/shop/pulls"]
    assert len(lists) == 1
    record = await dep.account_record()
    assert record.next_tick_at is not None and record.last_tick_at is not None
    await dep.stop()


async def test_stop_waits_for_the_running_review(tmp_path, sandbox80):
    build_shop(sandbox80)
    with ScriptedModelServer(policy=slow_policy) as model:
        dep = await Deployment(tmp_path, sandbox80, model).start()
        dep.work.start()
        await wait_until(lambda: len(model.served) >= 2)
        assert dep.reviews() == []
        await dep.work.stop(grace_s=60)   # returns only after the running review ended
        assert len(dep.reviews()) == 1
        assert (await dep.entry()).status == "reviewed"
        await dep.stop()


async def test_a_failing_test_leaves_no_deployment_running(tmp_path, sandbox80, model):
    """The e2e kit stops what a failed test started. This test leaves its
    deployment running, as if an assertion had failed before its stop(); the next test checks
    that the kit's teardown stopped it."""
    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model).start()
    assert dep in Deployment.left_running() and dep.harness is not None


async def test_the_previous_tests_deployment_was_stopped():
    assert Deployment.left_running() == []
