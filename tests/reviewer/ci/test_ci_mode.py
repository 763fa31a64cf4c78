"""CI mode without the network: the Actions environment and event, the cache stand-in's
GitHub semantics, and action.yml plus the documented workflow as Actions would read them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from dsh_github_reviewer.ci.event import CiEnv, CiError, load_payload, task_for
from dsh_github_reviewer.testing.actions import ActionsCache, cache_version, evaluate, interpolate

ROOT = Path(__file__).resolve().parents[3]
ALLOWED = ["OWNER", "MEMBER", "COLLABORATOR"]
KEY = ("dsh-review-${{ github.repository }}-${{ github.event.pull_request.number || "
       "github.event.issue.number }}-${{ github.run_id }}-${{ github.run_attempt }}")
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
                         (comment_payload("looks good"), "not a /review"),
                         (comment_payload("/bot pause"), "/bot pause is a command of the daemon"),
                         (comment_payload("/bot forget 2"), "/bot forget is a command")]:
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
    ctx = {"github": {"repository": "acme/shop", "run_id": "42", "run_attempt": "2",
                      "event": {"issue": {"number": 5}}}}
    assert interpolate(KEY, ctx) == "dsh-review-acme/shop-5-42-2"
    ctx["github"]["event"]["pull_request"] = {"number": 3}
    assert interpolate(RESTORE, ctx) == "dsh-review-acme/shop-3-"
    assert evaluate("steps.x.outputs.k != ''", {"steps": {"x": {"outputs": {"k": "a"}}}})
    saved = {"steps": {"c": {"outputs": {"save": "true"}}}}
    assert evaluate("always() && steps.c.outputs.save == 'true'", saved)
    assert not evaluate("always() && steps.c.outputs.save == 'true'", {"steps": {}})


def test_the_sessions_are_saved_only_when_they_exist_and_changed(tmp_path, monkeypatch):
    from dsh_github_reviewer.ci import fingerprint as fp

    sessions, mark, out = tmp_path / "sessions", tmp_path / "mark", tmp_path / "out"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    assert fp.main(["record", str(sessions), str(mark)]) == 0  # nothing restored
    assert fp.main(["changed", str(sessions), str(mark)]) == 0
    sessions.mkdir()
    assert fp.main(["changed", str(sessions), str(mark)]) == 0  # an empty directory
    (sessions / "a.jsonl").write_text("one\n")
    assert fp.main(["changed", str(sessions), str(mark)]) == 0  # new: worth saving
    assert fp.main(["record", str(sessions), str(mark)]) == 0
    assert fp.main(["changed", str(sessions), str(mark)]) == 0  # as restored
    (sessions / "a.jsonl").write_text("one\ntwo\n")
    assert fp.main(["changed", str(sessions), str(mark)]) == 0
    assert out.read_text().split() == ["save=false", "save=false", "save=true", "save=false",
                                       "save=true"]
    # A file renamed with the same bytes is a change; paths and bytes cannot run together.
    assert fp.fingerprint(sessions) != fp.fingerprint(tmp_path) != ""
    assert fp.main(["bogus"]) == 2


def test_action_yml_restores_runs_and_saves_the_sessions():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    uses = [s.get("uses", "run") for s in steps]
    assert uses == ["actions/setup-python@v5", "run", "run", "actions/cache/restore@v4", "run",
                    "run", "run", "actions/cache/save@v4", "run"]
    install, clear, restore, record, review, changed, save, remove = steps[1:]
    # Saved only when the sessions exist and changed since the restore.
    assert "fingerprint record .dsh-review/sessions" in record["run"]
    assert "fingerprint changed .dsh-review/sessions" in changed["run"]
    assert changed["if"] == "always()" and changed["id"] == "changed"
    assert 'pip install --quiet "$GITHUB_ACTION_PATH"' in install["run"]
    # The key carries the run attempt: a re-run's save is a new entry, not a skipped one.
    assert restore["with"]["key"] == KEY and save["with"]["key"] == KEY
    assert [k.strip() for k in restore["with"]["restore-keys"].splitlines() if k.strip()] == \
        [RESTORE]
    # Relative to the workspace and free of expressions: the cache version (a hash of the path
    # as written) is the same on every runner, whatever its absolute directories.
    assert restore["with"]["path"] == save["with"]["path"] == ".dsh-review/sessions"
    assert "${{" not in restore["with"]["path"]
    assert review["env"]["DSH_HOME"] == "${{ github.workspace }}/.dsh-review"
    assert clear["run"] == remove["run"] == 'rm -rf "$GITHUB_WORKSPACE/.dsh-review"'
    assert remove["if"] == "always()"
    assert review["run"].rstrip().endswith('github-reviewer ci --fail-on "$DSH_FAIL_ON"')
    assert review["env"]["GITHUB_TOKEN"] == "${{ inputs.github-token }}"
    # The key input is named for any provider; the DeepSeek-only name stays as an alias.
    assert review["env"]["DSH_MODEL_API_KEY"] == \
        "${{ inputs.model-api-key || inputs.deepseek-api-key }}"
    assert {"model-api-key", "deepseek-api-key"} <= set(action["inputs"])
    assert review["env"]["DSH_RESTORED_KEY"] == \
        "${{ steps.restore.outputs.cache-matched-key }}"
    for env, name in [("DSH_FAIL_ON", "fail-on"), ("DSH_EXCLUDE", "exclude"),
                      ("DSH_MAX_DIFF_KB", "max-diff-kb"),
                      ("DSH_MAX_PROMPT_TOKENS", "max-prompt-tokens")]:
        assert review["env"][env] == f"${{{{ inputs.{name} }}}}" and name in action["inputs"]
    assert action["inputs"]["fail-on"]["default"] == "cannot-merge"
    assert save["if"] == "always() && steps.changed.outputs.save == 'true'", \
        "memory of the completed personas survives a failed check"
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert (ROOT / "dsh_github_reviewer/ci/dsh-ci.toml").is_file()


def test_the_cache_version_depends_on_the_path_as_written(tmp_path):
    cache = ActionsCache(tmp_path / "cache")
    cache.root.mkdir()
    src = tmp_path / "runner-a" / ".dsh-review/sessions"
    src.mkdir(parents=True)
    (src / "s.jsonl").write_text("x")
    assert cache.save(src, "k-1", cache_version(".dsh-review/sessions"))
    out = tmp_path / "runner-b" / ".dsh-review/sessions"
    assert cache.restore(out, "k-2", ["k-"], cache_version(".dsh-review/sessions")) == "k-1"
    # Two absolute runner paths are two versions: the entry is invisible to the other runner.
    assert cache.restore(out, "k-2", ["k-"], cache_version(str(out))) is None


def test_the_bundled_config_takes_the_action_inputs(tmp_path):
    from dsh_github_reviewer.config import ReviewerConfig as PluginSettings
    from dsh_harness import load_config

    env = {"DSH_HOME": str(tmp_path), "DSH_EXCLUDE": "docs/**, *.snap  vendor/*",
           "DSH_MAX_DIFF_KB": "250", "DSH_MAX_PROMPT_TOKENS": "64000"}
    loaded = load_config(ROOT / "dsh_github_reviewer/ci/dsh-ci.toml", env=env)
    assert loaded.config.compaction.max_prompt_tokens == 64000
    plugin = PluginSettings.model_validate(
        loaded.config.plugins["github-reviewer"].settings)
    review = plugin.accounts[0].review
    assert review.exclude == ["docs/**", "*.snap", "vendor/*"] and review.max_diff_kb == 250
    defaults = load_config(ROOT / "dsh_github_reviewer/ci/dsh-ci.toml",
                           env={"DSH_HOME": str(tmp_path)})
    review = PluginSettings.model_validate(
        defaults.config.plugins["github-reviewer"].settings).accounts[0].review
    assert review.exclude == [] and review.max_diff_kb == 100
    assert defaults.config.compaction.max_prompt_tokens == 128000


def test_dependabot_prs_are_marked(tmp_path):
    payload = pr_payload()
    payload["pull_request"]["user"] = {"login": "dependabot[bot]", "type": "Bot"}
    assert task(tmp_path, "pull_request", payload).dependabot
    assert not task(tmp_path, "pull_request", pr_payload()).dependabot


def test_the_exit_code_follows_the_verdict():
    from dsh_github_reviewer.ci.command import exit_for

    assert exit_for("Verdict: can merge", "cannot-merge") == 0
    assert exit_for("**Verdict: Can merge.**", "cannot-merge") == 0
    for line in ("Verdict: cannot merge: 2 finding(s) to fix",
                 "Verdict: cannot merge: security did not complete", None,
                 "Verdict: can merge after the fix"):
        assert exit_for(line, "cannot-merge") == 1, line
        assert exit_for(line, "never") == 0, line


def test_fail_on_help_says_never_also_passes_an_incomplete_review(capsys):
    """It must be said wherever the input is documented; `ci --help` said only
    "never: exit 0 whatever the verdict"."""

    from tests.test_docs import _cli_parsers

    (parser,) = [p for path, _, p in _cli_parsers() if path == ("github-reviewer", "ci")]
    text = " ".join(parser.format_help().split())
    assert "an incomplete (failed-closed) review too" in text
    assert "exit 1 when no review could be posted" in text


def test_the_step_summary_is_one_escaped_table(tmp_path):
    from dsh_github_reviewer.ci.summary import StepSummary
    from dsh_harness import Usage

    path = tmp_path / "summary.md"
    path.write_text("earlier step\n")
    s = StepSummary("dsh-review: acme/shop#3").add("Verdict", "cannot merge: a | b <img>\nx")
    s.usage(Usage(uncached_input=250, cache_read=750, output=10, cost_usd=0.0012))
    s.write(path)
    text = path.read_text()
    assert text.startswith("earlier step\n### dsh-review: acme/shop#3\n")
    assert "| Verdict | cannot merge: a \\| b &lt;img&gt; x |" in text
    assert "| Model cost | $0.0012 |" in text and "| Prefix-cache hit | 75.0 % |" in text
    StepSummary("x").write(None)  # outside Actions: nothing to write, no error


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
    assert "github.event.pull_request.number" in job["concurrency"]["group"], \
        "one review of a PR at a time: runs of one head do not race each other's post"
    step = next(s for s in job["steps"] if "dsh-github-reviewer" in s.get("uses", ""))
    assert step["with"]["model-api-key"] == "${{ secrets.DEEPSEEK_API_KEY }}"
