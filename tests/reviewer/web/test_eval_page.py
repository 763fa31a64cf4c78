"""In the browser: the web UI's eval page shows the latest report, runs no script the
model wrote into a finding, reaches nothing outside the UI, and fits a phone."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from dsh_github_reviewer.eval import CaseRun, Finding
from dsh_github_reviewer.eval.report import build_report
from dsh_github_reviewer.eval.run import ConfigResult, EvalConfig
from tests.reviewer.eval.kit import case
from tests.reviewer.web.conftest import WEB_TOKEN

pytestmark = pytest.mark.slow
HOSTILE = "<script>alert('eval')</script><img src=x onerror=alert('img')> " + "x" * 300


def _write_report(served) -> None:
    c = case()
    runs = [CaseRun(case_id="calc", reviewed=[1, 2], findings=[
        Finding(push=1, path="app/calc.py", line=6, body=HOSTILE),
        Finding(push=2, path="app/" + "deep/" * 20 + "calc.py", line=15, body="fine")])]
    report = build_report([c], [ConfigResult(EvalConfig(f"scripted/model-{i}"), runs)
                                for i in range(4)], started_at=datetime.now(UTC))
    home = served.tmp / "home" / "eval"
    home.mkdir(parents=True, exist_ok=True)
    (home / "latest.json").write_text(json.dumps(report))


def test_eval_page_shows_the_report_and_runs_nothing_the_model_wrote(page, served):
    _write_report(served)
    page.goto(served.base_url + "/eval")
    assert page.locator("h1").text_content() == "Review quality eval"
    assert page.locator("svg[aria-label=recall]").count() == 4
    # The ✓/✗ cells keep their colours on the web page (not only in the standalone report).
    colour = "el => getComputedStyle(el).backgroundColor"
    assert page.locator("td.hit").first.evaluate(colour) == "rgb(223, 243, 227)"
    assert page.locator("td.miss").first.evaluate(colour) == "rgb(248, 224, 224)"
    page.click("details > summary >> nth=0")
    assert "<script>alert('eval')</script>" in page.locator("details pre").first.text_content()
    assert page.dialogs == [] and page.foreign == [] and page.failed == []


def test_eval_page_fits_a_phone(browser, served):
    _write_report(served)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    page.goto(served.base_url + "/login")
    page.fill("input[name=token]", WEB_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(served.base_url + "/")
    page.goto(served.base_url + "/eval")
    page.click("details > summary >> nth=0")
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= 390, f"/eval is {wide} px wide on a 390 px phone"
