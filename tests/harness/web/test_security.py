"""The web UI's defences, item by item, over the ASGI transport."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import httpx2
import pytest
from markupsafe import escape

from dsh_harness import Harness, hookimpl, parse_config
from dsh_harness.sessions.events import (
    AssistantMessage,
    TitleSet,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from dsh_harness.web.auth import MAX_FAILURES, RateLimiter, SessionSigner
from dsh_harness.web.redact import REDACTED
from dsh_harness.web.shield import host_name
from tests.harness.agent_kit import WorldsPlugin, config_text

SECRET = "sk-&<>\"'-" + "q" * 24
TOKEN = "Tq8-vR2xLm4Zk9WnB7cYp3HsJ6dFg1Ae5Uu0"
XSS = [
    "<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "<svg onload=alert(3)>",
    "\"><script>alert(4)</script>", "'><img src=x onerror=alert(5)>",
    "[x](javascript:alert(6))", "[y](JaVaScRiPt:alert(7))", "<a href=\"javascript:alert(8)\">a</a>",
    "<iframe src=//evil.test></iframe>", "</textarea><script>alert(9)</script>",
    "<details open ontoggle=alert(10)>", "![i](data:text/html;base64,PHNjcmlwdD4=)",
    "<math><mi xlink:href=\"javascript:alert(11)\">x</mi></math>", "{{ 7*7 }}{% raw %}",
    "<style>@import 'http://evil.test/x.css';</style>", "<base href=//evil.test/>",
]


class Boom:
    @hookimpl
    def dsh_register_web_routes(self, router):
        async def boom(request):
            raise RuntimeError("/root/secret/path exploded")
        router.add_route("/boom", boom)


def make(tmp_path: Path, base_url: str, web: str = "", env: dict | None = None) -> Harness:
    text = (config_text(base_url) + '[providers.other]\nbase_url = "http://127.0.0.1:9"\n'
            'api_key_env = "DSH_TEST_SECRET"\n' + web)
    return Harness(parse_config(text, "t.toml", tmp_path), load_entry_points=False,
                   env={"DSH_TEST_SECRET": SECRET, **(env or {})},
                   plugins=[("worlds", WorldsPlugin()), ("boom", Boom())])


def client(h: Harness, base: str = "http://127.0.0.1", **kw) -> httpx2.AsyncClient:
    from dsh_harness.web.app import build_app

    # One app per harness, as in a server process: sessions and the rate limit live in it.
    app = h.plugin_state.setdefault("test.web_app", None) or build_app(h)
    h.plugin_state["test.web_app"] = app
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx2.AsyncClient(transport=transport, base_url=base, **kw)


async def hostile_session(h: Harness, sid: str, text: str) -> None:
    s = await h.sessions.create(sid, {"note": text})
    await s.record(TitleSet, title=f"title {text}", pinned=True)
    await s.record(TurnStart, turn=1, meta={"flow": text})
    await s.record(UserMessage, turn=1, content=f"question {text}")
    call = ToolCall(id="c1", name="read", arguments=json.dumps({"body": text}))
    await s.record(AssistantMessage, turn=1, content=f"answer **{text}**", tool_calls=[call])
    await s.record(ToolResult, turn=1, call_id="c1", name="read", content=f"result {text}")
    await s.record(TurnEnd, turn=1, reason="error", error=f"error {text}")
    await h.sessions.release(sid)


def assert_secret_absent(body: str, where: str) -> None:
    for form in (SECRET, str(escape(SECRET)), json.dumps(SECRET)[1:-1],
                 json.dumps(SECRET, ensure_ascii=False)[1:-1], "q" * 24):
        assert form not in body, f"{where} shows the secret as {form!r}"


@pytest.fixture
def harness_env(tmp_path):
    from dsh_harness.testing import ScriptedModelServer

    with ScriptedModelServer() as server:
        yield tmp_path, server


async def test_secret_with_html_and_quote_characters_is_redacted_before_escaping(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url)
    assert SECRET in h.secret_values()
    await hostile_session(h, "test:leak", f"the key is {SECRET} ok")
    async with client(h) as c:
        for url in ["/", "/sessions/test%3Aleak", "/api/sessions/test%3Aleak",
                    "/api/sessions", "/fragments/events?id=test:leak&after=0", "/settings",
                    "/api/settings", "/results?id=test:leak&seq=5"]:
            r = await c.get(url)
            assert r.status_code == 200, url
            assert_secret_absent(r.text, url)
        page = (await c.get("/sessions/test%3Aleak")).text
        assert page.count(REDACTED) >= 5, "title, question, answer, arguments and result"
    await h.close()


def go_json(text: str) -> str:
    """How Go's encoding/json (github-mcp-server) writes a string: HTML-safe escapes."""
    return json.dumps(text)[1:-1].replace("&", "\\u0026").replace("<", "\\u003c").replace(
        ">", "\\u003e")


async def test_secret_in_encoded_forms_is_redacted(harness_env):
    """A tool result holds the secret as Go JSON (``\\u0026\\u003c``) or JSON inside JSON; the
    model can write it with character references that Markdown turns back into characters."""
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url)
    s = await h.sessions.create("test:enc", {})
    await s.record(TurnStart, turn=1, meta={})
    await s.record(UserMessage, turn=1, content="read it")
    call = ToolCall(id="c1", name="read", arguments=json.dumps({"q": json.dumps(SECRET)}))
    refs = SECRET.replace("&", "&amp;").replace("<", "&lt;").replace("s", "&#x73;", 1)
    await s.record(AssistantMessage, turn=1, content=f"as markdown: {refs}", tool_calls=[call])
    result = '{"body":"' + go_json(SECRET) + '","raw":' + json.dumps(json.dumps(SECRET)) + "}"
    await s.record(ToolResult, turn=1, call_id="c1", name="read", content=result)
    await s.record(TurnEnd, turn=1, reason="completed")
    await h.sessions.release("test:enc")
    async with client(h) as c:
        for url in ["/sessions/test%3Aenc", "/api/sessions/test%3Aenc",
                    "/fragments/events?id=test:enc&after=0", "/results?id=test:enc&seq=4"]:
            r = await c.get(url)
            assert r.status_code == 200, url
            assert go_json(SECRET) not in r.text and "\\u003c\\u003e" not in r.text, url
            if not url.startswith("/api/"):  # JSON gives the model's text as it wrote it
                assert_secret_absent(r.text, url)
        page = (await c.get("/sessions/test%3Aenc")).text
        assert page.count(REDACTED) >= 4, "markdown, arguments and both result forms"
    await h.close()


async def test_dns_rebinding_host_is_refused_with_headers(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url, '[web]\nallowed_hosts = ["review.example.org"]\n')
    async with client(h) as c:
        for host in ["evil.example", "rebind.attacker.test:8765", "127.0.0.1.evil.test",
                     "localhost.evil.test", "", "localhost:8765@evil.test", "localhost:x",
                     "[::1]evil.test", "[::1]:80x", "127.0.0.2", "[::ffff:127.0.0.1]",
                     "EVIL.example.:80", "localhost..", "review.example.org.evil.test"]:
            r = await c.get("/api/sessions", headers={"Host": host})
            assert r.status_code == 421, host
            assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        for host in ["127.0.0.1:8765", "localhost", "[::1]:8765", "REVIEW.example.org:443",
                     "[::1]", "::1", "LOCALHOST.:8765", "review.example.org."]:
            assert (await c.get("/api/sessions", headers={"Host": host})).status_code == 200
    assert host_name("[::1]:80") == "::1" and host_name("a.b:1") == "a.b"
    await h.close()


async def test_wrong_logins_are_rate_limited_per_address(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url, f'[web]\nauth_token = "{TOKEN}"\n')
    async with client(h) as signed:  # signed in before the attack, from the same address
        assert (await signed.post("/login", data={"token": TOKEN})).status_code == 303
    async with client(h) as c:
        codes = [(await c.post("/login", data={"token": f"guess-{i}"})).status_code
                 for i in range(200)]
        assert codes[:MAX_FAILURES] == [401] * MAX_FAILURES
        assert set(codes[MAX_FAILURES:]) == {429}
        locked = await c.post("/login", data={"token": TOKEN})
        assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0
        bearer = await c.get("/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 429, "a locked-out address is refused even the right token"
        c.cookies.set("dsh_web_session", "9999999999.00." + "0" * 64)
        assert (await c.get("/api/sessions")).status_code == 429, "a forged cookie is locked out"
        c.cookies.set("dsh_web_session", signed.cookies["dsh_web_session"])
        assert (await c.get("/api/sessions")).status_code == 200, "a signed cookie still passes"
    # Another address is not locked out; the lock ends with the window.
    limiter = RateLimiter(max_failures=3, window_s=60)
    for _ in range(3):
        limiter.fail("10.0.0.1", now=100)
    assert limiter.retry_after("10.0.0.1", now=101) and not limiter.retry_after("10.0.0.2", 101)
    assert limiter.retry_after("10.0.0.1", now=161) is None
    await h.close()


async def test_wrong_bearer_tokens_count_as_failures(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url, f'[web]\nauth_token = "{TOKEN}"\n')
    async with client(h) as c:
        for _ in range(MAX_FAILURES):
            r = await c.get("/api/sessions", headers={"Authorization": "Bearer nope"})
            assert r.status_code == 401
        assert (await c.get("/api/sessions", headers={"Authorization": "Bearer x"})
                ).status_code == 429
    await h.close()


async def test_session_cookie_is_signed_expiring_and_not_the_token(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url, f'[web]\nauth_token = "{TOKEN}"\n')
    async with client(h, base="https://127.0.0.1") as c:
        login = await c.post("/login", data={"token": TOKEN})
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert TOKEN not in cookie
        low = cookie.lower()
        assert "httponly" in low and "samesite=strict" in low and "secure" in low
        assert re.search(r"max-age=\d+", low)
        assert (await c.get("/api/sessions")).status_code == 200
        value = c.cookies["dsh_web_session"]
        c.cookies.clear()
        for forged in [TOKEN, value[:-1] + ("0" if value[-1] != "0" else "1"),
                       "9999999999." + value.split(".", 1)[1], "", "a.b.c"]:
            c.cookies.set("dsh_web_session", forged)
            assert (await c.get("/api/sessions")).status_code == 401, forged
            c.cookies.clear()
    async with client(h) as c:  # plain http: no Secure flag (it would never be sent back)
        cookie = (await c.post("/login", data={"token": TOKEN})).headers["set-cookie"]
        assert "secure" not in cookie.lower()
    signer = SessionSigner(TOKEN, ttl_s=60)   # without shared records: this process only
    issued = await signer.issue(now=1000)
    assert await signer.valid(issued, now=1059) and not await signer.valid(issued, now=1061)
    assert not await SessionSigner("U" * 40).valid(issued, now=1000), \
        "a new token voids old cookies"
    assert not await SessionSigner(TOKEN).valid(issued, now=1000), "another process's cookie"
    await h.close()


async def test_every_response_carries_the_security_headers(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url, f'[web]\nauth_token = "{TOKEN}"\n')
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with client(h) as c:
        responses = [await c.get("/login"), await c.post("/login", data={"token": "x"}),
                     await c.get("/"), await c.get("/api/sessions"),
                     await c.get("/static/style.css"), await c.get("/static/nope.css"),
                     await c.get("/nope", headers=auth),
                     await c.get("/sessions/test%3Anope", headers=auth),
                     await c.get("/boom", headers=auth), await c.get("/", headers=auth),
                     await c.get("/", headers={"Host": "evil.test"})]
    statuses = [r.status_code for r in responses]
    assert statuses == [200, 401, 401, 401, 200, 404, 404, 404, 500, 200, 421]
    for r in responses:
        csp = r.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp, r.url
        assert r.headers["x-content-type-options"] == "nosniff"
        static = r.url.path.startswith("/static/")
        assert r.headers["cache-control"] == ("no-cache" if static else "no-store"), r.url
        assert "/root/secret/path" not in r.text and str(tmp_path) not in r.text
    await h.close()


async def test_static_files_are_cacheable_and_pages_link_them_versioned(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url)
    async with client(h) as c:
        page = (await c.get("/sessions")).text
        links = re.findall(r'(?:href|src)="(/static/[^"]+)"', page)
        assert {link.split("?")[0] for link in links} == {
            "/static/style.css", "/static/favicon.svg", "/static/app.js"}
        for link in links:
            assert re.search(r"\?v=[0-9a-f]{12}$", link), link
            r = await c.get(link)
            assert r.status_code == 200
            assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
            again = await c.get(link.split("?")[0],
                                headers={"If-None-Match": r.headers["etag"]})
            assert again.status_code == 304 and again.headers["cache-control"] == "no-cache"
        assert (await c.get("/sessions")).headers["cache-control"] == "no-store"
    await h.close()


@pytest.mark.parametrize("bad", [
    "x" * 300, "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "..%2F..%2Fetc%2Fpasswd", "%00abc",
    "a%0Ab", "%25" * 120, "%C3%A9" * 90, ".hidden", "test%3Anope",
])
async def test_bad_ids_are_404_without_paths(harness_env, bad):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url)
    await hostile_session(h, "test:ok", "fine")
    async with client(h) as c:
        for url in [f"/sessions/{bad}", f"/api/sessions/{bad}",
                    f"/fragments/events?id={bad}&after=0", f"/results?id={bad}&seq=1"]:
            r = await c.get(url)
            assert r.status_code == 404, url
            assert str(tmp_path) not in r.text and ".jsonl" not in r.text, url
            assert "/root" not in r.text and "Traceback" not in r.text
    await h.close()


class TagAudit(HTMLParser):
    """Every element and attribute of a page, to check that hostile text made none."""

    SAFE_URL = re.compile(r"^(/|https?://|#|\?)")

    def __init__(self):
        super().__init__()
        self.problems: list[str] = []
        self.scripts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("iframe", "img", "svg", "math", "style", "base", "object", "embed"):
            self.problems.append(f"<{tag}>")
        if tag == "script":
            self.scripts.append(dict(attrs).get("src") or "inline")
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append(f"{tag} {name}")
            if name in ("href", "src", "action") and value and not self.SAFE_URL.match(value):
                self.problems.append(f"{tag} {name}={value}")


async def test_xss_corpus_renders_as_text_everywhere(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url)
    for i, text in enumerate(XSS):
        await hostile_session(h, f"test:x{i}", text)
    async with client(h) as c:
        urls = ["/", "/?q=script", "/api/sessions"]
        urls += [f"/sessions/test%3Ax{i}" for i in range(len(XSS))]
        urls += [f"/fragments/events?id=test:x{i}&after=0" for i in range(len(XSS))]
        for url in urls:
            r = await c.get(url)
            assert r.status_code == 200, url
            if url.startswith("/api/"):
                continue
            audit = TagAudit()
            audit.feed(r.text)
            assert audit.problems == [], (url, audit.problems)
            assert {s.split("?v=")[0] for s in audit.scripts} <= {"/static/app.js"}, url
        page = (await c.get("/sessions/test%3Ax0")).text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    await h.close()


def test_generate_token_prints_a_long_random_token(tmp_path, capsys):
    from dsh_harness import cli

    config = tmp_path / "dsh.toml"
    config.write_text('home = "home"\n')
    assert cli.main(["--config", str(config), "web", "--generate-token"]) == 0
    first = capsys.readouterr().out.strip()
    assert cli.main(["--config", str(config), "web", "--generate-token"]) == 0
    second = capsys.readouterr().out.strip()
    assert len(first) >= 32 and first != second and re.fullmatch(r"[A-Za-z0-9_-]+", first)


async def test_head_requests_to_the_login_page_are_no_sign_in_attempts(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url, f'[web]\nauth_token = "{TOKEN}"\n')
    async with client(h) as c:
        for _ in range(3 * MAX_FAILURES):
            assert (await c.head("/login")).status_code == 200
        bearer = await c.get("/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200, "HEADs locked the address out"
        assert (await c.post("/login", data={"token": TOKEN})).status_code == 303
    await h.close()


async def test_logout_revokes_the_cookie_on_the_server(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url, f'[web]\nauth_token = "{TOKEN}"\n')
    async with client(h) as c:
        assert (await c.post("/login", data={"token": TOKEN})).status_code == 303
        copied = c.cookies["dsh_web_session"]
        assert (await c.get("/api/sessions")).status_code == 200
        assert (await c.get("/logout")).status_code == 303
    async with client(h) as thief:
        thief.cookies.set("dsh_web_session", copied)
        assert (await thief.get("/api/sessions")).status_code == 401, "the copy still works"
    async with client(h) as c:  # signing in again works, with a new cookie
        assert (await c.post("/login", data={"token": TOKEN})).status_code == 303
        assert c.cookies["dsh_web_session"] != copied
        assert (await c.get("/api/sessions")).status_code == 200
    await h.close()


def test_weak_tokens_are_refused(harness_env):
    from dsh_harness import ConfigError
    from dsh_harness.web.app import build_app
    from dsh_harness.web.auth import generate_token, token_bits

    tmp_path, server = harness_env
    for weak in ("a" * 40, "ab" * 20, "abc" * 14, "0123456789" * 4):
        h = make(tmp_path, server.base_url, f'[web]\nhost = "0.0.0.0"\nauth_token = "{weak}"\n')
        with pytest.raises(ConfigError, match="too easy to guess"):
            build_app(h)
    for weak in ("letmein-123456", "a" * 40):  # on loopback too: the machine's other users
        h = make(tmp_path, server.base_url, f'[web]\nauth_token = "{weak}"\n')
        with pytest.raises(ConfigError, match="too easy to guess"):
            build_app(h)
    for strong in (TOKEN, generate_token(), "3f9a1c07b2e84d6a9c5f0e1b7d2a4c8e"):
        assert token_bits(strong) >= 96, strong
        build_app(make(tmp_path, server.base_url,
                       f'[web]\nhost = "0.0.0.0"\nauth_token = "{strong}"\n'))


async def test_forwarded_for_is_believed_only_from_configured_proxies(harness_env):
    """A real server (uvicorn reads X-Forwarded-For): from loopback the header must not pick
    the client address the rate limit counts, unless web.trusted_proxies names the proxy."""
    tmp_path, server = harness_env

    async def wrong_logins(extra: str) -> list[int]:
        h = make(tmp_path, server.base_url,
                 f'[web]\nenabled = true\nport = 0\nauth_token = "{TOKEN}"\n{extra}')
        await h.startup()
        try:
            port = h.plugin_state["dsh.web"].port
            async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
                return [(await c.post("/login", data={"token": "nope"},
                                      headers={"X-Forwarded-For": f"203.0.113.{i}"})
                         ).status_code for i in range(MAX_FAILURES + 2)]
        finally:
            await h.shutdown()
    codes = await wrong_logins("")
    assert codes[:MAX_FAILURES] == [401] * MAX_FAILURES and codes[MAX_FAILURES:] == [429] * 2
    # Behind a configured proxy each forwarded client has its own count.
    assert await wrong_logins('trusted_proxies = ["127.0.0.1"]\n') == \
        [401] * (MAX_FAILURES + 2)


async def test_landmarks_headings_and_labelled_navigation(harness_env):
    tmp_path, server = harness_env
    h = make(tmp_path, server.base_url, f'[web]\nauth_token = "{TOKEN}"\n')
    for i in range(60):  # more than a page: the pager's <nav> is there too
        s = await h.sessions.create(f"test:s{i:02d}", {})
        await h.sessions.release(s.id)
    async with client(h) as c:
        login = (await c.get("/login")).text
        assert login.count("<main>") == 1 and "<h1>" in login
        assert (await c.post("/login", data={"token": TOKEN})).status_code == 303
        page = (await c.get("/sessions")).text
        assert re.search(r"<h1>Sessions</h1>", page)
        navs = re.findall(r"<nav[^>]*>", page)
        assert len(navs) == 2 and all('aria-label="' in n for n in navs), navs
        assert len({re.search(r'aria-label="([^"]+)"', n).group(1) for n in navs}) == 2
    css = (Path(__file__).parents[3] / "dsh_harness/web/static/style.css").read_text()
    assert "uppercase" not in css, "paths and model names are shown as written"
    await h.close()
