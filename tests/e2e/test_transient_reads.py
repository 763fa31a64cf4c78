"""Transient GitHub reads: a 500 on the instructions file is retried at the next
tick and never counts as a failed attempt, however often it happens."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.testing.scenario import build_shop

from .conftest import Deployment
from .fault_kit import Clock

pytestmark = pytest.mark.slow


async def test_an_error_reading_the_instructions_is_retried_without_counting(tmp_path, sandbox80,
                                                                             model):
    build_shop(sandbox80)
    clock = Clock(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model, clock=clock).start()
    try:
        for _ in range(6):        # more than review.max_attempts (5): still no give-up
            sandbox80.inject_error(500, path_contains="review_instructions")
            await dep.tick()
            rec = await dep.entry()
            assert rec.status == "reviewing" and rec.fail_count == 0 and rec.notices == []
            assert "review_instructions.md: HTTP 500" in rec.last_error
            assert rec.not_before is not None and rec.not_before > clock()
            clock.skip(1)                               # the next tick (poll interval 1 s)
        await dep.tick()
        rec = await dep.entry()
        assert rec.status == "reviewed" and len(dep.reviews()) == 1
    finally:
        await dep.stop()
