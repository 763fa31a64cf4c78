"""Configured secrets in a PR (body, a changed file) never reach the session log or the model:
the reviewer's sanitizer knows token patterns, the harness knows the deployment's own values
(here the provider key, which matches no pattern, and the bot's PAT)."""

from __future__ import annotations

import json

import pytest

from dsh_github_reviewer.testing.scenario import BOT_TOKEN, FEATURE, REPO, build_shop

from .conftest import Deployment

pytestmark = pytest.mark.slow
PROVIDER_KEY = "scripted-model"  # deployment_toml's provider api_key


async def test_pr_with_configured_secrets_is_redacted_in_log_and_requests(tmp_path, sandbox80,
                                                                         model):
    build_shop(sandbox80)
    st = sandbox80.state
    st.commit(REPO, "feature-1", {**FEATURE, "shop/settings.py": f'KEY = "{PROVIDER_KEY}"\n'},
              message="settings")
    st.pull(REPO, 1).body = f"Uses key {PROVIDER_KEY} and token {BOT_TOKEN} for the demo."
    dep = await Deployment(tmp_path, sandbox80, model).start()
    try:
        await dep.tick()
        assert dep.reviews(), "the PR was reviewed"
        assert set(dep.harness.secret_values()) >= {PROVIDER_KEY, BOT_TOKEN}
    finally:
        await dep.stop()
    logs = list((tmp_path / "home" / "sessions").glob("*.jsonl"))
    assert logs
    texts = [p.read_text() for p in logs]
    texts += [json.dumps(s.request, ensure_ascii=False) for s in model.served]
    assert any("[REDACTED_SECRET]" in t for t in texts)
    for text in texts:
        assert PROVIDER_KEY not in text and BOT_TOKEN not in text
