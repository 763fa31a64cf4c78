"""Web sign-ins across replicas: a cookie one replica issued lets the browser
in on every replica of the deployment, and a logout on one is a logout on all — on the shared
PostgreSQL database replicas use, and on one home's storage (``dsh run`` beside ``dsh web``)."""

from __future__ import annotations

import pytest

from dsh_harness import Harness, parse_config
from dsh_harness.web import signins
from tests.harness.web.test_security import TOKEN, client, make


async def check_two_replicas(a: Harness, b: Harness) -> None:
    async with client(a) as ca, client(b) as cb:
        assert (await cb.get("/api/sessions")).status_code == 401
        r = await ca.post("/login", data={"token": TOKEN})
        assert r.status_code == 303
        cookie = ca.cookies["dsh_web_session"]
        cb.cookies.set("dsh_web_session", cookie)
        assert (await cb.get("/api/sessions")).status_code == 200, "issued on A, valid on B"
        assert (await ca.get("/api/sessions")).status_code == 200
        await cb.get("/logout")   # B forgets it; the record is gone for A too
        cb.cookies.set("dsh_web_session", cookie)
        assert (await cb.get("/api/sessions")).status_code == 401
        ca.cookies.set("dsh_web_session", cookie)
        assert (await ca.get("/api/sessions")).status_code == 401, "a copy stops on A too"
    # A restart keeps the sign-ins that are still recorded.
    async with client(a) as ca:
        await ca.post("/login", data={"token": TOKEN})
        kept = ca.cookies["dsh_web_session"]
    a.plugin_state.pop("test.web_app")
    async with client(a) as ca:
        ca.cookies.set("dsh_web_session", kept)
        assert (await ca.get("/api/sessions")).status_code == 200


@pytest.fixture
def recheck_now(monkeypatch):
    # Another replica's logout is seen at the next check; here the next request.
    monkeypatch.setattr(signins, "RECHECK_S", 0.0)


async def test_a_sign_in_holds_on_both_processes_of_one_home(tmp_path, recheck_now):
    web = f'[web]\nauth_token = "{TOKEN}"\n'
    a = make(tmp_path, "http://127.0.0.1:9", web)
    b = make(tmp_path, "http://127.0.0.1:9", web)
    try:
        await check_two_replicas(a, b)
    finally:
        await a.close()
        await b.close()


async def test_a_sign_in_holds_on_every_replica_of_a_shared_database(tmp_path, pg_dsn,
                                                                       recheck_now):
    from tests.harness.agent_kit import config_text

    text = (config_text("http://127.0.0.1:9") + f'[storage]\nbackend = "postgres"\n'
            f'dsn = "{pg_dsn}"\n[web]\nauth_token = "{TOKEN}"\n')
    replicas = [Harness(parse_config(text, "t.toml", tmp_path / name), load_entry_points=False)
                for name in ("a", "b")]
    try:
        await check_two_replicas(*replicas)
    finally:
        for h in replicas:
            await h.close()


async def test_an_unreadable_store_signs_in_nobody_new(tmp_path, monkeypatch):
    """The database down: a cookie this replica checked before still works, a forged or
    unknown one does not."""
    from dsh_harness.errors import StorageError

    h = make(tmp_path, "http://127.0.0.1:9", f'[web]\nauth_token = "{TOKEN}"\n')
    try:
        async with client(h) as c:
            await c.post("/login", data={"token": TOKEN})
            mine = c.cookies["dsh_web_session"]

            async def down(self):
                raise StorageError("the database is down")
            monkeypatch.setattr(signins.SharedSignIns, "_table", down)
            monkeypatch.setattr(signins, "RECHECK_S", 0.0)
            assert (await c.get("/api/sessions")).status_code == 200
            c.cookies.clear()
            assert (await c.get("/api/sessions")).status_code == 401
            c.cookies.set("dsh_web_session", mine)
            assert (await c.get("/api/sessions")).status_code == 200
    finally:
        await h.close()
