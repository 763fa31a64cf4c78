"""Through the real loop: scripted models of known behaviour review cases built in the
sandbox GitHub (real github-mcp-server, records, worker, guard) and get exact scores."""

from __future__ import annotations

import asyncio
import json

import pytest

from dsh_github_reviewer.eval import CaseRun, Finding, load_cases, score_case, summarize
from dsh_github_reviewer.eval.report import build_report, html_fragment, markdown
from dsh_github_reviewer.eval.run import EvalConfig, Options, run_config
from dsh_github_reviewer.eval.scripted_model import eval_model
from dsh_harness import Harness, parse_config

from ...harness.agent_kit import config_text
from .kit import case

MODEL = "scripted/deepseek-v4-flash"


def _harness(tmp_path, model) -> Harness:
    return Harness(parse_config(config_text(model.base_url), "t.toml", tmp_path))


async def _run(tmp_path, cases, behaviour, **opts):
    with eval_model(cases, behaviour) as model:
        h = _harness(tmp_path, model)
        try:
            res = await run_config(h, EvalConfig(MODEL), cases, Options(**opts))
        finally:
            await h.close()
        return res, model.requests


@pytest.mark.slow
async def test_scripted_reviewers_get_their_exact_scores(tmp_path):
    """One run, five copies of the two-push calculator case, each reviewed by a model of known
    behaviour (chosen by the repository name)."""
    behaviours = {"perfect": "perfect", "silent": "silent", "every": "every_line",
                  "repeat": "repeater", "decoy": "decoys", "fail": "fail",
                  "claims": "claims_all"}
    cases = [case(id=f"calc-{k}") for k in behaviours]
    res, _ = await _run(tmp_path, cases, lambda cid: behaviours[cid.split("-")[1]],
                        concurrency=7)
    runs = {r.case_id: r for r in res.runs}
    failed = runs.pop("calc-fail")
    assert all(r.error is None and r.reviewed == [1, 2] for r in runs.values()), runs
    # A review that never got posted is a failure with the recorded reason, and finds nothing.
    assert failed.reviewed == [] and failed.findings == []
    assert failed.error.startswith("push 1, 2: ") and "500" in failed.error, failed.error
    fail = summarize([score_case(cases[-1], failed)], [failed])
    assert (fail["failures"], fail["recall"]) == (1, 0.0)

    def s(k):
        c = next(c for c in cases if c.id == f"calc-{k}")
        return summarize([score_case(c, runs[c.id])], [runs[c.id]])

    perfect = s("perfect")
    assert (perfect["recall"], perfect["precision"], perfect["f1"]) == (1.0, 1.0, 1.0)
    assert perfect["re_review"] == {"cases": 1, "new_defects": 1, "new_found": 1, "fixes": 1,
                                    "fixes_recognised": 1, "repeats": 0, "resolved_unfixed": 0}
    # Naming every open thread as fixed: the fix is recognised, the still-open one is counted.
    claims = s("claims")["re_review"]
    assert (claims["fixes_recognised"], claims["resolved_unfixed"]) == (1, 1)
    silent = s("silent")
    assert (silent["recall"], silent["findings"], silent["f1"]) == (0.0, 0, 0.0)
    # Every added line: 11 comments on push 1, 12 on push 2 (see test_score for the kinds).
    every = s("every")
    assert (every["findings"], every["hits"], every["recall"]) == (23, 3, 1.0)
    assert (every["precision"], every["f1"]) == (round(3 / 23, 4), round(3 / 13, 4))
    assert every["false_positive_kinds"] == {"other": 4, "decoy": 2, "repeat": 6,
                                             "duplicate": 8}
    repeat = s("repeat")
    assert (repeat["re_review"]["repeats"], repeat["precision"]) == (1, 0.75)
    assert repeat["f1"] < perfect["f1"]
    decoy = s("decoy")
    assert (decoy["decoy_hits"], decoy["false_positives"], decoy["precision"]) == (1, 1, 0.75)
    # What was read back is what the bot posted, with a cost measured per case.
    assert [(f.push, f.line) for f in runs["calc-perfect"].findings] == [(1, 6), (1, 11), (2, 15)]
    assert all(r.model_calls > 0 and r.cost_usd > 0 for r in runs.values())


@pytest.mark.slow
async def test_shipped_cases_with_a_perfect_reviewer_and_the_cost_cap(tmp_path):
    cases = [c for c in load_cases() if c.id in ("py-pagination", "go-audit-query",
                                                  "ts-clean-debounce")]
    res, requests = await _run(tmp_path, cases, "perfect", concurrency=1,
                               max_cost_usd=1e-9)
    # The first case ran (nothing was spent before it); the cap stopped the rest.
    assert len(res.runs) == 1 and "share $1e-09 reached" in res.stopped
    assert "after 1 of 3 cases started" in res.stopped
    assert all(f"eval/{res.runs[0].case_id}#1" in json.dumps(r) for r in requests)
    progress = []
    res, _ = await _run(tmp_path, cases, "perfect", concurrency=2,
                        on_case=lambda cfg, run, done, total, spent: progress.append(
                            (run.case_id, done, total)))
    # One line per case as it ends (what the progress line and running.json show).
    assert [(d, t) for _, d, t in progress] == [(1, 3), (2, 3), (3, 3)]
    assert sorted(c for c, _, _ in progress) == sorted(c.id for c in cases)
    by = {c.id: c for c in cases}
    s = summarize([score_case(by[r.case_id], r) for r in res.runs], res.runs)
    assert (s["recall"], s["precision"], s["findings_on_clean"], s["failures"]) == \
        (1.0, 1.0, 0, 0)
    report = build_report(cases, [res], started_at=res_started())
    assert report["configs"][0]["summary"]["decoys"] == 1
    table = markdown(report)
    # Every rate with its n and 95 % interval.
    assert ("| scripted/deepseek-v4-flash | 3 | 100% [44–100%] (n=3) | 100% [44–100%] (n=3) | "
            "1.00 [1.00–1.00] |") in table
    assert "| off-by-one | 100% [21–100%] (1/1);" in table
    assert "| critical | 100% [21–100%] (1/1);" in table and "| by language |" in table



@pytest.mark.slow
async def test_a_team_recognises_fixes_as_the_single_reviewer_does(tmp_path):
    """The same behaviours run alone and as a review team (the coordinator is given its open
    threads): the team finds, repeats and recognises fixes exactly as the single reviewer."""
    behaviours = {"perfect": "perfect", "claims": "claims_all", "silent": "silent"}
    cases = [case(id=f"calc-{k}") for k in behaviours]
    pick = lambda cid: behaviours[cid.split("-")[1]]  # noqa: E731
    scores = {}
    for cfg in (EvalConfig(MODEL), EvalConfig(MODEL, team=("quality", "security"))):
        with eval_model(cases, pick) as model:
            h = _harness(tmp_path / cfg.label.replace(" ", "_"), model)
            try:
                res = await run_config(h, cfg, cases, Options(concurrency=3))
            finally:
                await h.close()
        runs = {r.case_id: r for r in res.runs}
        assert all(r.error is None and r.reviewed == [1, 2] for r in runs.values()), runs
        if cfg.team:  # the coordinator posted what the personas reported
            assert all(f.body.split("** ", 1)[-1].startswith(("[quality] ", "[security] "))
                       for f in runs["calc-perfect"].findings), runs["calc-perfect"].findings
        scores[cfg.label] = {c.id: summarize([score_case(c, runs[c.id])], [runs[c.id]])
                             for c in cases}
    single, team = scores.values()
    assert team["calc-perfect"]["re_review"] == single["calc-perfect"]["re_review"] == {
        "cases": 1, "new_defects": 1, "new_found": 1, "fixes": 1, "fixes_recognised": 1,
        "repeats": 0, "resolved_unfixed": 0}
    assert (team["calc-claims"]["re_review"]["resolved_unfixed"],
            team["calc-claims"]["re_review"]["fixes_recognised"]) == (1, 1)
    for cid in single:
        for key in ("recall", "precision", "f1", "findings", "re_review"):
            assert team[cid][key] == single[cid][key], (cid, key)

def res_started():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def test_report_bars_show_an_empty_track_at_zero():
    """A silent model's 0 % recall is an empty bar under one header spanning the three
    scores, not blank recall and precision columns with the labels pushed under F1."""
    from dsh_github_reviewer.eval.run import ConfigResult

    run = CaseRun(case_id="calc", findings=[], reviewed=[1, 2])
    page = html_fragment(build_report([case()], [ConfigResult(EvalConfig(MODEL), [run])],
                                      started_at=res_started()))
    assert "<th colspan=3>recall · precision · F1 (location)</th>" in page
    assert "<th>recall</th>" not in page
    for name in ("recall", "precision", "F1"):
        assert (f"aria-label='{name}'><rect width='120' height='12' fill='#e4e7eb'/><rect "
                f"width='0' height='12'") in page
    # The label (with its 95 % interval) inside the SVG, so it never wraps away from its bar.
    assert "font-size='12' fill='currentColor'>recall 0% [0–56%]</text></svg>" in page


def test_report_escapes_what_the_model_wrote():
    c = case()
    body = "<script>alert(1)</script> & `x`"
    run = CaseRun(case_id="calc", findings=[Finding(path="app/calc.py", line=6, body=body)],
                  reviewed=[1, 2])
    from dsh_github_reviewer.eval.run import ConfigResult

    report = build_report([c], [ConfigResult(EvalConfig(MODEL), [run])],
                          started_at=res_started())
    page = html_fragment(report)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp;" in page
    row = report["configs"][0]["cases"][0]
    assert row["findings"][0] | {"body": None} == {
        "push": 1, "path": "app/calc.py", "line": 6, "start_line": None, "kind": "hit",
        "target": "div", "body": None}
    assert json.loads(json.dumps(report)) == report


def test_reports_in_the_home_are_owner_only(tmp_path):
    """The home holds 0600 files in 0700 directories; the eval's reports and progress file are
    no exception, whatever the umask (and a home the eval creates is 0700 too)."""
    import os
    import stat

    from dsh_github_reviewer.eval.command import Running, _write
    from dsh_github_reviewer.eval.run import ConfigResult

    report = build_report([case()], [ConfigResult(EvalConfig(MODEL), [CaseRun(
        case_id="calc", findings=[], reviewed=[1, 2])])], started_at=res_started())
    home = tmp_path / "home"
    old = os.umask(0o022)
    try:
        running = Running(home, res_started(), [MODEL], 1)
        running.update(EvalConfig(MODEL), 1, 1, 0.0)
        running_mode = stat.S_IMODE(os.stat(home / "eval" / "running.json").st_mode)
        _write(report, None, home)
    finally:
        os.umask(old)
    assert running_mode == 0o600
    for d in (home, home / "eval"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    files = list((home / "eval").iterdir())
    assert {f.name.split("-")[0] for f in files} >= {"latest.json", "report", "running.json"}
    for f in files:
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f


async def test_a_case_the_bot_parks_is_collected_not_waited_for(tmp_path, monkeypatch):
    """A PR the bot never reviews (here: opened as a draft, whose work waits until it is ready)
    does not hang the run: once its work has been idle for IDLE_S the case is collected, as a
    failure naming why."""
    from dsh_github_reviewer.eval import run as run_module
    from dsh_github_reviewer.testing.sandbox_state import SandboxState

    monkeypatch.setattr(run_module, "IDLE_S", 1.0)
    real = SandboxState.open_pull

    def as_draft(self, *a, **kw):
        return real(self, *a, **{**kw, "draft": True})
    monkeypatch.setattr(SandboxState, "open_pull", as_draft)
    (c,) = [x for x in load_cases() if x.id == "py-pagination"]
    async with asyncio.timeout(120):  # without the guard this would wait for ever: fail instead
        res, requests = await _run(tmp_path, [c], "perfect")
    (run,) = res.runs
    assert run.reviewed == [] and run.error is not None and requests == []


def test_the_defect_grid_names_the_run_of_each_mark_with_repeats():
    """With --repeat 2 a defect found in both runs read "✓ review 1, review 1"; each mark now
    says which run it is, and a defect missed in every run is still "✗ missed"."""
    from dsh_github_reviewer.eval.run import ConfigResult

    c = case()
    runs = [CaseRun(case_id="calc", reviewed=[1, 2], repeat=n,
                    findings=[Finding(path="app/calc.py", line=6, body="b may be zero")]
                    if n == 1 else []) for n in (1, 2)]
    page = html_fragment(build_report([c], [ConfigResult(EvalConfig(MODEL), runs)],
                                      started_at=res_started()))
    assert "<td class=hit>✓ run 1: review 1, run 2: missed</td>" in page
    assert "<td class=miss>✗ missed</td>" in page  # "loop" and "secret": missed in both runs
