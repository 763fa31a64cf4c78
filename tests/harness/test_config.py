from __future__ import annotations

from pathlib import Path

import pytest

from dsh_harness import ConfigError, load_config, parse_config
from dsh_harness.config import interpolate

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_when_default_file_missing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    loaded = load_config()
    assert loaded.source == "(defaults)"
    assert loaded.config.storage.backend == "sqlite"
    assert loaded.config.default_model == "deepseek/deepseek-v4-flash"
    assert loaded.home == tmp_path / ".dsh"


def test_explicit_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")


def test_home_is_relative_to_the_config_file(tmp_path):
    (tmp_path / "etc").mkdir()
    cfg = tmp_path / "etc" / "dsh.toml"
    cfg.write_text('home = "state"\n')
    assert load_config(cfg).home == tmp_path / "etc" / "state"


def test_unknown_keys_name_file_and_path():
    with pytest.raises(ConfigError) as exc:
        parse_config('[storage]\nbackend = "json"\nbackedn = 1\n[web]\nprot = 1\n', "x.toml",
                     Path("."))
    msg = str(exc.value)
    assert "x.toml: storage.backedn: Extra inputs are not permitted" in msg
    assert "x.toml: web.prot: Extra inputs are not permitted" in msg


def test_wrong_types_name_the_path_and_never_echo_values():
    with pytest.raises(ConfigError) as exc:
        parse_config('[web]\nport = "ghp_notreallyasecretbutlookslikeone"\n', "x.toml", Path("."))
    assert "x.toml: web.port:" in str(exc.value)
    assert "ghp_" not in str(exc.value)


def test_provider_model_paths():
    with pytest.raises(
            ConfigError, match=r"providers\.deepseek\.models\.m\.input: Input should be"):
        parse_config('[providers.deepseek.models.m]\ninput = -1\n', "x.toml", Path("."))
    with pytest.raises(ConfigError, match="default_model: must be <provider>/<model>"):
        parse_config('default_model = "nomodel"\n', "x.toml", Path("."))
    with pytest.raises(ConfigError, match=r"providers.p.base_url: must be an http\(s\) URL"):
        parse_config('[providers.p]\nbase_url = "ftp://x"\n', "x.toml", Path("."))


def test_invalid_toml_is_reported():
    with pytest.raises(ConfigError, match=r"x\.toml: not valid TOML"):
        parse_config("home = \n", "x.toml", Path("."))


def test_interpolation_rules():
    env = {"A": "alpha", "EMPTY": ""}
    assert interpolate("${A}-x", env) == "alpha-x"
    assert interpolate("${MISSING:-fallback}", env) == "fallback"
    assert interpolate("${EMPTY:-fallback}", env) == "fallback"
    assert interpolate("${MISSING:-}", env) == ""
    assert interpolate("$${A} costs $$5", env) == "${A} costs $5"
    assert interpolate({"l": ["${A}", 3]}, env) == {"l": ["alpha", 3]}


def test_missing_variable_names_variable_and_field():
    with pytest.raises(ConfigError) as exc:
        parse_config('[web]\nauth_token = "${DSH_TEST_TOKEN}"\n', "x.toml", Path("."), env={})
    assert str(exc.value).startswith("x.toml: web.auth_token: environment variable DSH_TEST_TOKEN")


def test_secrets_are_secretstr():
    loaded = parse_config('[web]\nauth_token = "${T}"\n', "x.toml", Path("."),
                          env={"T": "super-secret-value"})
    assert "super-secret-value" not in repr(loaded.config)
    assert loaded.config.web.auth_token.get_secret_value() == "super-secret-value"


def test_plugin_instance_keeps_its_block():
    loaded = parse_config('[plugins.x]\nplugin = "p"\nfoo = 1\n[plugins.y]\nenabled = false\n',
                          "x.toml", Path("."))
    assert loaded.config.plugins["x"].settings == {"foo": 1}
    assert loaded.config.plugins["y"].enabled is False


def test_example_config_parses():
    # The shipped example must load with an empty environment (every ${VAR} has a default) and
    # mean what its comments say.
    loaded = load_config(ROOT / "dsh.example.toml", env={})
    cfg = loaded.config
    assert loaded.home == ROOT / ".dsh"
    assert cfg.default_model == "deepseek/deepseek-v4-flash" and cfg.disable_plugins == []
    assert (cfg.storage.backend, cfg.storage.routes, cfg.sessions.store) == ("sqlite", {}, "jsonl")
    deepseek = cfg.providers["deepseek"]
    assert (deepseek.base_url, deepseek.api_key_env) == ("https://api.deepseek.com",
                                                         "DEEPSEEK_API_KEY")
    assert (cfg.web.enabled, cfg.web.host, cfg.web.port, cfg.web.auth_token) == (
        False, "127.0.0.1", 8765, None)
    block = cfg.plugins["github-reviewer"]
    assert block.plugin is None and block.enabled is True
    assert block.settings["accounts"][0] == {"name": "default", "personal_access_token": "",
                                             "repositories": ""}


def test_example_config_takes_credentials_from_the_environment():
    env = {"GITHUB_TOKEN": "ghp_example", "GITHUB_REPOSITORIES": "octo/a, octo/b"}
    block = load_config(ROOT / "dsh.example.toml", env=env).config.plugins["github-reviewer"]
    assert block.settings["accounts"][0] == {"name": "default",
                                             "personal_access_token": "ghp_example",
                                             "repositories": "octo/a, octo/b"}


def test_booleans_from_the_environment_read_true_and_false_only():
    """`${VAR}` yields a string; exactly "true"/"false" are booleans."""
    text = '[web]\nenabled = "${WEB_ON}"\n'
    assert parse_config(text, "t.toml", Path("."), env={"WEB_ON": "true"}).config.web.enabled
    assert not parse_config(text, "t.toml", Path("."), env={"WEB_ON": "false"}
                            ).config.web.enabled
    for bad in ("yes", "1", "True", "on"):
        with pytest.raises(ConfigError, match=r"web.enabled: must be true or false"):
            parse_config(text, "t.toml", Path("."), env={"WEB_ON": bad})
