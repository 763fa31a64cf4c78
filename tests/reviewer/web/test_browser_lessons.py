"""The lessons page in real Chromium, served by `dsh web` in its own process: lessons listed
with their source, what people wrote shown as text, removal by the page's own form (a real
browser's same-origin POST), and axe-clean."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

import dsh_github_reviewer.plugin as reviewer_plugin
from dsh_github_reviewer.work.lessons import LessonFinding, LessonStore
from dsh_github_reviewer.work.records import DOMAIN
from dsh_harness import Harness, parse_config
from dsh_harness.testing import ScriptedModelServer
from tests.reviewer.web.conftest import WEB_TOKEN, dsh_web, free_port
from tests.reviewer.web.test_browser_noise import axe_clean, toml

pytestmark = pytest.mark.slow
HOSTILE = "<img src=x onerror=alert('lesson')> eval is fine in the discount parser"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def produce(home: Path, text: str) -> None:
    h = Harness(parse_config(text, str(home / "dsh.toml"), home), load_entry_points=False,
                plugins=[("dsh-github-reviewer", reviewer_plugin)])
    try:
        store = LessonStore(await h.storage.domain(DOMAIN), "demo")
        await store.teach("acme/shop", text=HOSTILE, source="vote", taught_by="maintainer",
                          association="MEMBER", at=T0, comment_id=77, number=1,
                          finding=LessonFinding(comment_id=70, number=1, path="shop/orders.py",
                                                line=15, text="`eval()` on input"))
        await store.teach("acme/shop", text="We log with print in scripts/.", source="command",
                          taught_by="owner", association="OWNER", at=T0, comment_id=78,
                          number=2)
    finally:
        await h.close()


@pytest.fixture(scope="module")
def lessons_web(tmp_path_factory):
    home = tmp_path_factory.mktemp("lessons")
    with ScriptedModelServer() as model:
        port = free_port()
        text = toml(model.base_url, port)
        (home / "dsh.toml").write_text(text)
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, produce(home, text)).result()
        with dsh_web(home / "dsh.toml", home, port) as url:
            yield url


def test_lessons_page_lists_and_removes_in_a_browser(browser, lessons_web):
    context = browser.new_context()
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(lessons_web + "/login")
        page.fill("input[name=token]", WEB_TOKEN)
        page.click("button[type=submit]")
        page.wait_for_url(lessons_web + "/")
        page.click("nav.top >> text=Lessons")
        page.wait_for_url(lessons_web + "/github-reviewer/lessons")
        rows = page.locator("table.lessons tbody tr")
        assert rows.count() == 2
        assert HOSTILE in page.locator("table.lessons").inner_text()
        assert "shop/orders.py:15" in rows.nth(1).inner_text()
        axe_clean(page)
        page.click("button[aria-label='Remove lesson 1 of acme/shop']")
        page.wait_for_url(lessons_web + "/github-reviewer/lessons")
        assert "removed by (web UI)" in page.locator("table.lessons").inner_text()
        assert page.locator("button[aria-label='Remove lesson 1 of acme/shop']").count() == 0
        assert page.locator("button[aria-label='Remove lesson 2 of acme/shop']").count() == 1
        axe_clean(page)
        assert dialogs == []
    finally:
        context.close()
