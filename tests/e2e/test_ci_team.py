"""CI mode end to end: action.yml run by the Actions simulator (fresh runner per job, the cache
stand-in), the real `dsh github-reviewer ci` process, the real github-mcp-server, the sandbox
GitHub and the scripted review team on the scripted model server (prefix-cache simulator)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from dsh_github_reviewer.core.session_key import PrKey
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.actions import (
    PATH_VALIDATION_WARNING,
    ActionsSimulator,
    issue_comment_event,
    pull_request_event,
)
from dsh_github_reviewer.testing.scenario import BOT_TOKEN, REPO, build_shop, push_fix
from dsh_github_reviewer.testing.team_model import ScriptedFailure, TeamModel
from dsh_harness.testing import ModelRequest, Reply, ScriptedModelServer, is_compaction_request

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PERSONAS = ("performance", "quality", "security")
KEY_PREFIX = f"dsh-review-{REPO}-1-"


@pytest.fixture
def team_model():
    policy = TeamModel()
    with ScriptedModelServer(policy=policy) as server:
        server.team = policy  # type: ignore[attr-defined]
        yield server


@pytest.fixture
def sim(tmp_path, sandbox80: SandboxGitHub, team_model):
    build_shop(sandbox80)
    simulator = ActionsSimulator(tmp_path, ROOT, REPO, token=BOT_TOKEN,
                                 api_url=sandbox80.api_url, server_url=sandbox80.web_url)
    simulator.sb, simulator.model = sandbox80, team_model  # type: ignore[attr-defined]
    return simulator


def job(sim, event: str, payload, *, inputs=None, run_kw=None, **env):
    given = {"model-api-key": "scripted-model", "model-base-url": sim.model.base_url,
             **(inputs or {})}
    if env.pop("no_secrets", False):
        given["model-api-key"] = ""
    return sim.run(event, payload, inputs=given,
                   env={"DSH_MODEL_RETRY_BASE_S": "0.01", **env}, **(run_kw or {}))


def blocks(run) -> bool:
    """The job failed because the verdict is not "can merge" (fail-on: cannot-merge)."""
    return run.exit_code == 1 and "failing the check: the verdict" in run.output


def who(served) -> str:
    system = served.request["messages"][0]["content"]
    for name in PERSONAS:
        if system.startswith(f"You are the {name} reviewer"):
            return name
    return "coordinator" if system.startswith("You are the coordinator") else "other"


def first_requests(served) -> dict[str, object]:
    out: dict[str, object] = {}
    for s in served:
        if s.fault is None:
            out.setdefault(who(s), s)
    return out


def verdict_line(body: str) -> str:
    (line,) = [line for line in body.splitlines() if line.startswith("Verdict:")]
    return line


def saved(sim, run) -> Path:
    """The sessions directory the run saved to the cache (the runner's copy is removed)."""
    assert run.saved_key is not None, run.output
    return sim.cache.entries[run.saved_key].directory


def reviewed(run) -> bool:
    """A review was posted or found: the check passes or fails only by its verdict."""
    return run.exit_code == 0 or blocks(run)


def sessions_in(sim, run) -> set[str]:
    return {p.name for p in saved(sim, run).glob("*.jsonl")}


def test_two_runs_restore_the_team_and_hit_the_prefix_cache(sim):
    sb, model = sim.sb, sim.model
    run1 = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "opened"))
    assert blocks(run1), run1.output
    assert run1.restored_key is None and run1.saved_key == f"{KEY_PREFIX}{run1.run_id}-1"
    (review1,) = sb.state.reviews_of(REPO, 1)
    assert review1.body.rstrip().splitlines()[-1].startswith("<!--")
    assert "Verdict: cannot merge" in review1.body
    comments = {(c.path, c.line) for c in sb.state.comments_of_review(review1.id)}
    assert {("shop/orders.py", 10), ("shop/orders.py", 15), ("shop/cart.py", 2)} <= comments
    ids = {PrKey("actions", "acme", "shop", 1, p).session_id for p in (*PERSONAS, "coordinator")}
    assert len(sessions_in(sim, run1)) == 4
    assert not (run1.runner_dir / "workspace/.dsh-review").exists(), "nothing left behind"
    served1 = len(model.served)

    push_fix(sb)
    run2 = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "synchronize"))
    assert blocks(run2), run2.output
    assert run2.runner_dir != run1.runner_dir
    assert run2.restored_key == run1.saved_key, "the newest entry of the PR's prefix"
    assert run2.saved_key == f"{KEY_PREFIX}{run2.run_id}-1"
    reviews = sb.state.reviews_of(REPO, 1)
    assert len(reviews) == 2 and reviews[1].commit_id == sb.state.pull(REPO, 1).head_sha

    # Every persona and the coordinator resumed: the first request of run 2 of each session
    # extends that session's last request of run 1 and is mostly a prefix-cache hit.
    last1: dict[str, object] = {}
    for s in model.served[:served1]:
        if s.fault is None:
            last1[who(s)] = s
    firsts2 = first_requests(model.served[served1:])
    assert set(firsts2) == {*PERSONAS, "coordinator"}
    for name, first in firsts2.items():
        before = last1[name].request["messages"]
        assert first.request["messages"][:len(before)] == before, name
        assert first.cache_hit_tokens / first.prompt_tokens > 0.5, name
    # The re-review reports only what is new: verify=False in the new payments module.
    comments2 = {(c.path, c.line) for c in sb.state.comments_of_review(reviews[1].id)}
    assert ("shop/payments.py", 5) in comments2
    assert ("shop/orders.py", 15) not in comments2, "eval() was already reported in run 1"
    # The session files of both runs are the harness's own JSONL logs, named by session id.
    assert sessions_in(sim, run2) == {quote(i, safe="") + ".jsonl" for i in ids}
    # The job's token and the provider key are in no file the job leaves, nor in its log.
    for run in (run1, run2):
        assert BOT_TOKEN not in run.output and "scripted-model" not in run.output
        for path in [*run.runner_dir.rglob("*"), *saved(sim, run).rglob("*")]:
            if path.is_file() and path.name != "event.json":
                data = path.read_bytes()
                assert BOT_TOKEN.encode() not in data and b"scripted-model" not in data, path


def test_a_persona_that_never_answers_fails_the_check_closed(sim):
    sb, model = sim.sb, sim.model
    model.team.fail.add("security")
    run1 = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "opened"),
               DSH_MODEL_MAX_RETRIES="0")
    assert run1.exit_code == 1, run1.output
    assert "security: did not complete" in run1.output
    (review,) = sb.state.reviews_of(REPO, 1)
    assert "**security** reviewer did not complete" in review.body
    assert verdict_line(review.body) == "Verdict: cannot merge: security did not complete"
    assert model.team.calls["security"] == 2, "two attempts on the one candidate model"
    assert run1.saved_key is not None, "the sessions are saved even when the check fails"

    # The next run (the model works again, a push in between) restores the sessions: the
    # security persona's failed attempts stay in its log for people but are never replayed.
    model.team.fail.clear()
    push_fix(sb)
    served1 = len(model.served)
    run2 = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "synchronize"))
    assert blocks(run2), run2.output
    assert run2.restored_key == run1.saved_key
    firsts = first_requests(model.served[served1:])
    security = firsts["security"].request["messages"]
    assert [m["role"] for m in security] == ["system", "user"], "no failed attempt replayed"
    # The failed attempts told the model nothing: it gets the whole prepared diff, including
    # shop/cart.py, which the push did not touch (an interdiff would leave it out).
    assert "+++ b/shop/cart.py" in security[1]["content"]
    assert "+++ b/shop/cart.py" not in firsts["quality"].request["messages"][-1]["content"]
    quality = firsts["quality"].request["messages"]
    assert [m["role"] for m in quality][:2] == ["system", "user"] and len(quality) > 3, \
        "a persona that completed in run 1 resumes its conversation"
    (review2,) = sb.state.reviews_of(REPO, 1)[1:]
    # Security never reported before, so it reports eval() and verify=False now.
    assert verdict_line(review2.body) == "Verdict: cannot merge: 2 finding(s) to fix"
    log = (saved(sim, run2) /
           (quote(PrKey("actions", "acme", "shop", 1, "security").session_id, safe="")
            + ".jsonl")).read_text()
    ends = [json.loads(line) for line in log.splitlines() if '"turn_end"' in line]
    assert [e.get("committed", True) for e in ends] == [False, False, True]


def test_a_rerun_retries_a_failed_closed_review_but_never_repeats_a_complete_one(sim):
    sb, model = sim.sb, sim.model
    model.team.fail.add("security")
    event = pull_request_event(sb, REPO, 1, "opened")
    first = job(sim, "pull_request", event, DSH_MODEL_MAX_RETRIES="0")
    assert first.exit_code == 1 and len(sb.state.reviews_of(REPO, 1)) == 1
    model.team.fail.clear()
    calls = dict(model.team.calls)
    # "Re-run failed jobs": the same run id, the next attempt, the same event file.
    second = sim.run("pull_request", event, run_id=first.run_id, run_attempt=2,
                     inputs={"deepseek-api-key": "k", "model-base-url": model.base_url},
                     env={"DSH_MODEL_RETRY_BASE_S": "0.01"})
    assert blocks(second), second.output
    assert second.restored_key == first.saved_key, "the newest entry of the PR"
    assert second.saved_key == f"{KEY_PREFIX}{first.run_id}-2", "a re-run's save is not skipped"
    reviews = sb.state.reviews_of(REPO, 1)
    assert len(reviews) == 2 and "did not complete" not in verdict_line(reviews[1].body)
    # The personas that completed in attempt 1 keep their reports of this head (asked again,
    # they would call their findings old news), so the new review still carries them.
    assert model.team.calls["quality"] == calls["quality"]
    assert model.team.calls["performance"] == calls["performance"]
    bodies = [c.body for c in sb.state.comments_of_review(reviews[1].id)]
    assert any(b.startswith("**[major]** [quality]") for b in bodies), bodies
    # Each finding keeps the severity its persona reported (SQL injection: critical).
    assert any(b.startswith("**[critical]** [security]") for b in bodies), bodies
    # A third attempt (e.g. the job was killed after the post, before it exited) posts nothing.
    served = len(model.served)
    third = sim.run("pull_request", event, run_id=first.run_id, run_attempt=3,
                    inputs={"deepseek-api-key": "k", "model-base-url": model.base_url})
    assert "already has a complete team review" in third.output, third.output
    assert blocks(third), "the check still follows the verdict of the review on GitHub"
    assert len(sb.state.reviews_of(REPO, 1)) == 2 and len(model.served) == served


def test_one_review_per_head_a_saved_rerun_and_the_step_summary(sim, tmp_path):
    sb, model = sim.sb, sim.model
    event = pull_request_event(sb, REPO, 1, "opened")
    first = job(sim, "pull_request", event)
    assert blocks(first), first.output
    (review,) = sb.state.reviews_of(REPO, 1)
    inline = len(sb.state.comments_of_review(review.id))
    summary = first.summary
    assert f"### dsh-review: {REPO}#1 at {review.commit_id[:12]}" in summary, summary
    assert f"| Verdict | {verdict_line(review.body).removeprefix('Verdict:').strip()} |" \
        in summary
    assert f"| Findings | {inline} inline comments |" in summary and inline >= 3
    assert "| Session memory | none restored: fresh sessions (no earlier entry, or the restore " \
        "failed: see the restore step's log) |" in summary
    assert "| Model cost | $0." in summary and "| Prefix-cache hit |" in summary
    assert "| Check | fails (fail-on: cannot-merge) |" in summary
    served = len(model.served)

    # A second trigger on the same head (here `reopened`, run by a self-hosted runner whose
    # directories are elsewhere): the complete review on GitHub is found, none is posted, and
    # the memory is restored although the runner's absolute paths differ.
    again = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "reopened"),
                run_kw={"runner_root": tmp_path / "elsewhere" / "_work"})
    assert "already has a complete team review" in again.output, again.output
    assert blocks(again), "the check follows the verdict of the review already posted"
    assert again.restored_key == first.saved_key
    assert len(sb.state.reviews_of(REPO, 1)) == 1 and len(model.served) == served
    assert f"| Session memory | restored ({first.saved_key}) |" in again.summary
    assert "| Result | already reviewed" in again.summary
    assert "| Prefix-cache hit | no model call |" in again.summary
    assert again.saved_key is None, "nothing new: no identical entry under a new key"

    # "Re-run all jobs" of the first run: it too finds the complete review and adds nothing
    # to the memory, so it saves no copy (a re-run that does add something saves its own
    # entry under a key with the attempt: see the failed-closed re-run test).
    rerun = job(sim, "pull_request", event, run_kw={"run_id": first.run_id, "run_attempt": 2})
    assert rerun.saved_key is None and "save=false" in rerun.output, rerun.output
    assert len(sb.state.reviews_of(REPO, 1)) == 1


def test_sessions_are_compacted_and_the_cache_entry_stays_bounded(sim):
    """Three reviews of one PR with a small prompt budget: the third run's sessions compact
    (as the daemon's do above the budget), and the entry it saves leaves out what the summary
    replaced, while the model's history stays what it would have been."""
    sb, st = sim.sb, sim.sb.state
    runs = [job(sim, "pull_request", pull_request_event(sb, REPO, 1, "opened"))]
    push_fix(sb)
    runs.append(job(sim, "pull_request", pull_request_event(sb, REPO, 1, "synchronize")))
    cmd = st.add_issue_comment(REPO, 1, "maintainer", "/review")
    runs.append(job(sim, "issue_comment", issue_comment_event(sb, REPO, 1, cmd),
                    inputs={"max-prompt-tokens": "3000"}, DSH_KEEP_RECENT_TURNS="1"))
    for run in runs:
        assert reviewed(run), run.output
    assert len(st.reviews_of(REPO, 1)) == 3
    assert "events of compacted turns left out of the cache" in runs[2].output, runs[2].output
    sid = quote(PrKey("actions", "acme", "shop", 1, "coordinator").session_id, safe="")
    events = [json.loads(line) for line in
              (saved(sim, runs[2]) / f"{sid}.jsonl").read_text().splitlines()[1:]]
    compactions = [e for e in events if e["type"] == "compaction"]
    assert len(compactions) == 1, runs[2].output
    compaction = compactions[0]
    assert compaction["through_turn"] >= 1
    assert min(e["turn"] for e in events if "turn" in e) > compaction["through_turn"]
    size = [(saved(sim, r) / f"{sid}.jsonl").stat().st_size for r in runs]
    assert size[2] < size[1], size
    # The summary request continues the session restored from the cache, so the provider
    # reads what the previous run's process sent from its prefix cache.
    asked = [s for s in sim.model.served if is_compaction_request(s.request)]
    assert asked and all(s.cache_hit_tokens >= 0.8 * s.prompt_tokens for s in asked), \
        [(s.cache_hit_tokens, s.prompt_tokens) for s in asked]


def test_fail_on_never_and_a_dependabot_pr_without_secrets(sim):
    sb, model = sim.sb, sim.model
    run = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "opened"),
              inputs={"fail-on": "never"})
    assert run.exit_code == 0, run.output
    (review,) = sb.state.reviews_of(REPO, 1)
    assert verdict_line(review.body).startswith("Verdict: cannot merge")
    assert "| Check | passes (fail-on: never) |" in run.summary

    # Dependabot's PR runs get no secrets: a neutral skip with one notice, never a red check.
    st = sb.state
    st.commit(REPO, "deps", {"requirements.txt": "requests==2.32.3\n"})
    pr = st.open_pull(REPO, "deps", title="Bump requests", author="dependabot[bot]")
    served = len(model.served)
    dep = job(sim, "pull_request", pull_request_event(sb, REPO, pr.number, "opened"),
              no_secrets=True, run_kw={"actor": "dependabot[bot]"})
    assert dep.exit_code == 0, dep.output
    notices = [line for line in dep.output.splitlines() if line.startswith("::notice")]
    assert len(notices) == 1 and "Dependabot" in notices[0], dep.output
    assert st.reviews_of(REPO, pr.number) == [] and len(model.served) == served
    assert "not reviewed: Dependabot PR runs get no secrets" in dep.summary
    # Nothing to save: the save step is skipped, without actions/cache's path warning.
    assert dep.saved_key is None and PATH_VALIDATION_WARNING not in dep.output
    bad = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "opened"),
              inputs={"fail-on": "sometimes"})
    assert bad.exit_code == 2 and "--fail-on 'sometimes': use one of cannot-merge, never" \
        in bad.output


def test_an_undefined_persona_is_a_configuration_error(sim):
    run = sim.run("pull_request", pull_request_event(sim.sb, REPO, 1, "opened"), inputs={
        "deepseek-api-key": "k", "model-base-url": sim.model.base_url,
        "personas": "quality, ghost"})
    assert run.exit_code == 2, run.output
    assert "dsh-review: persona ghost is not defined: built in are quality, security, " \
        "performance; define others as '## Persona: <name>' sections of acme/shop@main:" \
        ".github/review_instructions.md" in run.output
    assert sim.sb.state.reviews_of(REPO, 1) == [] and sim.model.served == []


def test_fork_pr_without_secrets_posts_nothing(sim):
    sb, model = sim.sb, sim.model
    st = sb.state
    st.fork(REPO, "mallory")
    st.commit("mallory/shop", "evil", {"shop/x.py": "eval(input())\n"})
    pr = st.open_pull(REPO, "evil", title="Fork PR", author="mallory", head_repo="mallory/shop")
    run = job(sim, "pull_request", pull_request_event(sb, REPO, pr.number, "opened"),
              no_secrets=True)
    assert run.exit_code == 0, run.output
    assert "comes from a fork" in run.output
    assert run.saved_key is None and PATH_VALIDATION_WARNING not in run.output
    assert st.reviews_of(REPO, pr.number) == [] and model.served == []


def test_review_command_runs_the_team_once(sim):
    sb, model = sim.sb, sim.model
    st = sb.state
    stranger = st.add_issue_comment(REPO, 1, "stranger", "/review")
    run = job(sim, "issue_comment", issue_comment_event(sb, REPO, 1, stranger))
    assert run.exit_code == 0 and "may not run commands" in run.output
    assert model.served == []
    cmd = st.add_issue_comment(REPO, 1, "maintainer", "/review please")
    run = job(sim, "issue_comment", issue_comment_event(sb, REPO, 1, cmd))
    assert reviewed(run), run.output
    (review,) = st.reviews_of(REPO, 1)
    assert f"trigger:actions:cmd:{cmd.id}" in review.body
    assert run.saved_key is not None

    # /bot is answered by the coordinator from the team's review in its restored session.
    ask = st.add_issue_comment(REPO, 1, "maintainer", "/bot what did the team find?")
    for _ in range(2):  # a re-run of the job answers once
        run = job(sim, "issue_comment", issue_comment_event(sb, REPO, 1, ask))
        assert run.exit_code == 0, run.output
    # (The bot's other comment is the PR's summary, kept in CI as in the daemon.)
    answers = [c for c in st.issue_comments_of(REPO, 1) if c.user == "shop-review-bot"
               and "dsh-github-reviewer:summary" not in c.body]
    assert len(answers) == 1 and f"reply-to:{ask.id}" in answers[0].body
    assert "[security]" in answers[0].body and "shop/orders.py" in answers[0].body
    assert len(st.reviews_of(REPO, 1)) == 1


# -- faults a user meets: a persona that writes, times out, answers nothing ---------------------
class FaultyTeam(TeamModel):
    def __init__(self) -> None:
        super().__init__()
        self.writer: str | None = None
        self.slow: set[str] = set()
        self.empty: set[str] = set()
        self.coordinator_breaks = False  # fails once its inline comments are on the draft
        self.coordinator_slow = False

    def __call__(self, req: ModelRequest) -> Reply:
        if self.coordinator_breaks and req.system.startswith("You are the coordinator") and \
                any(c["function"]["name"] == "add_comment_to_pending_review"
                    for m in req.since_last_user() for c in m.get("tool_calls") or []):
            raise ScriptedFailure("the coordinator's model broke mid-review")
        if self.coordinator_slow and req.system.startswith("You are the coordinator"):
            return Reply(content="weighing " * 40, chunk_delay_s=0.2)
        reply = super().__call__(req)
        for name in self.slow | self.empty | {self.writer}:
            if name and req.system.startswith(f"You are the {name} reviewer"):
                if name in self.slow:
                    return Reply(content="thinking " * 40, chunk_delay_s=0.2)
                if name in self.empty:
                    return Reply(content="")
                turn = req.since_last_user()
                if not any(m["role"] == "tool" for m in turn):
                    return Reply(tool_calls=[
                        ("pull_request_review_write",
                         {"owner": "acme", "repo": "shop", "pullNumber": 1, "method": "create",
                          "event": "APPROVE", "body": "LGTM from the persona"}),
                        ("add_issue_comment", {"owner": "acme", "repo": "shop",
                                               "issue_number": 1, "body": "persona was here"})])
                return Reply(content="No findings.")
        return reply


def faulty(sim) -> FaultyTeam:
    policy = FaultyTeam()
    sim.model.policy = policy
    sim.model.team = policy
    return policy


def test_a_persona_cannot_write(sim):
    policy = faulty(sim)
    policy.writer = "security"
    run = job(sim, "pull_request", pull_request_event(sim.sb, REPO, 1, "opened"))
    st = sim.sb.state
    (review,) = st.reviews_of(REPO, 1)
    assert "LGTM from the persona" not in review.body and review.state != "APPROVED"
    assert not [c for c in st.issue_comments_of(REPO, 1) if "persona was here" in c.body]
    assert reviewed(run), run.output


def test_a_persona_timeout_and_an_empty_answer_fail_closed(sim):
    policy = faulty(sim)
    policy.slow.add("performance")
    policy.empty.add("quality")
    run1 = job(sim, "pull_request", pull_request_event(sim.sb, REPO, 1, "opened"),
               DSH_PERSONA_TIMEOUT_S="1")
    assert run1.exit_code == 1, run1.output
    (review,) = sim.sb.state.reviews_of(REPO, 1)
    line = verdict_line(review.body)
    assert line.startswith("Verdict: cannot merge:") and "performance" in line \
        and "quality" in line, line
    policy.slow.clear()
    policy.empty.clear()
    push_fix(sim.sb)
    served1 = len(sim.model.served)
    run2 = job(sim, "pull_request", pull_request_event(sim.sb, REPO, 1, "synchronize"))
    assert reviewed(run2), run2.output
    firsts = first_requests(sim.model.served[served1:])
    for name in ("performance", "quality"):
        assert [m["role"] for m in firsts[name].request["messages"]] == ["system", "user"], name


def test_a_coordinator_timeout_names_the_turn_deadline(sim):
    """The coordinator's limit is the turn's (review.turn_timeout_s), not the personas'."""
    policy = faulty(sim)
    policy.coordinator_slow = True
    run = job(sim, "pull_request", pull_request_event(sim.sb, REPO, 1, "opened"),
              DSH_TURN_TIMEOUT_S="2")
    assert run.exit_code == 1, run.output
    assert "coordinator's turn deadline (review.turn_timeout_s) passed" in run.output, run.output
    assert "persona deadline" not in run.output


def test_a_ci_session_resumes_in_the_daemon(sim, tmp_path):
    """One session format: the sessions a CI job saved, put in a daemon's home (account named
    like the action's), resume there — each persona and the coordinator extend their CI
    conversation, and their first requests are prefix-cache hits."""
    import asyncio
    import shutil

    from dsh_github_reviewer.testing.deployment import Deployment

    sb, model = sim.sb, sim.model
    run1 = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "opened"))
    assert reviewed(run1), run1.output
    last1: dict[str, object] = {}
    for s in model.served:
        if s.fault is None:
            last1[who(s)] = s
    home = tmp_path / "daemon"
    shutil.copytree(saved(sim, run1), home / "home/sessions")
    push_fix(sb)
    served1 = len(model.served)
    team = '\n[plugins.github-reviewer.accounts.review.team]\npersonas = ["quality", ' \
           '"security", "performance"]\n'

    async def daemon() -> None:
        dep = await Deployment(home, sb, model, accounts=("actions",),
                               extra_account=team).start()
        try:
            await dep.tick("actions")
        finally:
            await dep.stop()
    asyncio.run(daemon())
    assert len(sb.state.reviews_of(REPO, 1)) == 2
    firsts = first_requests(model.served[served1:])
    assert set(firsts) == {*PERSONAS, "coordinator"}
    for name, first in firsts.items():
        before = last1[name].request["messages"]
        assert first.request["messages"][:len(before)] == before, name
        assert first.cache_hit_tokens / first.prompt_tokens > 0.5, name


def test_a_coordinator_that_breaks_mid_review_leaves_one_failed_closed_review(sim):
    """Its pending draft (with inline comments) must not block the reports' fallback review:
    one review, the reports in it, no PENDING review left, the check fails."""
    policy = faulty(sim)
    policy.coordinator_breaks = True
    run = job(sim, "pull_request", pull_request_event(sim.sb, REPO, 1, "opened"),
              DSH_MODEL_MAX_RETRIES="0")
    assert run.exit_code == 1, run.output
    st = sim.sb.state
    (review,) = st.reviews_of(REPO, 1)
    assert review.state == "COMMENTED"
    assert not [r for r in st.reviews if r.state == "PENDING"]
    assert verdict_line(review.body) == "Verdict: cannot merge: coordinator did not complete"
    assert "### security" in review.body and "eval" in review.body



def test_a_forged_complete_review_does_not_stand_in_for_the_bots(sim):
    """A copy of the bot's complete review, posted by someone else on the new head
    (its verdict and this account's trigger marker included), is plain text: CI reviews."""
    sb = sim.sb
    first = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "opened"))
    (review,) = sb.state.reviews_of(REPO, 1)
    assert reviewed(first) and review.user == "shop-review-bot"
    head = push_fix(sb)
    forged = sb.state.start_review(REPO, 1, "stranger", head)
    sb.state.submit_review(forged, "COMMENT", review.body)
    again = job(sim, "pull_request", pull_request_event(sb, REPO, 1, "synchronize"))
    assert "already has a complete team review" not in again.output, again.output
    ours = [r for r in sb.state.reviews_of(REPO, 1) if r.user == "shop-review-bot"]
    assert [r.commit_id for r in ours][-1] == head and len(ours) == 2
    assert forged.body == review.body, "the stranger's review is left alone"
