"""CI mode without the network: the Actions environment and event, the cache stand-in's
GitHub semantics, and action.yml plus the documented workflow as Actions would read them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from dsh_github_reviewer.ci.event import CiEnv, CiError, load_payload, task_for
from dsh_github_reviewer.testing.actions import ActionsCache, evaluate, interpolate

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = ["OWNER", "MEMBER", "COLLABORATOR"]
KEY = ("dsh-review-${{ github.repository }}-${{ github.event.pull_request.number || "
       "github.event.issue.number }}-${{ github.run_id }}")
RESTORE = ("dsh-review-${{ github.repository }}-${{ github.event.pull_request.number || "
           "github.event.issue.number }}-")


def env_for(tmp_path: Path, name: str, payload: object) -> CiEnv:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload) if not isinstance(payload, str) else payload)
    return CiEnv.from_env({"GITHUB_EVENT_NAME": name, "GITHUB_EVENT_PATH": str(path),
                           "GITHUB_REPOSITORY": "acme/shop", "GITHUB_RUN_ID": "7"})


def pr_payload(action="synchronize", head="acme/shop", draft=False):
    return {"action": action, "pull_request": {
        "number": 3, "draft": draft, "state": "open",
        "head": {"sha": "b" * 40, "repo": {"full_name": head}},
        "base": {"sha": "a" * 40, "repo": {"full_name": "acme/shop"}}}}


def comment_payload(body, association="MEMBER", user_type="User", on_pr=True):
    issue = {"number": 3, **({"pull_request": {"url": "x"}} if on_pr else {})}
    return {"action": "created", "issue": issue, "comment": {
        "id": 99, "body": body, "author_association": association,
        "user": {"login": "maint", "type": user_type}}}


def task(tmp_path, name, payload):
    env = env_for(tmp_path, name, payload)
    return task_for(env, load_payload(env.event_path), ALLOWED)


def test_events_become_tasks(tmp_path):
    t = task(tmp_path, "pull_request", pr_payload())
    assert (t.kind, t.number, t.fork) == ("review", 3, False)
    assert task(tmp_path, "pull_request", pr_payload(head="mallory/shop")).fork
    assert task(tmp_path, "pull_request", pr_payload("closed")).kind == "skip"
    assert "draft" in task(tmp_path, "pull_request", pr_payload(draft=True)).reason
    t = task(tmp_path, "issue_comment", comment_payload("/review please"))
    assert (t.kind, t.comment_id, t.requested_by) == ("review", 99, "maint")
    t = task(tmp_path, "issue_comment", comment_payload("/bot why?"))
    assert (t.kind, t.message) == ("chat", "why?")
    for payload, why in [(comment_payload("/review", "NONE"), "may not run commands"),
                         (comment_payload("/review", user_type="Bot"), "bots"),
                         (comment_payload("/review", on_pr=False), "not a pull request"),
                         (comment_payload("looks good"), "not a /review")]:
        t = task(tmp_path, "issue_comment", payload)
        assert t.kind == "skip" and why in t.reason, t.reason
    assert task(tmp_path, "push", {}).kind == "skip"


def test_a_bad_environment_or_event_is_a_clear_error(tmp_path):
    with pytest.raises(CiError, match=r"GITHUB_EVENT_PATH, GITHUB_REPOSITORY.* are not set"):
        CiEnv.from_env({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_RUN_ID": "1"})
    with pytest.raises(CiError, match="is not JSON"):
        load_payload(env_for(tmp_path, "pull_request", "{nope").event_path)
    with pytest.raises(CiError, match="cannot read"):
        load_payload(tmp_path / "missing.json")
    env = env_for(tmp_path, "pull_request", {"action": "opened"})
    with pytest.raises(CiError, match="without a pull_request"):
        task_for(env, load_payload(env.event_path), ALLOWED)
    env = env_for(tmp_path, "pull_request", {"pull_request": {"number": "x"}})
    with pytest.raises(CiError, match=r"pull_request\.number"):
        load_payload(env.event_path)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(CiError, match="is not UTF-8 text"):
        load_payload(binary)
    with pytest.raises(CiError, match="'acme' is not <owner>/<repo>"):
        CiEnv.from_env({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": "e.json",
                        "GITHUB_REPOSITORY": "acme", "GITHUB_RUN_ID": "1"})
    with pytest.raises(CiError, match="GITHUB_RUN_ATTEMPT='x' is not a number"):
        CiEnv.from_env({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": "e.json",
                        "GITHUB_REPOSITORY": "a/b", "GITHUB_RUN_ID": "1",
                        "GITHUB_RUN_ATTEMPT": "x"})


def test_cache_stand_in_has_githubs_key_semantics(tmp_path):
    cache = ActionsCache(tmp_path / "cache")
    cache.root.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    for key, text in [("p-1-100", "one"), ("p-1-200", "two"), ("p-10-300", "ten")]:
        (src / "f").write_text(text)
        assert cache.save(src, key)
    (src / "f").write_text("overwrite?")
    assert not cache.save(src, "p-1-100"), "an existing key is never overwritten"
    out = tmp_path / "out"
    assert cache.restore(out, "p-1-100", ["p-1-"]) == "p-1-100"            # exact key first
    assert (out / "f").read_text() == "one"
    assert cache.restore(out, "p-1-999", ["p-1-"]) == "p-1-200"            # newest by prefix
    assert (out / "f").read_text() == "two"
    assert cache.restore(out, "p-1-999", ["q-", "p-10-", "p-1-"]) == "p-10-300"  # key order
    assert cache.restore(out, "p-2-1", ["p-2-"]) is None
    assert not cache.save(tmp_path / "absent", "p-3-1")


def test_expressions_of_action_yml():
    ctx = {"github": {"repository": "acme/shop", "run_id": "42",
                      "event": {"issue": {"number": 5}}}}
    assert interpolate(KEY, ctx) == "dsh-review-acme/shop-5-42"
    ctx["github"]["event"]["pull_request"] = {"number": 3}
    assert interpolate(RESTORE, ctx) == "dsh-review-acme/shop-3-"
    assert evaluate("steps.x.outputs.k != ''", {"steps": {"x": {"outputs": {"k": "a"}}}})


def test_action_yml_restores_runs_and_saves_the_sessions():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    uses = [s.get("uses", "run") for s in steps]
    assert uses == ["actions/setup-python@v5", "run", "actions/cache/restore@v4", "run",
                    "actions/cache/save@v4"]
    install, restore, review, save = steps[1], steps[2], steps[3], steps[4]
    assert 'pip install --quiet "$GITHUB_ACTION_PATH"' in install["run"]
    assert restore["with"]["key"] == KEY and save["with"]["key"] == KEY
    assert [k.strip() for k in restore["with"]["restore-keys"].splitlines() if k.strip()] == \
        [RESTORE]
    assert restore["with"]["path"] == save["with"]["path"] == \
        "${{ runner.temp }}/dsh-review/sessions"
    assert review["env"]["DSH_HOME"] == "${{ runner.temp }}/dsh-review"
    assert review["run"].rstrip().endswith("github-reviewer ci")
    assert review["env"]["GITHUB_TOKEN"] == "${{ inputs.github-token }}"
    # The key input is named for any provider; the DeepSeek-only name stays as an alias.
    assert review["env"]["DSH_MODEL_API_KEY"] == \
        "${{ inputs.model-api-key || inputs.deepseek-api-key }}"
    assert {"model-api-key", "deepseek-api-key"} <= set(action["inputs"])
    assert save["if"] == "always()", "memory of the completed personas survives a failed check"
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert (ROOT / "dsh_github_reviewer/ci/dsh-ci.toml").is_file()


@pytest.mark.parametrize("doc", ["docs/ci.en.md", "docs/ci.md"])
def test_documented_workflow_has_the_permissions_it_needs(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    (block,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    wf = yaml.safe_load(block)
    triggers = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as True
    assert set(triggers) == {"pull_request", "issue_comment"}
    assert set(triggers["pull_request"]["types"]) >= {"opened", "synchronize", "reopened"}
    assert wf["permissions"] == {"contents": "read", "pull-requests": "write",
                                 "issues": "write"}
    (job,) = wf["jobs"].values()
    assert "github.event.issue.pull_request" in job["if"]
    assert job["concurrency"]["cancel-in-progress"] is False
    step = next(s for s in job["steps"] if "dsh-github-reviewer" in s.get("uses", ""))
    assert step["with"]["model-api-key"] == "${{ secrets.DEEPSEEK_API_KEY }}"
