"""The plugin host: built-ins through hooks, entry points, block-list, sync and async hooks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, field_validator

from dsh_harness import ConfigError, Harness, PluginError, StorageError, hookimpl, parse_config
from dsh_harness.plugins import PluginHost, read_manifest


def harness(tmp_path: Path, toml: str = "", **kw) -> Harness:
    return Harness(parse_config(toml, "t.toml", tmp_path), **kw)


class Recorder:
    def __init__(self):
        self.calls: list[str] = []

    @hookimpl
    async def dsh_startup(self, harness):
        self.calls.append("async-start")

    @hookimpl
    def dsh_shutdown(self, harness):
        self.calls.append("sync-stop")


async def test_register_run_unregister(tmp_path):
    h = harness(tmp_path, load_entry_points=False)
    rec = Recorder()
    h.plugins.register(rec, "recorder")
    await h.startup()
    await h.shutdown()
    assert rec.calls == ["async-start", "sync-stop"]
    h.plugins.unregister("recorder")
    await h.startup()
    await h.shutdown()
    assert rec.calls == ["async-start", "sync-stop"]


async def test_shutdown_runs_every_impl_even_if_one_fails(tmp_path):
    class Boom:
        @hookimpl
        def dsh_shutdown(self, harness):
            raise RuntimeError("boom")
    rec = Recorder()
    h = harness(tmp_path, load_entry_points=False, plugins=[("rec", rec), ("boom", Boom())])
    await h.shutdown()
    assert rec.calls == ["sync-stop"]


async def test_failed_startup_shuts_down(tmp_path):
    class Fails:
        @hookimpl(trylast=True)
        async def dsh_startup(self, harness):
            raise RuntimeError("cannot start")
    rec = Recorder()
    h = harness(tmp_path, load_entry_points=False, plugins=[("rec", rec), ("fails", Fails())])
    with pytest.raises(RuntimeError, match="cannot start"):
        await h.startup()
    assert rec.calls == ["async-start", "sync-stop"]


async def test_firstresult_awaits_async_and_skips_none():
    host = PluginHost()

    class NoOpinion:
        @hookimpl
        async def dsh_session_title(self, harness, session):
            return None

    class Pins:
        @hookimpl
        async def dsh_session_title(self, harness, session):
            return f"title for {session}"

    host.register(Pins(), "pins")
    host.register(NoOpinion(), "noop")  # registered last = called first
    assert await host.afirst("dsh_session_title", harness=None, session="s1") == "title for s1"


def test_builtins_are_plugins_and_can_be_blocked(tmp_path):
    h = harness(tmp_path, load_entry_points=False)
    names = {p.name: p for p in h.plugin_listing()}
    assert names["dsh.storage.json"].origin == "built-in"
    assert names["dsh.storage.json"].hooks == ["dsh_register_storage_backends"]
    h2 = harness(tmp_path, 'disable_plugins = ["dsh.storage.json"]', load_entry_points=False)
    assert "dsh.storage.json" not in {p.name for p in h2.plugin_listing()}
    h3 = harness(tmp_path, '[storage]\nbackend = "json"', load_entry_points=False,
                 env={"DSH_DISABLE_PLUGINS": "dsh.storage.sqlite"})
    assert set(h3.storage.factories) == {"json", "postgres"}
    h4 = harness(tmp_path, load_entry_points=False,
                 env={"DSH_DISABLE_PLUGINS": "dsh.storage.sqlite"})
    with pytest.raises(StorageError, match=r"unknown storage backend 'sqlite' \(available: json"):
        _ = h4.storage


def test_sync_registration_hook_must_not_be_async(tmp_path):
    class Bad:
        @hookimpl
        async def dsh_storage_domains(self):
            return []
    h = harness(tmp_path, load_entry_points=False, plugins=[("bad", Bad())])
    with pytest.raises(PluginError, match="must not be async"):
        _ = h.storage


def test_hook_contract_violations_are_reported(tmp_path):
    class Wrong:
        @hookimpl
        def dsh_startup(self, harness, extra_argument):
            pass
    h = harness(tmp_path, load_entry_points=False)
    with pytest.raises(PluginError, match="does not fit the hook contract"):
        h.plugins.register(Wrong(), "wrong")


def test_duplicate_backend_registration(tmp_path):
    class Dup:
        @hookimpl
        def dsh_register_storage_backends(self, register):
            register("json", lambda d: None)
    h = harness(tmp_path, load_entry_points=False, plugins=[("dup", Dup())])
    with pytest.raises(PluginError, match="storage backend 'json' is registered twice"):
        _ = h.storage


def test_installed_plugin_is_listed_but_inactive_until_enabled(tmp_path):
    h = harness(tmp_path)
    listing = {p.name: p for p in h.plugin_listing()}
    reviewer = listing["dsh-github-reviewer"]
    assert reviewer.origin == "entry point" and reviewer.enabled is False
    assert "dsh_storage_domains" in reviewer.hooks
    assert not h.plugins.is_registered("dsh-github-reviewer")
    assert "dsh_github_reviewer" not in h.domain_specs()


def test_unknown_plugin_instance_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"t.toml: plugins.nothing: no installed plugin named"):
        harness(tmp_path, "[plugins.nothing]\n")
    h = harness(tmp_path, "[plugins.nothing]\nenabled = false\n")
    assert h.enabled_plugin_names == set()


def test_plugin_config_errors_carry_instance_path(tmp_path):
    class Cfg(BaseModel):
        model_config = ConfigDict(extra="forbid")
        repos: list[str] = []

        @field_validator("repos")
        @classmethod
        def _slash(cls, v):
            for r in v:
                if "/" not in r:
                    raise ValueError("must be owner/repo")
            return v

    class P:
        @hookimpl
        def dsh_plugin_config_models(self):
            return {"p": Cfg}

    with pytest.raises(ConfigError) as exc:
        harness(tmp_path, '[plugins.mine]\nplugin = "p"\nrepos = ["bad"]\ntypo = 1\n',
                plugins=[("p", P())], load_entry_points=False)
    msg = str(exc.value)
    assert "t.toml: plugins.mine.repos: must be owner/repo" in msg
    assert "t.toml: plugins.mine.typo: Extra inputs are not permitted" in msg
    h = harness(tmp_path, '[plugins.mine]\nplugin = "p"\nrepos = ["a/b"]\n',
                plugins=[("p", P())], load_entry_points=False)
    assert h.plugin_instances("p") == [("mine", Cfg(repos=["a/b"]))]


def test_manifest_is_read_from_the_installed_package():
    manifest = read_manifest("dsh_github_reviewer.plugin")
    assert manifest is not None
    assert manifest.name == "dsh-github-reviewer"
    assert manifest.default_instance == "github-reviewer"
    assert "storage" in manifest.services.required


def test_cli_plugins_json(capsys, tmp_path, monkeypatch):
    from dsh_harness import cli
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plugins", "--json"]) == 0
    listing = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    assert listing["dsh.storage.sqlite"]["origin"] == "built-in"
    assert listing["dsh-github-reviewer"]["origin"] == "entry point"
    assert listing["dsh-github-reviewer"]["hooks"]


def test_cli_reports_config_errors(capsys, tmp_path):
    from dsh_harness import cli
    bad = tmp_path / "dsh.toml"
    bad.write_text("[storage]\nbakend = 'x'\n")
    assert cli.main(["--config", str(bad), "config", "check"]) == 1
    assert f"{bad}: storage.bakend: Extra inputs are not permitted" in capsys.readouterr().err


def test_cli_config_check_passes_on_the_shipped_example(capsys, monkeypatch):
    from dsh_harness import cli

    # The example reads its credentials from the environment, as dsh run would.
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test-example")
    root = Path(__file__).resolve().parents[2]
    assert cli.main(["--config", str(root / "dsh.example.toml"), "config", "check"]) == 0
    out = capsys.readouterr().out
    assert "dsh.example.toml: OK" in out and "github-reviewer (dsh-github-reviewer)" in out
