"""``[plugins.github-reviewer.webhook]``: secrets required and never echoed, per-account
secrets, and the poll period becoming the reconciliation interval."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dsh_github_reviewer.app import ReviewerApp
from dsh_github_reviewer.config import ReviewerConfig
from dsh_harness import ConfigError, Harness, parse_config


def test_enabled_without_a_secret_is_refused():
    with pytest.raises(ValidationError, match=r"webhook\.secret: required when webhook\.enabled"):
        ReviewerConfig.model_validate({"webhook": {"enabled": True, "secret": ""}})
    # Every account needs one: the shared secret or its own.
    with pytest.raises(ValidationError, match=r"accounts\[1\].webhook_secret"):
        ReviewerConfig.model_validate({"webhook": {"enabled": True}, "accounts": [
            {"name": "a", "webhook_secret": "sa"}, {"name": "b"}]})
    cfg = ReviewerConfig.model_validate({"webhook": {"enabled": True}, "accounts": [
        {"name": "a", "webhook_secret": "sa"}, {"name": "b", "webhook_secret": "sb"}]})
    assert [cfg.webhook_secret(a).get_secret_value() for a in cfg.accounts] == ["sa", "sb"]
    # Disabled: no secret needed, nothing changes.
    assert ReviewerConfig.model_validate({}).webhook.enabled is False


def test_account_secret_overrides_the_shared_one():
    cfg = ReviewerConfig.model_validate({"webhook": {"enabled": True, "secret": "shared"},
                                         "accounts": [{"name": "a"},
                                                      {"name": "b", "webhook_secret": "own"}]})
    assert [cfg.webhook_secret(a).get_secret_value() for a in cfg.accounts] == ["shared", "own"]


@pytest.mark.parametrize("path", ["github/webhook", "/a b", "/x?y=1", ""])
def test_bad_paths_are_named(path):
    with pytest.raises(ValidationError, match="must be a URL path"):
        ReviewerConfig.model_validate({"webhook": {"path": path}})


def test_errors_never_echo_the_secret(tmp_path):
    toml = (f'home = "{tmp_path}"\n[plugins.github-reviewer.webhook]\nenabled = true\n'
            'secret = "topsecret-value"\nport = 99999\n')
    with pytest.raises(ConfigError) as err:
        Harness(parse_config(toml, "dsh.toml", tmp_path))
    assert "plugins.github-reviewer.webhook.port" in str(err.value)
    assert "topsecret-value" not in str(err.value)


def test_the_poll_period_becomes_the_reconciliation_interval(tmp_path):
    def accounts(webhook: str):
        toml = (f'home = "{tmp_path}"\n[plugins.github-reviewer]\n'
                '[[plugins.github-reviewer.accounts]]\nname = "a"\npoll_interval_s = 60\n'
                f"{webhook}")
        return ReviewerApp(Harness(parse_config(toml, "dsh.toml", tmp_path)))
    assert accounts("").tick_interval_s("a") == 60
    on = accounts('[plugins.github-reviewer.webhook]\nenabled = true\nsecret = "s"\n'
                  "reconcile_interval_s = 1800\n")
    assert on.tick_interval_s("a") == 1800
    assert on.configured["a"].config.poll_interval_s == 60  # backoff unit
