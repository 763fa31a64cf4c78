"""Operator messages below the CLI: an MCP server that cannot start is a WARNING the
operator sees (with its stderr, secrets redacted), and padded model names are trimmed."""

from __future__ import annotations

import logging
import sys

import pytest

from dsh_github_reviewer.config import AccountConfig, McpSettings
from dsh_github_reviewer.github.mcp_host import McpError, McpRuntime

LEAK = "ghp_" + "L3ak" * 9


@pytest.mark.parametrize(("command", "args", "says"), [
    ("/nonexistent/github-mcp-server", [], "FileNotFoundError"),
    (sys.executable, ["-c", f"import sys; print('bad credentials {LEAK}', file=sys.stderr); "
                            "sys.exit(3)"], "its stderr: bad credentials [REDACTED_SECRET]"),
])
async def test_mcp_start_failure_is_a_warning_with_its_stderr(caplog, command, args, says):
    runtime = McpRuntime(McpSettings(command=command, args=args), "", timeout_s=20)
    with caplog.at_level(logging.WARNING, logger="dsh_github_reviewer.github.mcp_host"), \
            pytest.raises(McpError, match="github-mcp-server failed to start"):
        await runtime.connect("ghs_token")
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert says in record.getMessage() and command in record.getMessage()
    assert LEAK not in caplog.text


def test_review_model_names_are_trimmed():
    cfg = AccountConfig.model_validate(
        {"review": {"models": [{"provider": " deepseek ", "model": "deepseek-chat\n"}]}})
    assert [c.ref for c in cfg.review.models] == ["deepseek/deepseek-chat"]
    with pytest.raises(ValueError, match="must not be empty"):
        AccountConfig.model_validate({"review": {"models": [{"provider": " ", "model": "m"}]}})


def test_gh_oauth_tokens_are_accepted_and_others_named():
    assert AccountConfig(personal_access_token="gho_" + "a" * 36).has_credentials
    with pytest.raises(ValueError, match=r"OAuth \(gho_\.\.\., from `gh auth token`\)"):
        AccountConfig(personal_access_token="xoxb-not-github")
