"""What data can put on a page: only http(s) links, no external images, no bidi controls;
Markdown tables render."""

from __future__ import annotations

import re

from dsh_github_reviewer.core.session_key import PrKey
from dsh_harness.web.render import markdown, web_url
from tests.harness.web.test_security import TagAudit
from tests.reviewer.web.test_pr_pages import client, make, pr_session, server  # noqa: F401  (fixture)

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"]*)"', html)


async def test_a_javascript_url_in_session_meta_is_no_link_anywhere(tmp_path, server):  # noqa: F811
    h = make(tmp_path, server)
    try:
        sid = PrKey("demo", "acme", "shop", 7).session_id
        await pr_session(h, sid, url="javascript:alert(1)//https://github.com/a/b/pull/7")
        async with client(h) as c:
            for url in ["/prs", "/", "/sessions/" + sid.replace(":", "%3A")]:
                text = (await c.get(url)).text
                assert not [u for u in hrefs(text) if "javascript" in u.lower()], url
            api = (await c.get("/api/github-reviewer/prs")).json()
            assert api["prs"][0]["url"] is None
    finally:
        await h.close()


def test_web_url_keeps_only_http_addresses_with_a_host():
    for ok in ["https://github.com/a/b/pull/1", "http://127.0.0.1:8080/x?y=1#z"]:
        assert web_url(ok) == ok
    for bad in ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,x", "/settings",
                "//evil.test/x", "https:///x", "https://a b", 'https://a"onmouseover=1',
                "https://a.test/\u202e", "vbscript:x", "", None, 3]:
        assert web_url(bad) is None, bad


def test_markdown_images_become_links_or_text_and_tables_render():
    html = str(markdown(
        "![logo](https://tracker.test/p.png) ![x](javascript:alert(1)) ![r][ref] "
        "[rel](/settings) [ok](https://github.com/a)\n\n[ref]: http://t.test/i.png\n\n"
        "| file | issue |\n|---|---|\n| a.py | SQL |\n"))
    audit = TagAudit()
    audit.feed(html)
    assert "<img" not in html and audit.problems == []
    assert hrefs(html) == ["https://tracker.test/p.png", "http://t.test/i.png",
                           "https://github.com/a"]
    assert "[image: logo]" in html and "<table>" in html and "<td>SQL</td>" in html


async def test_bidi_controls_leave_titles_ids_and_bodies(tmp_path, server):  # noqa: F811
    h = make(tmp_path, server)
    try:
        sid = PrKey("demo", "acme", f"sh{BIDI}op", 7).session_id
        await pr_session(h, sid, title=f"Fix {BIDI}txt.exe", comment=f"see {BIDI} here",
                         summary=f"Found {BIDI}1", question=f"why{BIDI}?")
        async with client(h) as c:
            for url in ["/prs", "/", "/sessions", "/sessions/" + sid.replace(":", "%3A")
                        .replace("\u202e", "%E2%80%AE")]:
                r = await c.get(url)
                assert r.status_code == 200, url
                assert not any(ch in r.text for ch in BIDI), url
    finally:
        await h.close()
