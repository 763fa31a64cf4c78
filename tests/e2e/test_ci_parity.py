"""CI has what the daemon has: both front ends review one PR through the one
procedure, so the model is given the same trusted instructions (repository config, guideline
files) and the same prepared diff (``exclude`` applied, path instructions), and CI keeps the
PR's one summary comment and resolves the threads a push fixed.

Real `dsh github-reviewer ci` processes (action.yml in the Actions simulator), the real daemon
(Deployment), github-mcp-server, the sandbox GitHub and one scripted model server that plays
the review team for CI and the single reviewer for the daemon."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_github_reviewer.core.triggers import SUMMARY_MARKER
from dsh_github_reviewer.testing.actions import ActionsSimulator, pull_request_event
from dsh_github_reviewer.testing.scenario import BOT_TOKEN, REPO, build_shop, push_fix
from dsh_github_reviewer.testing.team_model import TeamModel
from dsh_harness.testing import ScriptedModelServer

from .conftest import Deployment

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
BOT = "shop-review-bot"
CONFIG = '''
instructions = "Money is always Decimal."
exclude = ["shop/cart.py"]

[[path_instructions]]
path = "shop/orders.py"
instructions = "Every query must be parameterized."
'''


def base_commit(sb, files: dict) -> None:
    st = sb.state
    st.commit(REPO, "main", files)
    st.pull(REPO, 1).base_sha = st.repo(REPO).branches["main"]


def first_request(served, system_start: str):
    return next(s.request["messages"] for s in served if s.fault is None
                and s.request["messages"][0]["content"].startswith(system_start))


def trusted(messages) -> str:
    return messages[0]["content"].split("## Trusted review instructions", 1)[1]


def section(text: str, tag: str) -> str:
    return text.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0]


def summaries(st) -> list:
    return [c for c in st.issue_comments_of(REPO, 1) if c.user == BOT
            and SUMMARY_MARKER in c.body]


@pytest.fixture
def team_model():
    with ScriptedModelServer(policy=TeamModel()) as server:
        yield server


async def test_ci_and_the_daemon_give_the_model_the_same_and_ci_keeps_the_summary(
        tmp_path, sandbox80, team_model):
    sb, st = sandbox80, sandbox80.state
    build_shop(sb)
    base_commit(sb, {".github/dsh-review.toml": CONFIG,
                     "AGENTS.md": "Run `make test` before pushing.\n"})
    sim = ActionsSimulator(tmp_path / "ci", ROOT, REPO, token=BOT_TOKEN, api_url=sb.api_url,
                           server_url=sb.web_url)
    run = sim.run("pull_request", pull_request_event(sb, REPO, 1, "opened"),
                  inputs={"model-api-key": "k", "model-base-url": team_model.base_url,
                          "fail-on": "never"},
                  env={"DSH_MODEL_RETRY_BASE_S": "0.01"})
    assert run.exit_code == 0, run.output
    ci_served = list(team_model.served)
    persona = first_request(ci_served, "You are the security reviewer")
    coordinator = first_request(ci_served, "You are the coordinator")

    # The daemon (another account, so it reviews the PR as new) on the same PR.
    dep = await Deployment(tmp_path / "daemon", sb, team_model).start()
    try:
        await dep.tick()
        assert (await dep.entry()).status == "reviewed"
    finally:
        await dep.stop()
    single = first_request(team_model.served[len(ci_served):], "You are dsh-github-reviewer")

    # The same trusted instructions: the base's file, its config's instructions, AGENTS.md.
    assert trusted(persona) == trusted(coordinator) == trusted(single)
    assert "Money is always Decimal." in trusted(single)
    assert "Run `make test`" in trusted(single)
    # The same prepared diff, with the config's exclude applied, and the same path rules.
    for user in (persona[-1]["content"], coordinator[-1]["content"]):
        assert section(user, "diff") == section(single[-1]["content"], "diff")
        assert section(user, "path_instructions") == section(
            single[-1]["content"], "path_instructions")
    assert "+++ b/shop/orders.py" in section(single[-1]["content"], "diff")
    assert "+++ b/shop/cart.py" not in section(single[-1]["content"], "diff"), "excluded"
    assert "Every query must be parameterized." in single[-1]["content"]
    assert coordinator[-1]["content"].startswith("Flow: review (team coordinator).")

    # CI keeps one summary comment...
    (summary,) = [c for c in summaries(st)]
    first_body = summary.body   # the sandbox edits the comment object in place
    # ...and, after a push that fixes the SQL injection, resolves its thread (the bot's open
    # threads include the daemon's, by the same login; one per place is listed) and updates it.
    sql = {c.id for c in st.review_comments_of(REPO, 1)
           if c.user == BOT and c.path == "shop/orders.py" and c.line == 10
           and c.in_reply_to is None}
    assert sql and not st.resolved_threads
    head = push_fix(sb)
    run2 = sim.run("pull_request", pull_request_event(sb, REPO, 1, "synchronize"),
                   inputs={"model-api-key": "k", "model-base-url": team_model.base_url,
                           "fail-on": "never"},
                   env={"DSH_MODEL_RETRY_BASE_S": "0.01"})
    assert run2.exit_code == 0, run2.output
    resolved = {i for i, who in st.resolved_threads.items() if who == BOT}
    assert resolved and resolved <= sql, run2.output
    assert all(any(c.in_reply_to == i and c.user == BOT and c.body.startswith(f"Fixed in {head}")
                   for c in st.review_comments_of(REPO, 1)) for i in resolved)
    (updated,) = summaries(st)
    assert updated.id == summary.id and updated.body != first_body
    assert head[:12] in updated.body and "fixed" in updated.body


def test_ci_gives_the_drafted_findings_the_second_look_the_base_asks_for(tmp_path, sandbox80,
                                                                       team_model):
    """``verify = true`` in the base's repository config: as in the daemon, a verifier session
    checks the coordinator's draft before the post. CI keeps no store, so the finding it drops
    is listed in the review body (collapsed), not promised to the summary comment; the
    verifier's session is saved with the team's for the next run's cache."""
    sb, st = sandbox80, sandbox80.state
    build_shop(sb)
    base_commit(sb, {".github/dsh-review.toml": "verify = true\n"})
    sim = ActionsSimulator(tmp_path / "ci", ROOT, REPO, token=BOT_TOKEN, api_url=sb.api_url,
                           server_url=sb.web_url)
    run = sim.run("pull_request", pull_request_event(sb, REPO, 1, "opened"),
                  inputs={"model-api-key": "k", "model-base-url": team_model.base_url,
                          "fail-on": "never"},
                  env={"DSH_MODEL_RETRY_BASE_S": "0.01"})
    assert run.exit_code == 0, run.output
    (review,) = [r for r in st.reviews_of(REPO, 1) if r.user == BOT]
    bodies = [c.body for c in st.comments_of_review(review.id)]
    assert bodies and not any("Off-by-one" in b for b in bodies), bodies
    assert any("SQL built" in b for b in bodies), "kept findings are posted"
    listed = review.body.split("<details><summary>Second look: ", 1)[1]
    assert "shop/cart.py" in listed and "Off-by-one" in listed
    assert "listed with the reason in the summary comment" not in review.body
    assert any(s.request["messages"][-1]["content"].startswith("Flow: verify")
               for s in team_model.served if s.fault is None)
    saved = sim.cache.entries[run.saved_key].directory
    assert any("persona_verifier" in p.name or "verifier" in p.name
               for p in saved.glob("*.jsonl")), sorted(p.name for p in saved.glob("*"))
