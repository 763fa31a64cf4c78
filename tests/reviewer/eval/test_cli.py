"""Black-box: ``dsh github-reviewer eval`` as a user runs it, with an OpenAI-compatible
test server as the provider; its report in --out, in the home, and on the web UI's eval page."""

from __future__ import annotations

import json
import os

import pytest

import dsh_github_reviewer.plugin as reviewer_plugin
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_harness import Harness, load_config
from dsh_harness.testing import ScriptedModelServer
from tests.reviewer.web.test_pr_pages import client

from ...cli_kit import dsh
from ...harness.agent_kit import config_text
from .kit import TWO_PUSH

SUMMARY_KEYS = {"cases", "repeats", "defects", "found", "findings", "hits", "false_positives",
                "recall", "recall_ci95", "precision", "precision_ci95", "f1", "f1_ci95",
                "by_language", "false_positives_per_pr", "false_positive_kinds",
                "clean_cases", "findings_on_clean", "clean_cases_flagged", "decoys",
                "decoy_hits", "re_review", "by_category", "by_severity", "failures", "cost_usd",
                "cost_per_pr_usd", "prompt_tokens", "output_tokens", "cache_hit", "model_calls",
                "wall_s"}


@pytest.mark.slow
async def test_eval_limit_5_json_runs_every_case_through_the_provider(tmp_path):
    with ScriptedModelServer(policy=reviewer_policy) as model:
        (tmp_path / "dsh.toml").write_text(config_text(model.base_url))
        proc = dsh("github-reviewer", "eval", "--limit", "5", "--json", "--yes", "--out",
                   str(tmp_path / "out"), cwd=tmp_path, timeout=300)
        requests = model.requests
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert len(report["cases"]) == 5 and report["tolerance_lines"] == 3
    (cfg,) = report["configs"]
    assert cfg["label"] == cfg["model"] == "scripted/deepseek-v4-flash" and cfg["team"] == []
    assert set(cfg["summary"]) == SUMMARY_KEYS and cfg["summary"]["failures"] == 0
    assert [c["case"] for c in cfg["cases"]] == report["cases"]
    for row in cfg["cases"]:
        assert row["error"] is None and row["reviewed"] and row["model_calls"] > 0
        assert any(f"eval/{row['case']}" in json.dumps(r) for r in requests)
        for f in row["findings"]:
            assert set(f) >= {"push", "path", "line", "start_line", "kind", "target", "body"}
    assert cfg["summary"]["defects"] == sum(len(r["defects"]) for r in cfg["cases"]) > 0
    # A stratified sample: five languages, clean cases in their share.
    assert len({c["language"] for c in cfg["cases"]}) == 5
    assert 1 <= sum(c["clean"] for c in cfg["cases"]) <= 2
    assert "cases ×" in proc.stderr and "5/5 cases" in proc.stderr  # estimate, progress
    assert "1/5 cases" in proc.stderr and "left" in proc.stderr  # per case, with what remains
    html = (tmp_path / "out" / "report.html").read_text()
    first = next(c for c in cfg["cases"] if c["defects"])["case"]  # names a case with defects
    assert f"{first}<div class=muted>" in html and "<td class=miss>✗ missed</td>" in html
    assert "| scripted/deepseek-v4-flash | 5 |" in (tmp_path / "out" / "report.md").read_text()
    assert json.loads((tmp_path / "home" / "eval" / "latest.json").read_text()) == report
    assert not (tmp_path / "home" / "eval" / "running.json").exists()  # removed at the end

    # The web UI's eval page shows that latest report, and a run under way.
    (tmp_path / "home" / "eval" / "running.json").write_text(json.dumps({
        "started_at": "2026-01-01T00:00:00+00:00", "configs": ["a/b", "a/c"], "cases": 40,
        "config": "a/c", "done": 12, "spent_usd": 0.5}))
    h = Harness(load_config(tmp_path / "dsh.toml"), load_entry_points=False,
                plugins=[("dsh-github-reviewer", reviewer_plugin)])
    try:
        async with client(h) as c:
            page = (await c.get("/eval")).text
            api = (await c.get("/api/eval")).json()
    finally:
        await h.close()
    assert "Review quality eval" in page and first in page and "<svg" in page
    assert "An eval is running" in page and "a/c — 12/40 cases, $0.5000 spent" in page
    assert api["report"]["cases"] == report["cases"] and api["running"]["done"] == 12


@pytest.mark.slow
def test_check_cases_names_a_broken_case_and_refuses_to_run_it(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "calc.toml").write_text(TWO_PUSH)
    proc = dsh("github-reviewer", "eval", "--check-cases", "--cases", str(cases), cwd=tmp_path)
    assert proc.returncode == 0 and "1 of 1 cases valid" in proc.stdout, proc.stderr
    (cases / "bad.toml").write_text(TWO_PUSH.replace("lines = [6, 6]", "lines = [2, 2]"))
    proc = dsh("github-reviewer", "eval", "--check-cases", "--cases", str(cases), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout.startswith("bad: div: lines [2, 2]")
    proc = dsh("github-reviewer", "eval", "--yes", "--cases", str(cases), cwd=tmp_path)
    assert proc.returncode == 2 and "invalid cases" in proc.stderr
    proc = dsh("github-reviewer", "eval", "--yes", "--model", "nope/x", "--only", "calc",
               "--cases", str(cases), cwd=tmp_path)
    assert proc.returncode == 2 and "--model 'nope/x'" in proc.stderr
    # With no config the default provider applies, and its missing key is named up front.
    proc = dsh("github-reviewer", "eval", "--yes", "--cases", str(cases), "--only", "calc",
               cwd=tmp_path)
    assert proc.returncode == 2 and "DEEPSEEK_API_KEY" in proc.stderr
    # Without --yes and without a terminal nothing starts.
    proc = dsh("github-reviewer", "eval", "--only", "calc", "--cases", str(cases), cwd=tmp_path,
               env={"DEEPSEEK_API_KEY": "sk-test"})
    assert proc.returncode == 1 and "pass --yes" in proc.stderr
    assert "1 cases × 1 configuration(s)" in proc.stderr and "$" in proc.stderr


@pytest.mark.slow
def test_models_and_the_team_side_by_side_on_the_same_cases(tmp_path):
    from dsh_github_reviewer.testing.team_model import TeamModel

    with ScriptedModelServer(policy=TeamModel()) as model:
        (tmp_path / "dsh.toml").write_text(config_text(model.base_url))
        proc = dsh("github-reviewer", "eval", "--only", "py-order-search-sql", "--only",
                   "py-db-backup", "--model", "scripted/deepseek-v4-flash", "--model",
                   "scripted/deepseek-v4-pro", "--team", "quality,security", "--json", "--yes",
                   "--concurrency", "2", cwd=tmp_path, timeout=300)
        requests = model.requests
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [c["label"] for c in report["configs"]] == [
        "scripted/deepseek-v4-flash", "scripted/deepseek-v4-pro",
        "scripted/deepseek-v4-flash team(quality,security)",
        "scripted/deepseek-v4-pro team(quality,security)"]
    for cfg in report["configs"]:
        assert [c["case"] for c in cfg["cases"]] == ["py-db-backup", "py-order-search-sql"]
        assert cfg["summary"]["failures"] == 0
        # The scripted rules catch the SQL concatenation, alone and as the security persona.
        sql = next(c for c in cfg["cases"] if c["case"] == "py-order-search-sql")
        assert [f["kind"] for f in sql["findings"]] == ["hit"]
    assert {r["model"] for r in requests} == {"deepseek-v4-flash", "deepseek-v4-pro"}
    personas = [r for r in requests if r["messages"][0]["content"].startswith(
        "You are the security reviewer")]
    assert {r["model"] for r in personas} == {"deepseek-v4-flash", "deepseek-v4-pro"}


@pytest.mark.slow
def test_the_cost_cap_is_shared_evenly_so_every_model_is_scored(tmp_path):
    """Before: with two models the first spent the whole cap and the second was left with 0 of
    its cases, and the run exited 0. Now each configuration gets an equal share: both are
    scored on the same first case, and the partial run exits 1."""
    with ScriptedModelServer(policy=reviewer_policy) as model:
        (tmp_path / "dsh.toml").write_text(config_text(model.base_url))
        proc = dsh("github-reviewer", "eval", "--only", "py-pagination", "--only",
                   "py-retry", "--model", "scripted/deepseek-v4-flash", "--model",
                   "scripted/deepseek-v4-pro", "--max-cost-usd", "1e-9", "--concurrency", "1",
                   "--json", "--yes", cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "the cost cap stopped a configuration" in proc.stderr
    report = json.loads(proc.stdout)
    assert [[r["case"] for r in c["cases"]] for c in report["configs"]] == [
        ["py-pagination"], ["py-pagination"]]
    assert all("share $5e-10 reached" in c["stopped"] for c in report["configs"])


@pytest.mark.slow
def test_ctrl_c_stops_after_the_case_in_flight_with_a_partial_report(tmp_path):
    import signal
    import subprocess
    import sys
    import threading

    from ...cli_kit import STRIPPED

    arrived, release = threading.Event(), threading.Event()

    def policy(req):
        arrived.set()
        release.wait(60)
        return reviewer_policy(req)

    with ScriptedModelServer(policy=policy) as model:
        (tmp_path / "dsh.toml").write_text(config_text(model.base_url))
        env = {k: v for k, v in os.environ.items() if k not in STRIPPED} | {
            "HOME": str(tmp_path)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_harness.cli", "github-reviewer", "eval", "--only",
             "py-*", "--limit", "4", "--concurrency", "1", "--json", "--yes"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert arrived.wait(120), "the first review never reached the model"
            proc.send_signal(signal.SIGINT)
            release.set()
            out, err = proc.communicate(timeout=240)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err
    assert "stopping after the cases in flight" in err and "the report is partial" in err
    report = json.loads(out)
    assert report["stopped"] == "Ctrl-C" and len(report["configs"][0]["cases"]) == 1
    assert not (tmp_path / "home" / "eval" / "running.json").exists()


def test_verify_off_and_on_side_by_side_on_the_same_cases(tmp_path):
    """``--verify off,on`` runs each configuration without and with the second look;
    the scripted verifier's requests appear only in the ``verify=on`` run."""
    with ScriptedModelServer(policy=reviewer_policy) as model:
        (tmp_path / "dsh.toml").write_text(config_text(model.base_url))
        proc = dsh("github-reviewer", "eval", "--only", "py-order-search-sql", "--verify",
                   "off,on", "--json", "--yes", cwd=tmp_path, timeout=300)
        requests = model.requests
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    labels = [c["label"] for c in report["configs"]]
    assert [x.rsplit(" ", 1)[1] for x in labels] == ["verify=off", "verify=on"]
    for cfg in report["configs"]:
        assert [c["case"] for c in cfg["cases"]] == ["py-order-search-sql"]
        assert cfg["summary"]["failures"] == 0
    verifier = [r for r in requests
                if r["messages"][0]["content"].startswith("You are the second look")]
    assert verifier, "the verifier ran in the verify=on run"


def test_verify_values_are_checked():
    from dsh_github_reviewer.eval.command import verify_values
    from dsh_github_reviewer.eval.run import EvalError

    assert verify_values("off,on") == ["off", "on"]
    assert verify_values("ON") == ["on"]
    assert verify_values("on,off,on") == ["on", "off"]
    with pytest.raises(EvalError, match="--verify takes off, on or off,on"):
        verify_values("maybe")


@pytest.mark.slow
def test_repeat_prints_intervals_and_a_reviewer_against_itself_is_noise(tmp_path):
    """--repeat 2: every rate with its 95 % interval; the same scripted reviewer under two
    model names gives a paired comparison that says "not distinguishable"."""
    with ScriptedModelServer(policy=reviewer_policy) as model:
        (tmp_path / "dsh.toml").write_text(config_text(model.base_url))
        proc = dsh("github-reviewer", "eval", "--only", "py-order-search-sql", "--only",
                   "py-pagination", "--model", "scripted/deepseek-v4-flash", "--model",
                   "scripted/deepseek-v4-pro", "--repeat", "2", "--yes", "--out",
                   str(tmp_path / "out"), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "2 cases × 2 configuration(s) × 2 runs" in proc.stderr and "8/8 in all" in proc.stderr
    table = proc.stdout
    assert "| scripted/deepseek-v4-flash | 4 (2 runs) |" in table
    assert "recall [95% CI]" in table and "% [" in table
    assert ("scripted/deepseek-v4-flash vs scripted/deepseek-v4-pro: 2 cases" in table
            and "**not distinguishable from noise**" in table)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    for cfg in report["configs"]:
        s = cfg["summary"]
        assert s["repeats"] == 2 and [r["repeat"] for r in cfg["cases"]] == [1, 1, 2, 2]
        assert len(s["recall_ci95"]) == 2 and len(s["precision_ci95"]) == 2
        assert s["f1_ci95"] is not None
    (cmp,) = report["comparisons"]
    assert cmp["distinguishable"] is False and cmp["runs"] == 4
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<h2>Paired comparisons</h2>" in html and "not distinguishable from noise" in html


@pytest.mark.parametrize("args, says", [
    (["--max-cost-usd", "nan"], "argument --max-cost-usd: want a positive amount"),
    (["--max-cost-usd", "-1"], "argument --max-cost-usd: want a positive amount"),
    (["--repeat", "0"], "argument --repeat: want 1 or more, not 0"),
    (["--concurrency", "0"], "argument --concurrency: want 1 or more, not 0"),
    (["--limit", "-3"], "argument --limit: want 1 or more, not -3"),
    (["mine", "--repo", "a/b", "--out", "x", "--limit", "0"], "want 1 or more, not 0"),
])
def test_bad_numbers_are_refused_by_name(capsys, args, says):
    """Before: --max-cost-usd nan disabled the cap (no spend compares >= nan), -1 stopped each
    configuration after one case, and --repeat/--concurrency 0 were taken as 1 without a word."""
    import argparse

    from dsh_github_reviewer.eval.args import add_arguments

    parser = argparse.ArgumentParser(prog="eval")
    add_arguments(parser)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(args)
    assert exc.value.code == 2 and says in capsys.readouterr().err


def test_a_bad_judge_is_named_as_the_judge(tmp_path):
    """A bad --judge was reported as a bad "--model"; a missing --instructions file as a bare
    "[Errno 2] No such file or directory"."""
    (tmp_path / "dsh.toml").write_text(config_text("http://127.0.0.1:9"))
    proc = dsh("github-reviewer", "eval", "--only", "py-pagination", "--judge", "bogus/y",
               cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    # An error starts "dsh:" like every other dsh error, then says which command it is.
    assert "dsh: eval: --judge 'bogus/y': want <provider>/<model>" in proc.stderr
    proc = dsh("github-reviewer", "eval", "--only", "py-pagination", "--instructions",
               "missing.md", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "dsh: eval: --instructions missing.md: No such file or directory" in proc.stderr


@pytest.mark.slow
def test_ctrl_c_while_judging_keeps_the_reviews_in_a_report(tmp_path):
    """Before: the Ctrl-C handler was gone once the cases ended, so an interrupt while the
    judge worked raised KeyboardInterrupt and lost every review already paid for. Now it
    skips the judge: the report is written without its columns, marked stopped, exit 130."""
    import signal
    import subprocess
    import sys
    import threading

    from ...cli_kit import STRIPPED

    judging, release = threading.Event(), threading.Event()

    def policy(req):
        if str(req.messages[0].get("content", "")).startswith("You grade code review"):
            judging.set()
            release.wait(60)
            return "YES"
        return reviewer_policy(req)

    with ScriptedModelServer(policy=policy) as model:
        (tmp_path / "dsh.toml").write_text(config_text(model.base_url))
        env = {k: v for k, v in os.environ.items() if k not in STRIPPED} | {
            "HOME": str(tmp_path)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_harness.cli", "github-reviewer", "eval", "--only",
             "py-order-search-sql", "--judge", "scripted/deepseek-v4-pro", "--json", "--yes"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert judging.wait(120), "the judge was never asked"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130 and out, err  # a report, not a bare KeyboardInterrupt
    report = json.loads(out)
    assert report["stopped"] == "Ctrl-C"
    assert "Ctrl-C skips it" in err and "the report is partial" in err
    assert [c["case"] for c in report["configs"][0]["cases"]] == ["py-order-search-sql"]


def test_an_out_that_cannot_be_written_is_refused_before_anything_runs(tmp_path):
    """Before: ``--out`` naming a file failed only after every case had run (and been paid
    for), and that error also kept the report out of the home: nothing was left."""
    (tmp_path / "dsh.toml").write_text(config_text("http://127.0.0.1:9"))
    (tmp_path / "taken").write_text("")
    proc = dsh("github-reviewer", "eval", "--only", "py-pagination", "--yes", "--out",
               str(tmp_path / "taken"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"eval: --out {tmp_path / 'taken'}: File exists" in proc.stderr
    assert "1/1 cases" not in proc.stderr  # refused before the first case


def test_the_home_copy_is_written_even_when_out_fails(tmp_path, capsys):
    from datetime import UTC, datetime

    from dsh_github_reviewer.eval.command import _write
    from dsh_github_reviewer.eval.report import build_report
    from dsh_github_reviewer.eval.run import ConfigResult, EvalConfig

    report = build_report([], [ConfigResult(EvalConfig("a/b"), [])],
                          started_at=datetime(2026, 1, 1, tzinfo=UTC))
    (tmp_path / "taken").write_text("")
    written = _write(report, tmp_path / "taken", tmp_path / "home")
    assert written == [tmp_path / "home" / "eval" / "latest.json"]
    assert "the report is in the home and printed" in capsys.readouterr().err


@pytest.mark.slow
def test_running_json_counts_the_current_configuration_and_the_whole_run(tmp_path):
    """Before: ``done`` counted case runs of every configuration while ``cases`` is one
    configuration's, so the second model's progress read "1/1 cases" before its first case
    ended (and "7/6" later on); now ``done`` is the current configuration's, ``done_all`` of
    ``total`` the whole run's, and the web banner shows both."""
    import threading

    second, release = threading.Event(), threading.Event()

    def policy(req):
        if req.body.get("model") == "deepseek-v4-pro":
            second.set()
            release.wait(60)
        return reviewer_policy(req)

    import subprocess
    import sys

    from ...cli_kit import STRIPPED

    with ScriptedModelServer(policy=policy) as model:
        (tmp_path / "dsh.toml").write_text(config_text(model.base_url))
        env = {k: v for k, v in os.environ.items() if k not in STRIPPED} | {
            "HOME": str(tmp_path)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_harness.cli", "github-reviewer", "eval", "--only",
             "py-order-search-sql", "--model", "scripted/deepseek-v4-flash", "--model",
             "scripted/deepseek-v4-pro", "--json", "--yes"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert second.wait(120), "the second configuration never started"
            state = json.loads((tmp_path / "home" / "eval" / "running.json").read_text())
        finally:
            release.set()
            try:
                _, err = proc.communicate(timeout=120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    assert proc.returncode == 0, err
    assert state["config"] == "scripted/deepseek-v4-pro"
    assert (state["done"], state["cases"], state["done_all"], state["total"]) == (0, 1, 1, 2)
    from dsh_github_reviewer.eval.web_page import running_state

    shown, _ = running_state(state | {"pid": None})  # its process has ended by now
    assert (shown["done"], shown["done_all"], shown["total"]) == (0, 1, 2)
