"""The scheduler under load and the supervised loop under a full disk."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import FEATURE, REPO, build_shop, push_fix
from dsh_harness.testing import ScriptedModelServer

from .conftest import Deployment
from .fault_kit import no_pending_reviews, replies_to, wait_until

pytestmark = pytest.mark.slow


class Pace:
    """Reviews stream slowly while ``slow`` is set; chats never do."""

    def __init__(self):
        self.slow = False

    def __call__(self, req):
        reply = reviewer_policy(req)
        if self.slow and req.last_user_text().startswith("Flow: review"):
            reply.chunk_delay_s = 0.25
        return reply


def open_more(sb, numbers) -> None:
    for n in numbers:
        sb.state.commit(REPO, f"feature-{n}", dict(FEATURE), message="more")
        sb.state.open_pull(REPO, f"feature-{n}", title=f"PR {n}", body="b", author="alice")


async def test_bot_on_an_idle_pr_is_answered_while_reviews_run(tmp_path, sandbox80):
    pace = Pace()
    with ScriptedModelServer(policy=pace) as model:
        build_shop(sandbox80)
        dep = await Deployment(tmp_path, sandbox80, model,
                               extra_account="max_concurrent_reviews = 1\n").start()
        await dep.tick()
        open_more(sandbox80, [2, 3, 4])
        pace.slow = True
        cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot quick question?")
        dep.work.start()
        await wait_until(lambda: replies_to(sandbox80, cmd.id))
        reviewed = [n for n in (2, 3, 4) if dep.reviews(n)]
        assert len(reviewed) < 3, "answered while the other PRs' reviews were still running"
        # A stop that does not wait long leaves the running review to resume at next start.
        await dep.work.stop(grace_s=0.1)
        pace.slow = False
        await dep.restart()
        await dep.tick()
        assert all(len(dep.reviews(n)) == 1 for n in (1, 2, 3, 4)), "each exactly once"
        assert len(replies_to(sandbox80, cmd.id)) == 1 and no_pending_reviews(sandbox80)
        await dep.stop()


@pytest.fixture
def tmpfs_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(home)],
                             capture_output=True).returncode == 0
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def fill(directory) -> None:
    with open(directory / "ballast", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


async def test_full_disk_then_space_freed_reviews_again_without_restart(tmp_path, sandbox80,
                                                                        model, tmpfs_home):
    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model).start()
    await dep.tick()
    assert len(dep.reviews()) == 1
    fill(tmpfs_home)
    head = push_fix(sandbox80)
    cmd = sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot still ok?")
    dep.work.start()
    poller = dep.pollers["demo"]
    await wait_until(lambda: len(sandbox80.requests("GET", "/repos/acme/shop/pulls")) >= 4)
    assert poller._task is not None and not poller._task.done(), "the loop survives"
    assert len(dep.reviews()) == 1, "nothing can be recorded, so nothing runs"
    (tmpfs_home / "ballast").unlink()
    await wait_until(lambda: len(dep.reviews()) == 2 and replies_to(sandbox80, cmd.id))
    assert dep.reviews()[1].commit_id == head
    # Two more polls after the work was done: nothing was done twice.
    listed = len(sandbox80.requests("GET", "/repos/acme/shop/pulls"))
    await wait_until(lambda: len(sandbox80.requests("GET", "/repos/acme/shop/pulls"))
                     >= listed + 2, what="two more polls")
    assert len(replies_to(sandbox80, cmd.id)) == 1 and len(dep.reviews()) == 2
    await dep.stop()


async def test_disk_filling_during_a_turn_fails_it_at_once_and_work_resumes(
        tmp_path, sandbox80, tmpfs_home):
    filled = []

    def filling(req):
        # The disk fills while the model works on the first review: the session log's next
        # write fails. With the turn deadline at its default (900 s), the review below can only
        # come within the wait if the failed write ended the turn at once.
        if not filled and req.last_user_text().startswith("Flow: review"):
            fill(tmpfs_home)
            filled.append(True)
        return reviewer_policy(req)

    with ScriptedModelServer(policy=filling) as model:
        build_shop(sandbox80)
        dep = await Deployment(tmp_path, sandbox80, model).start()
        dep.work.start()
        await wait_until(lambda: filled)
        await asyncio.sleep(2)     # the failed turn, its unrecordable failure, a held retry
        assert dep.reviews() == []
        (tmpfs_home / "ballast").unlink()
        await wait_until(lambda: len(dep.reviews()) == 1, limit_s=60)
        await dep.stop()
        assert no_pending_reviews(sandbox80)
