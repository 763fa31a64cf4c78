"""Every rule of the reviewer's config block, through the real dsh.toml path."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from dsh_github_reviewer.config import AccountConfig, ReviewerConfig
from dsh_harness import ConfigError, Harness, load_config, parse_config

PAT = "ghp_" + "a" * 36


def check(toml: str) -> Harness:
    return Harness(parse_config(toml, "dsh.toml", Path(".")))


def errors(data: dict) -> str:
    with pytest.raises(ValidationError) as exc:
        ReviewerConfig.model_validate(data)
    return str(exc.value)


def account(**kw) -> dict:
    return {"personal_access_token": PAT, **kw}


def test_defaults():
    a = AccountConfig.model_validate(account())
    assert a.name == "default" and a.api_url == "https://api.github.com"
    assert a.web_url == "https://github.com" and a.poll_interval_s == 120
    assert a.repositories == [] and a.ignore_authors == []
    r = a.review
    assert (r.max_tool_calls, r.tool_timeout_s, r.tool_result_limit, r.turn_timeout_s) == (
        30, 30, 60_000, 900)
    assert r.default_instructions == "" and r.models == [] and r.max_reviews_per_pr == 0
    assert r.require_instructions is False, "works out of the box: the built-in guidance"
    assert r.command_author_associations == ["OWNER", "MEMBER", "COLLABORATOR"]
    assert a.mcp.command is None and a.mcp.args == ["stdio", "--toolsets=pull_requests,repos"]


def test_error_names_exact_field_path_through_dsh_toml():
    toml = f'''
[plugins.github-reviewer]
[[plugins.github-reviewer.accounts]]
personal_access_token = "{PAT}"
repositories = ["a/b", " c/d ", "not a repo"]
'''
    with pytest.raises(ConfigError) as exc:
        check(toml)
    assert "dsh.toml: plugins.github-reviewer.accounts[0].repositories[2]: must be owner/repo" \
        in str(exc.value)


def test_repositories_trimmed_and_deduped_case_insensitively():
    a = AccountConfig.model_validate(account(repositories=[" Octo/App ", "octo/app", "o/r.js"]))
    assert a.repositories == ["Octo/App", "o/r.js"]


@pytest.mark.parametrize("bad", ["noslash", "a/b/c", "/b", "a/", "a b/c", "a/b.git"])
def test_bad_repositories(bad):
    assert "must be owner/repo" in errors({"accounts": [account(repositories=[bad])]})


def test_account_names_sanitized_and_collisions_rejected():
    a = AccountConfig.model_validate(account(name="team a/b!!c"))
    assert a.key == "team_a_b_c"
    msg = errors({"accounts": [account(name="x y"), account(name="x@y")]})
    assert "collides" in msg and "'x_y'" in msg


def test_pat_and_app_modes():
    assert AccountConfig.model_validate(account()).app_mode is False
    assert AccountConfig.model_validate(
        {"personal_access_token": "github_pat_" + "b" * 40}).personal_access_token
    assert "classic (ghp_...)" in errors({"accounts": [{"personal_access_token": "abc"}]})
    app = AccountConfig.model_validate({"app_id": 1, "installation_id": 2,
                                        "private_key_path": "k.pem"})
    assert app.app_mode and app.has_credentials
    msg = errors({"accounts": [{"app_id": 1, "installation_id": 2}]})
    assert "missing: private_key_path" in msg
    msg = errors({"accounts": [account(app_id=1, installation_id=2, private_key_path="k")]})
    assert "mutually exclusive" in msg


def test_empty_token_from_unset_env_means_no_credentials():
    a = AccountConfig.model_validate({"personal_access_token": ""})
    assert a.personal_access_token is None and not a.has_credentials


def test_secret_never_echoed_in_errors():
    with pytest.raises(ConfigError) as exc:
        check('[plugins.github-reviewer]\n[[plugins.github-reviewer.accounts]]\n'
              'personal_access_token = "sk-secret-value-123"\n')
    assert "accounts[0].personal_access_token: must be a classic" in str(exc.value)
    assert "sk-secret-value-123" not in str(exc.value)
    assert PAT not in repr(AccountConfig.model_validate(account()))


def test_urls():
    a = AccountConfig.model_validate(account(api_url="https://ghe.example.com/api/v3/",
                                             web_url=""))
    assert a.api_url == "https://ghe.example.com/api/v3" and a.web_url == ""
    assert "http(s) URL" in errors({"accounts": [account(api_url="ftp://x")]})
    assert "http(s) URL" in errors({"accounts": [account(web_url="github.com")]})


def test_numeric_limits():
    assert "poll_interval_s" in errors({"accounts": [account(poll_interval_s=0.5)]})
    assert "max_tool_calls" in errors({"accounts": [account(review={"max_tool_calls": 0})]})
    assert "max_reviews_per_pr" in errors(
        {"accounts": [account(review={"max_reviews_per_pr": -1})]})


def test_associations_upper_cased_star_and_empty():
    r = AccountConfig.model_validate(
        account(review={"command_author_associations": ["member", " owner", "*"]})).review
    assert r.command_author_associations == ["MEMBER", "OWNER", "*"]
    empty = AccountConfig.model_validate(account(review={"command_author_associations": []}))
    assert empty.review.command_author_associations == []
    assert "author associations" in errors(
        {"accounts": [account(review={"command_author_associations": ["not valid!"]})]})


def test_ignore_authors_and_models():
    a = AccountConfig.model_validate(account(
        ignore_authors=["dependabot[bot]", "*[bot]"],
        review={"models": [{"provider": "deepseek", "model": "deepseek-v4-pro"}]}))
    assert a.review.models[0].ref == "deepseek/deepseek-v4-pro"
    assert "GitHub login" in errors({"accounts": [account(ignore_authors=["bad login!"])]})


def test_mcp_env_cannot_override_token():
    assert "set by the reviewer" in errors(
        {"accounts": [account(mcp={"env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "x"}})]})


def test_unknown_keys_rejected():
    assert "Extra inputs are not permitted" in errors({"accounts": [account(repos=["a/b"])]})


def test_repositories_from_one_environment_string():
    a = AccountConfig.model_validate(account(repositories="octo/a, octo/b  octo/a"))
    assert a.repositories == ["octo/a", "octo/b"]
    assert AccountConfig.model_validate(account(repositories="")).repositories == []
    assert "repositories[1]: must be owner/repo" in check_error(
        'repositories = "octo/a, nope"')


def check_error(line: str) -> str:
    with pytest.raises(ConfigError) as exc:
        check(f'[plugins.github-reviewer]\n[[plugins.github-reviewer.accounts]]\n'
              f'personal_access_token = "{PAT}"\n{line}\n')
    return str(exc.value)


def test_example_config_block_is_a_valid_reviewer_config():
    root = Path(__file__).resolve().parents[3]
    env = {"GITHUB_TOKEN": PAT, "GITHUB_REPOSITORIES": "octo/a, octo/b"}
    loaded = load_config(root / "dsh.example.toml", env=env)
    cfg = ReviewerConfig.model_validate(loaded.config.plugins["github-reviewer"].settings)
    (acct,) = cfg.accounts
    assert acct.name == "default" and acct.repositories == ["octo/a", "octo/b"]
    assert acct.personal_access_token is not None
    assert acct.personal_access_token.get_secret_value() == PAT


def test_every_boolean_config_key_accepts_only_true_or_false():
    """Pydantic's bool takes "yes", "on", 1; every boolean of the deployment
    config and of the reviewer's block is a ConfigBool, which refuses them."""
    from pydantic import BaseModel

    from dsh_github_reviewer.config import ReviewerConfig
    from dsh_harness import DeploymentConfig
    from dsh_harness.config import PluginInstanceConfig, _strict_bool

    def bools(model: type[BaseModel], path: str, seen: set) -> list[tuple[str, bool]]:
        if model in seen:
            return []
        seen.add(model)
        found = []
        for name, field in model.model_fields.items():
            where = f"{path}.{name}"
            if field.annotation is bool:
                strict = any(getattr(m, "func", None) is _strict_bool for m in field.metadata)
                found.append((where, strict))
            for arg in (field.annotation, *getattr(field.annotation, "__args__", ())):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    found += bools(arg, where, seen)
        return found

    found = [*bools(DeploymentConfig, "dsh", set()), *bools(PluginInstanceConfig, "plugin", set()),
             *bools(ReviewerConfig, "reviewer", set())]
    assert len(found) >= 5, found
    assert [where for where, strict in found if not strict] == []
