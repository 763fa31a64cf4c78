"""The web app over the ASGI transport: fast checks of paging, caching, safety and auth."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from dsh_harness import ConfigError, Harness, PluginError, hookimpl, parse_config
from dsh_harness.testing import Reply, ScriptedModelServer
from dsh_harness.web.app import EVENT_PAGE, PAGE_SIZE, build_app
from dsh_harness.web.render import markdown
from tests.harness.agent_kit import WorldsPlugin, config_text


def make(tmp_path: Path, base_url: str, web: str = "") -> Harness:
    text = config_text(base_url) + web
    return Harness(parse_config(text, "t.toml", tmp_path), load_entry_points=False,
                   plugins=[("worlds", WorldsPlugin()), ("groups", Groups())])


class Groups:
    @hookimpl
    def dsh_session_group(self, harness, session):
        return ["tests", session.id.split(":")[1]]

    @hookimpl
    def dsh_session_link(self, harness, session):
        return "javascript:alert(1)" if "evil" in session.id else "https://example.test/x"


async def client(h: Harness) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=build_app(h)),
                              base_url="http://127.0.0.1")


@pytest.fixture
def server():
    with ScriptedModelServer() as s:
        yield s


def test_markdown_is_safe():
    html = markdown("**b** <script>x()</script> [a](javascript:alert(1)) <img src=x onerror=y>")
    assert "<strong>b</strong>" in html and "<script>" not in html
    assert "&lt;script&gt;" in html and 'href="javascript' not in html and "<img" not in html


def test_public_bind_needs_a_token(tmp_path, server):
    with pytest.raises(ConfigError, match=r"not a loopback address: set web\.auth_token"):
        build_app(make(tmp_path, server.base_url, '[web]\nhost = "0.0.0.0"\n'))
    with pytest.raises(ConfigError, match="needs at least 32"):
        build_app(make(tmp_path, server.base_url, '[web]\nhost = "0.0.0.0"\nauth_token = "t"\n'))
    build_app(make(tmp_path, server.base_url,
                   '[web]\nhost = "0.0.0.0"\nauth_token = "t0Kx9-qW3e7Lm2-Zp8Rv4Nc6Yb1Hd5Js"\n'))
    build_app(make(tmp_path, server.base_url, '[web]\nhost = "::1"\n'))


async def test_index_pages_groups_filters_and_caches(tmp_path, server):
    h = make(tmp_path, server.base_url)
    server.push(*[Reply(content="ok")] * (PAGE_SIZE + 7))
    for i in range(PAGE_SIZE + 5):
        await (await h.agents.create(f"test:s{i:03d}")).followup(f"prompt {i}")
    await (await h.agents.create("test:evil")).followup("hi")
    async with await client(h) as c:
        first = (await c.get("/api/sessions")).json()
        assert first["total"] == PAGE_SIZE + 6 and first["pages"] == 2
        assert len(first["sessions"]) == PAGE_SIZE
        assert first["sessions"][0]["id"] == "test:evil", "newest first"
        assert first["sessions"][0]["link"] is None, "unsafe links are dropped"
        assert {"path": "tests", "depth": 0, "count": PAGE_SIZE + 6} in first["groups"]
        assert first["totals"]["turns"] == PAGE_SIZE + 6
        page2 = (await c.get("/api/sessions?page=2")).json()
        assert len(page2["sessions"]) == 6
        pager = (await c.get("/sessions")).text
        assert "page 1 of 2" in pager and "older →" in pager and "← newer" not in pager
        pager = (await c.get("/sessions?page=2")).text
        assert "page 2 of 2" in pager and "← newer" in pager and "older →" not in pager
        assert (await c.get("/api/sessions?q=s007")).json()["total"] == 1
        assert (await c.get("/api/sessions?group=tests / evil")).json()["total"] == 1
        html = (await c.get("/?q=s00")).text
        assert "test:s012" not in html and "test:s001" in html
        # A change to one log re-reads only what was appended to that session.
        catalog = c._transport.app.state.web.catalog
        before = {e.id: e for e in await catalog.entries()}
        await (await h.agents.resume("test:s000")).followup("again")
        await catalog.refresh()  # requests never wait for a scan once the index exists
        after = {e.id: e for e in await catalog.entries()}
        assert [i for i in after if after[i] is not before[i]] == ["test:s000"]
        assert after["test:s000"].offset > before["test:s000"].offset
        again = (await c.get("/api/sessions")).json()
        assert again["sessions"][0]["id"] == "test:s000"
        assert again["sessions"][0]["turns"] == 2
    await h.close()


async def test_session_page_fragments_and_results(tmp_path, server):
    h = make(tmp_path, server.base_url, "")
    server.push(Reply(tool_calls=[("big", {"n": 9000})]), Reply(content="**done**"))
    agent = await h.agents.create("test:page")
    await agent.followup("read big")
    async with await client(h) as c:
        r = await c.get("/sessions/test%3Apage")
        assert r.status_code == 200 and "<strong>done</strong>" in r.text
        assert "show the whole result" in r.text
        assert "default-src 'none'" in r.headers["content-security-policy"]
        result_seq = next(e.seq for e in agent.session.events if e.type == "tool_result")
        full = await c.get(f"/results?id=test%3Apage&seq={result_seq}")
        assert full.text.count("x" * 9000) == 1
        last = agent.session.events[-1].seq
        assert (await c.get(f"/fragments/events?id=test:page&after={last}")).status_code == 204
        frag = await c.get("/fragments/events?id=test:page&after=0&limit=3")
        assert frag.headers["X-More"] == "1" and int(frag.headers["X-Last-Seq"]) == 3
        api = (await c.get("/api/sessions/test%3Apage?after=0&limit=2")).json()
        assert len(api["events"]) == 2 and api["more"] is True
        assert (await c.get("/sessions/test%3Anope")).status_code == 404
    await h.close()


async def test_configured_secrets_are_redacted_everywhere(tmp_path, server, monkeypatch):
    secret = "sk-live-" + "9" * 30
    monkeypatch.setenv("DSH_TEST_SECRET", secret)
    h = make(tmp_path, server.base_url,
             '[providers.other]\nbase_url = "http://127.0.0.1:9"\napi_key_env = '
             '"DSH_TEST_SECRET"\n')
    server.push(Reply(content=f"the model says {secret}"))
    await (await h.agents.create("test:leak")).followup("hi")
    async with await client(h) as c:
        for url in ["/sessions/test%3Aleak", "/api/sessions/test%3Aleak", "/settings",
                    "/api/settings", "/"]:
            text = (await c.get(url)).text
            assert secret not in text, url
        assert "[REDACTED_SECRET]" in (await c.get("/sessions/test%3Aleak")).text
    await h.close()


async def test_token_auth_header_cookie_and_login(tmp_path, server):
    h = make(tmp_path, server.base_url, '[web]\nauth_token = "letmein-7Kq2xW9rT4mZ8pV3nB6c"\n')
    async with await client(h) as c:
        assert (await c.get("/api/sessions")).status_code == 401
        assert (await c.get("/")).status_code == 401
        assert (await c.get("/static/style.css")).status_code == 200
        ok = await c.get("/api/sessions",
                         headers={"Authorization": "Bearer letmein-7Kq2xW9rT4mZ8pV3nB6c"})
        assert ok.status_code == 200
        login = await c.post("/login", data={"token": "letmein-7Kq2xW9rT4mZ8pV3nB6c"})
        assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
        assert (await c.get("/api/sessions")).status_code == 200  # the cookie now
    await h.close()


async def test_dsh_run_serves_the_ui_when_enabled(tmp_path, server):
    h = make(tmp_path, server.base_url, "[web]\nenabled = true\nport = 0\n")
    await h.startup()
    try:
        port = h.plugin_state["dsh.web"].port
        async with httpx2.AsyncClient() as c:
            r = await c.get(f"http://127.0.0.1:{port}/api/sessions")
            assert r.status_code == 200 and r.json()["total"] == 0
    finally:
        await h.shutdown()
    assert "dsh.web" not in h.plugin_state


async def test_long_sessions_page_and_reading_never_writes(tmp_path, server):
    from dsh_harness.sessions.events import TitleSet

    h = make(tmp_path, server.base_url)
    session = await h.sessions.create("test:long", {})
    for i in range(1200):
        await session.record(TitleSet, title=f"t{i}", pinned=False)
    await h.sessions.release("test:long")
    path = tmp_path / "home" / "sessions" / "test%3Along.jsonl"
    before = (path.stat().st_mtime_ns, path.stat().st_size)
    async with await client(h) as c:
        page = (await c.get("/sessions/test%3Along")).text
        assert page.count('class="event title"') == EVENT_PAGE
        assert '<button id="more" type="button" >' in page
        frag = await c.get(f"/fragments/events?id=test:long&after={EVENT_PAGE}")
        assert frag.headers["X-More"] == "1"
        assert frag.text.count('class="event title"') == EVENT_PAGE
        last = await c.get("/fragments/events?id=test:long&after=1000")
        assert last.headers["X-More"] == "0" and last.text.count('class="event title"') == 200
    assert (path.stat().st_mtime_ns, path.stat().st_size) == before, "reading wrote the log"
    await h.close()


def test_dsh_web_refuses_a_public_bind_without_a_token(tmp_path, capsys):
    from dsh_harness import cli

    config = tmp_path / "dsh.toml"
    config.write_text('home = "home"\n')
    assert cli.main(["--config", str(config), "web", "--host", "0.0.0.0", "--port", "0"]) == 1
    assert "not a loopback address: set web.auth_token" in capsys.readouterr().err


class Home:
    """A plugin whose page is what ``/`` shows (the reviewer's PR index does this)."""

    @hookimpl
    def dsh_register_web_routes(self, router):
        from starlette.responses import PlainTextResponse

        async def board(request):
            return PlainTextResponse("the board")
        router.add_page("/board", board, "Board", home=True)
        for bad in ("/sessions", "/sessions/x", "/"):
            with pytest.raises(PluginError, match="shadow"):
                router.add_page(bad, board, "Bad")


async def test_a_plugin_home_page_is_what_slash_shows_and_sessions_move_to_sessions(
        tmp_path, server):
    plain = make(tmp_path / "a", server.base_url)
    async with await client(plain) as c:
        index = (await c.get("/")).text
        assert "All sessions" in index and 'action="/sessions"' in index
        assert (await c.get("/sessions")).text == index
    await plain.close()
    h = Harness(parse_config(config_text(server.base_url), "t.toml", tmp_path / "b"),
                load_entry_points=False, plugins=[("worlds", WorldsPlugin()), ("home", Home())])
    async with await client(h) as c:
        assert (await c.get("/")).text == "the board"
        sessions = (await c.get("/sessions")).text
        assert "All sessions" in sessions
        nav = sessions.split("<nav", 1)[1].split("</nav>", 1)[0]
        assert nav.index('href="/board"') < nav.index('href="/sessions"'), "home listed first"
    await h.close()


async def test_a_cold_start_builds_the_index_behind_a_page_that_says_so(
        tmp_path, server, monkeypatch):
    import asyncio

    import dsh_harness.web.catalog as catalog

    monkeypatch.setattr(catalog, "COLD_WAIT_S", 0)  # as if the logs took long to read
    h = make(tmp_path, server.base_url)
    for i in range(30):
        s = await h.sessions.create(f"test:s{i:02d}", {})
        await h.sessions.release(s.id)
    index_file = h.home / "web" / "index.json"
    for url in ("/sessions", "/api/sessions"):
        index_file.unlink(missing_ok=True)   # no saved index: built from the logs
        async with await client(h) as c:  # a fresh app: a fresh process
            first = await c.get(url)
            assert first.status_code == 503 and first.headers["retry-after"] == "2", url
            if url.startswith("/api/"):
                assert first.json()["building"] is True and first.json()["total"] in (None, 30)
            else:
                assert "<h1>Building the session index</h1>" in first.text
                assert '<meta http-equiv="refresh" content="2">' in first.text
            for _ in range(200):
                r = await c.get(url)
                if r.status_code == 200:
                    break
                await asyncio.sleep(0.05)
            assert r.status_code == 200, url
            assert ("test:s00" in r.text), url
    # A restart over the saved index loads it: the first request gets the page, not
    # "building".
    for _ in range(200):
        if index_file.exists():
            break
        await asyncio.sleep(0.05)
    async with await client(h) as c:
        assert (await c.get("/sessions")).status_code == 200
    await h.close()
