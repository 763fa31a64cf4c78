"""The review loop end to end in GitHub App mode — installation tokens for
REST and for the real github-mcp-server, and an account without ``repositories`` reviewing
every repository its installation can access (and only those)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from dsh_github_reviewer.testing.scenario import BASE_FILES, FEATURE, REPO, build_shop, push_fix

from .conftest import Deployment

pytestmark = pytest.mark.slow
BOT = "dsh-reviewer[bot]"
OTHER = "acme/not-installed"


def _app_key(tmp_path) -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = tmp_path / "app.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    pem.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return "app.pem", public.decode()  # relative: resolved against dsh.toml's directory


async def test_app_account_reviews_its_installation_repositories(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    sandbox80.state.create_repo(OTHER, dict(BASE_FILES))
    sandbox80.state.commit(OTHER, "feature-x", dict(FEATURE))
    sandbox80.state.open_pull(OTHER, "feature-x", title="Outside the installation", author="alice")
    key_path, public = _app_key(tmp_path)
    app = sandbox80.register_app(42, 4200, public, repositories=[REPO])
    credentials = f'app_id = 42\ninstallation_id = 4200\nprivate_key_path = "{key_path}"'
    dep = await Deployment(tmp_path, sandbox80, model, repositories=(),
                           credentials=credentials).start()
    await dep.tick()
    (review,) = dep.reviews()
    assert review.user == BOT and review.state == "COMMENTED"
    assert sandbox80.state.comments_of_review(review.id), "the MCP reads used the App token"
    assert sandbox80.state.reviews_of(OTHER, 1) == [], "not in the installation: not reviewed"
    assert app.token_requests >= 1

    push_fix(sandbox80)
    sandbox80.state.add_issue_comment(REPO, 1, "maintainer", "/bot anything left?")
    await dep.tick()
    await dep.tick()
    assert len(dep.reviews()) == 2 and dep.reviews()[1].user == BOT
    replies = [c for c in sandbox80.state.issue_comments_of(REPO, 1)
               if c.user == BOT and "reply-to:" in c.body]
    assert len(replies) == 1

    # The App is added to the other repository: the next tick follows, without a restart.
    sandbox80.set_installation_repositories(BOT, [REPO, OTHER])
    await dep.tick()
    assert [r.user for r in sandbox80.state.reviews_of(OTHER, 1)] == [BOT]
    await dep.stop()


async def test_dsh_run_once_in_app_mode_from_the_cli(tmp_path, sandbox80, model):
    """The same through `dsh run --once` and `status`: no repositories configured, the App's
    installation decides, and status says so."""
    import json

    from tests.cli_kit import dsh

    build_shop(sandbox80)
    key_path, public = _app_key(tmp_path)
    sandbox80.register_app(43, 4300, public, repositories=[REPO])
    credentials = f'app_id = 43\ninstallation_id = 4300\nprivate_key_path = "{key_path}"'
    config = Deployment(tmp_path, sandbox80, model, repositories=(),
                        credentials=credentials).write_config()
    proc = dsh("--config", str(config), "run", "--once", cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert [r.user for r in sandbox80.state.reviews_of(REPO, 1)] == [BOT]
    status = dsh("--config", str(config), "github-reviewer", "status", cwd=tmp_path)
    assert "every repository of its App installation" in status.stdout, status.stdout
    (account,) = json.loads(dsh("--config", str(config), "github-reviewer", "status", "--json",
                                cwd=tmp_path).stdout)
    assert account["mode"] == "app" and account["config"]["differs"] == []
