"""The web UI in real Chromium, over sessions produced by the real review loop."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from urllib.parse import quote

import httpx2
import pytest

from dsh_github_reviewer.core import severity
from dsh_github_reviewer.core.session_key import PrKey
from tests.reviewer.web.conftest import ARTIFACTS, BOT_TOKEN, WEB_TOKEN

pytestmark = pytest.mark.slow
PR1 = PrKey("demo", "acme", "shop", 1).session_id
PR2 = PrKey("demo", "acme", "shop", 2).session_id


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_the_ui_opens_on_the_pull_requests_with_the_sessions_a_click_away(page, served):
    """A maintainer opening the UI (or signing in) lands on the PR index, not on sessions."""
    assert page.url == served.base_url + "/"
    assert page.locator("h1").inner_text() == "Pull requests"
    nav = page.locator("nav.top a").all_inner_texts()
    assert nav[1:3] == ["Pull requests", "Sessions"], nav
    assert page.locator("nav.top a.here").inner_text() == "Pull requests"
    page.click("nav.top >> text=Sessions")
    page.wait_for_url(served.base_url + "/sessions")
    assert "Review acme/shop PR 1" in page.locator("a.title").all_inner_texts()


def test_index_lists_sessions_with_pinned_titles_and_groups(page, served):
    page.goto(served.base_url + "/sessions")
    titles = page.locator("a.title").all_inner_texts()
    assert "Review acme/shop PR 1" in titles and "Review acme/shop PR 2" in titles
    assert page.locator("aside.groups").inner_text().count("acme/shop") == 1
    assert "github.com" not in page.content()  # the sandbox PR link is the sandbox's own
    page.fill("input[name=q]", "PR 2")
    page.click("form.filter button")
    assert page.locator("a.title").all_inner_texts() == ["Review acme/shop PR 2"]
    page.goto(served.base_url + "/sessions")
    assert page.locator("time").count() == page.locator("time[data-local]").count() > 0, \
        "times in the viewer's zone on the sessions index too"
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.name") == "q", "/ focuses the filter"
    shot(page, "index")
    assert page.dialogs == [] and page.foreign == []


def test_pr_page_shows_the_review_as_posted_then_the_conversation(page, served):
    page.goto(served.base_url + "/sessions/" + quote(PR1, safe=""))
    state = served.sb.state
    posted = [r for r in state.reviews_of("acme/shop", 1) if r.state != "PENDING"]
    assert posted, "the loop posted a review on the sandbox"
    comments = state.comments_of_review(posted[-1].id)
    assert comments, "with inline comments"
    assert page.locator("h1").inner_text() == (
        "acme/shop#1: Fix <script>alert('title')</script> & more"), "the PR, not the session"
    review = page.locator("section.review")
    assert "Review as posted" in review.locator("h2").inner_text()
    # The summary as posted (GitHub's body is the summary plus the hidden trigger marker).
    summary = posted[-1].body.split("<!--")[0].strip()
    assert summary and summary.splitlines()[0] in review.locator(".review-body").inner_text()
    link = review.locator("a.review-link").get_attribute("href")
    assert link == f"{served.sb.web_url}/acme/shop/pull/1#pullrequestreview-{posted[-1].id}", \
        "the review's own URL on GitHub, as the API returned it when posting"
    findings = review.locator("article.finding")
    assert findings.count() == len(comments)
    for c in comments:
        card = findings.filter(has=page.locator(f"header:has-text('line {c.line}')")).filter(
            has=page.locator("code.path", has_text=c.path))
        assert card.count() == 1, (c.path, c.line)
        sev, text = severity.parse(c.body)
        assert card.locator(".badge.sev").inner_text() == sev, "the finding's severity"
        assert text.splitlines()[0].replace("`", "") in card.locator(".markdown").inner_text()
        target = card.locator("table.diff tr.target td.code")
        assert target.count() >= 1, "a diff excerpt ending at the commented line"
        assert int(card.locator("table.diff tr.target td.ln >> nth=1").inner_text()) == c.line
        href = card.locator("a.gh").get_attribute("href")
        assert href.startswith(served.sb.web_url if hasattr(served.sb, "web_url") else "http")
        assert "/pull/1/files#diff-" in href and href.endswith(f"R{c.line}")
    # /bot question and its answer, as a conversation.
    qa = page.locator("section.chat .qa")
    assert qa.count() == 1
    assert "<svg onload=alert('bot')>" in qa.locator(".q").inner_text()
    assert "maintainer asked" in qa.locator(".q .who").inner_text().lower()
    assert qa.locator(".a .markdown").inner_text().strip()
    asked = [c for c in served.sb.state.issue_comments_of("acme/shop", 1)
             if c.body.startswith("/bot")]
    assert qa.locator(".q a.gh").get_attribute("href").endswith(
        f"/pull/1#issuecomment-{asked[0].id}"), "the question links to its comment"
    # Raw turns folded below, with tool calls, tokens and cost.
    raw = page.locator("details.raw")
    assert not raw.evaluate("d => d.open")
    page.click("details.raw > summary")
    text = raw.inner_text()
    assert "add_comment_to_pending_review" in text and "cache read" in text and "$0.0" in text
    assert "turn 1 completed" in text and "turn 2 completed" in text
    assert page.locator("figure.chart svg rect.bar").count() == 2, "a cost bar per turn"
    # Hostile PR title/body, file content and comment text are shown as text...
    main = page.inner_text("main")
    assert "<script>alert('title')</script>" in main
    page.click("details.result >> nth=0")
    # ...and nothing executed or loaded from elsewhere, and nothing failed to load.
    assert page.dialogs == [] and page.foreign == []
    assert page.failed == [], "no resource answered 4xx/5xx"
    assert page.locator("main script").count() == 0
    assert page.locator("main iframe, main img, main :not(figure.chart) > svg").count() == 0
    assert page.locator("a[href^='javascript:']").count() == 0
    assert page.locator("time[data-local]").count() > 3, "times shown in the viewer's zone"
    shot(page, "pr-page")


def test_pr_index_lists_prs_with_review_outcome_totals_and_charts(page, served):
    page.goto(served.base_url + "/prs")
    rows = page.locator("table.prs tbody tr")
    assert rows.count() == 2
    pr1 = rows.filter(has_text="acme/shop#1")
    text = pr1.inner_text()
    assert "<script>alert('title')</script>" in text, "the PR's real title, as text"
    assert "posted" in text and "finding" in text
    assert "#pullrequestreview-" in pr1.locator("a.gh").get_attribute("href"), "review linked"
    cells = pr1.locator("td").all_inner_texts()
    assert cells[1] and cells[1] != "-", "the author"
    assert cells[2] == "open"
    assert cells[4] == "2" and cells[5].startswith("$") and cells[6].endswith("%")
    pr2 = rows.filter(has_text="acme/shop#2").inner_text()
    assert "not posted" in pr2
    assert page.locator("table.totals-table").first.locator("tbody tr").count() == 1
    assert page.locator("figure.chart svg").count() == 1, "one repository, one chart"
    page.fill("input[name=q]", "<script>")
    page.press("input[name=q]", "Enter")
    page.wait_for_url("**/prs?q=*")
    assert page.locator("table.prs tbody tr").count() == 1
    page.goto(served.base_url + "/prs")
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.classList.contains('title')")
    page.keyboard.press("Enter")
    page.wait_for_url("**/sessions/**")
    page.goto(served.base_url + "/prs")
    shot(page, "prs")
    assert page.dialogs == [] and page.foreign == []


@pytest.mark.parametrize("path", ["/login", "/", "/prs", "/sessions", "/github-reviewer",
                                  "/settings", "/sessions/" + quote(PR1, safe=""),
                                  "/sessions/" + quote(PR2, safe=""), "/nope"])
def test_phone_width_has_no_horizontal_overflow(browser, served, path):
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2,
                                  is_mobile=True, has_touch=True, locale="en-US",
                                  timezone_id="Asia/Shanghai")
    page = context.new_page()
    page.goto(served.base_url + "/login")
    if path != "/login":
        page.fill("input[name=token]", WEB_TOKEN)
        page.click("button[type=submit]")
        page.wait_for_url(served.base_url + "/")
        page.goto(served.base_url + path)
    if page.locator("details.raw > summary").count():
        page.click("details.raw > summary")
    times = page.locator("time")
    assert times.count() == page.locator("time[data-local]").count(), "every time localized"
    if times.count():
        assert "GMT+8" in times.first.text_content(), "local time with its zone"
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= 390, f"{path} is {wide} px wide on a 390 px phone"
    name = "phone-" + (path.strip("/").replace("/", "-").replace("%3A", "-") or "index")
    shot(page, name)
    context.close()


def test_status_page_shows_a_backed_off_pr(page, served):
    page.goto(served.base_url + "/github-reviewer")
    row = page.locator("tr.status-reviewing")
    assert row.count() == 1 and "acme/shop#2" in row.inner_text()
    cells = row.locator("td").all_inner_texts()
    assert cells[4] == "1" and cells[5], "failure count and backoff-until are shown"
    assert "without submitting" in cells[6]
    assert "reviewed" in page.locator("tr.status-reviewed").first.inner_text()
    link = row.locator("a.title")
    assert link.get_attribute("href") == "/sessions/" + quote(PR2, safe="")
    shot(page, "status")
    assert page.dialogs == []


def test_live_page_follows_an_open_turn_then_stops_polling(page, served):
    # Another process (as `dsh run` would) opens a turn, appends to it and closes it while
    # the page is open.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, append(served.config, "open")).result()
        page.goto(served.base_url + "/sessions/" + quote(PR2, safe=""))
        assert page.is_visible("#live"), "the running badge shows an open turn"
        polls = []
        page.on("request", lambda r: polls.append(r.url) if "/fragments/" in r.url else None)
        pool.submit(asyncio.run, append(served.config, "title")).result()
        page.wait_for_selector("text=live <b>update</b> marker", timeout=10_000)
        assert page.locator("main b").count() == 0
        pool.submit(asyncio.run, append(served.config, "close")).result()
        page.wait_for_selector("#live", state="hidden", timeout=10_000)
        assert "turns" in page.inner_text("#totals")
        seen = len(polls)
        page.wait_for_timeout(4_500)  # two poll intervals
        assert len(polls) == seen, "polling stops once the turn is closed"
    assert page.dialogs == []


async def append(config, what: str) -> None:
    from dsh_harness import Harness, load_config
    from dsh_harness.sessions.events import TitleSet, TurnEnd, TurnStart

    now = datetime.now(UTC)
    h = Harness(load_config(config))
    store = h.sessions.store
    log = await store.load(PR2)
    seq = log.events[-1].seq if log.events else 0
    turn = max((e.turn for e in log.events if e.type == "turn_start"), default=0)
    if what == "open":
        event = TurnStart(seq=seq + 1, at=now, turn=turn + 1, meta={"flow": "chat"})
    elif what == "title":
        event = TitleSet(seq=seq + 1, at=now, title="live <b>update</b> marker", pinned=False)
    else:
        event = TurnEnd(seq=seq + 1, at=now, turn=turn, reason="completed")
    # Appended through the store (no resume: resuming would close the open turn).
    await store.append(PR2, [event])
    await store.release(PR2)
    await h.close()


def test_no_page_or_api_response_contains_a_configured_token(served):
    headers = {"Authorization": f"Bearer {WEB_TOKEN}"}
    urls = ["/", "/settings", "/github-reviewer", f"/sessions/{quote(PR1, safe='')}",
            "/api/sessions", f"/api/sessions/{quote(PR1, safe='')}", "/api/settings",
            "/api/github-reviewer/status", f"/fragments/events?id={quote(PR1)}&after=0"]
    for url in urls:
        r = httpx2.get(served.base_url + url, headers=headers)
        assert r.status_code == 200, url
        for secret in (BOT_TOKEN, WEB_TOKEN, "scripted-model"):
            assert secret not in r.text, f"{url} leaks a configured secret"
    settings = httpx2.get(served.base_url + "/api/settings", headers=headers).json()
    assert settings["web"]["auth_token"] == "set"
    # The scripted provider's key is inline: no environment variable is named for it.
    assert settings["providers"]["scripted"]["api_key"] == "set (inline)"
    assert settings["providers"]["scripted"]["api_key_env"] is None


def test_requests_without_the_token_get_401(served):
    for url in ["/", "/api/sessions", "/github-reviewer", "/settings"]:
        assert httpx2.get(served.base_url + url).status_code == 401
    bad = {"Authorization": "Bearer wrong"}
    assert httpx2.get(served.base_url + "/api/sessions", headers=bad).status_code == 401
    assert httpx2.post(served.base_url + "/login", data={"token": "wrong"}).status_code == 401
