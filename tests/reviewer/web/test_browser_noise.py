"""The repository page and the needs-a-maintainer view in real Chromium over the scripted
history of ``noise_history`` (figures counted by hand), served by `dsh web` in its own process;
every page axe-clean."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import dsh_github_reviewer.plugin as reviewer_plugin
from dsh_harness import Harness, parse_config
from dsh_harness.testing import ScriptedModelServer
from tests.harness.agent_kit import config_text
from tests.reviewer.web.conftest import ARTIFACTS, WEB_TOKEN, dsh_web, free_port
from tests.reviewer.web.noise_history import ATTENTION, build_history

pytestmark = pytest.mark.slow


def toml(model_url: str, port: int) -> str:
    return (config_text(model_url) + f'[web]\nport = {port}\nauth_token = "{WEB_TOKEN}"\n\n'
            '[plugins.github-reviewer]\nplugin = "dsh-github-reviewer"\n'
            '[[plugins.github-reviewer.accounts]]\nname = "demo"\n'
            'personal_access_token = "ghp_' + "x" * 36 + '"\napi_url = "http://127.0.0.1:9"\n'
            'repositories = ["acme/shop", "acme/api"]\n')


async def produce(home: Path, text: str) -> None:
    h = Harness(parse_config(text, str(home / "dsh.toml"), home), load_entry_points=False,
                plugins=[("dsh-github-reviewer", reviewer_plugin)])
    try:
        await build_history(h)
    finally:
        await h.close()


@pytest.fixture(scope="module")
def history_web(tmp_path_factory):
    home = tmp_path_factory.mktemp("noise")
    with ScriptedModelServer() as model:
        port = free_port()
        text = toml(model.base_url, port)
        (home / "dsh.toml").write_text(text)
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, produce(home, text)).result()
        with dsh_web(home / "dsh.toml", home, port) as url:
            yield url


@pytest.fixture
def signed_in(browser, history_web):
    context = browser.new_context()
    page = context.new_page()
    page.goto(history_web + "/login")
    page.fill("input[name=token]", WEB_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(history_web + "/")
    yield page
    context.close()


def axe_clean(page) -> None:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()


def test_the_repository_page_shows_the_hand_counted_rates(signed_in, history_web):
    page = signed_in
    page.goto(history_web + "/prs")
    page.click("a[href='/repository?name=acme/shop']")
    page.wait_for_url(re.compile(r".*/repository\?name=acme(/|%2F)shop$"))
    assert page.locator("h1").inner_text() == "Repository acme/shop"
    cells = {k: page.locator(f"#noise-{k}").inner_text()
             for k in ("posted", "fixed", "dismissed", "open")}
    assert cells == {"posted": "5", "fixed": "1", "dismissed": "1", "open": "3"}
    text = page.locator("table.noise-table").inner_text()
    assert "20.0%" in text and "60.0%" in text and "2 critical" in text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "repository.png"), full_page=True)
    axe_clean(page)
    page.goto(history_web + "/prs")
    axe_clean(page)


def test_the_needs_a_maintainer_view_lists_exactly_the_right_prs(signed_in, history_web):
    page = signed_in
    page.goto(history_web + "/")
    page.click("nav.top >> text=Needs a maintainer")
    page.wait_for_url(history_web + "/attention")
    rows = page.locator("tr[data-pr]")
    listed = {rows.nth(i).get_attribute("data-pr") for i in range(rows.count())}
    assert listed == {f"{r}#{n}" for r, n in ATTENTION}
    axe_clean(page)
    page.select_option("select[name=reason]", "critical")
    page.click("form.filter button")
    page.wait_for_url(re.compile(r".*reason=critical.*"))
    assert page.locator("tr[data-pr]").count() == 1
    assert page.locator("tr[data-pr]").get_attribute("data-pr") == "acme/shop#2"
    page.fill("input[name=q]", "nothing matches this")
    page.click("form.filter button")
    page.wait_for_url(re.compile(r".*q=nothing.*"))
    assert "Nothing needs a maintainer with these filters" in page.locator("table.prs").inner_text()
    axe_clean(page)
