"""One polling helper for every test, failing with what it waited for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent


async def test_wait_until_returns_the_value_or_fails_naming_the_wait():
    calls = []
    assert await wait_until(lambda: calls.append(1) or len(calls) >= 3, limit_s=5) is True
    with pytest.raises(AssertionError, match=r"waited 0.1 s for the reply in vain"):
        await wait_until(lambda: False, limit_s=0.1, what="the reply")
    with pytest.raises(AssertionError, match=r"<lambda> \(test_waiting.py:\d+\)"):
        await wait_until(lambda: None, limit_s=0.05)


def test_no_test_module_defines_its_own_polling_helper():
    own = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
           if p.name != "waiting.py"
           and re.search(r"^(async )?def wait_until\b", p.read_text(encoding="utf-8"), re.M)]
    assert own == [], f"use tests.waiting.wait_until instead of a copy in {own}"
