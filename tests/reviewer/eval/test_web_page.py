"""The eval page keeps the history, compares two runs, and does not show a killed run as
running for ever."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from dsh_github_reviewer.eval import CaseRun, Finding
from dsh_github_reviewer.eval.command import _write
from dsh_github_reviewer.eval.report import build_report
from dsh_github_reviewer.eval.run import ConfigResult, EvalConfig
from dsh_github_reviewer.eval.web_page import STALE_S, _page, history, running_state

from .kit import case

MODEL = "scripted/m"


def _report(lines: list[int], at: datetime, error: str | None = None) -> dict:
    run = CaseRun(case_id="calc", reviewed=[1, 2], error=error, findings=[
        Finding(push=1, path="app/calc.py", line=n, body="b may be zero") for n in lines])
    return build_report([case()], [ConfigResult(EvalConfig(MODEL), [run])], started_at=at)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_run_is_not_shown_as_running():
    now = datetime.now(UTC)
    live = {"started_at": "x", "pid": os.getpid(), "host": socket.gethostname(),
            "updated_at": now.isoformat()}
    shown, note = running_state(live, now)
    assert note is None and shown is not None and shown.items() >= live.items()
    gone, note = running_state({**live, "pid": _dead_pid()}, now)
    assert gone is None and "stopped without finishing" in note
    # On another host the pid says nothing: the heartbeat does.
    elsewhere = {**live, "host": "other-host",
                 "updated_at": (now - timedelta(seconds=STALE_S + 1)).isoformat()}
    gone, note = running_state(elsewhere, now)
    assert gone is None and "has not reported since" in note
    fresh = {**elsewhere, "updated_at": now.isoformat()}
    assert running_state(fresh, now)[0].items() >= fresh.items()
    assert running_state(None) == (None, None)


def test_history_and_a_comparison_of_two_runs(tmp_path):
    home = tmp_path / "home"
    t0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    _write(_report([6, 11, 15], t0), None, home)
    _write(_report([], t0 + timedelta(hours=1), error="push 1: boom"), None, home)
    runs = history(home)
    assert [r["run"] for r in runs] == ["2026-01-01T110000Z", "2026-01-01T100000Z"]
    assert runs[1]["configs"][0]["recall"] == round(2 / 3, 4)
    page = _page(home, {"run": "", "a": "", "b": ""})["fragment"]
    # The latest run, its case titles, a failed case marked apart from a missed defect.
    assert "Calculator" in page and "failed (no review)" in page and "✗ missed" not in page
    assert "<h2>Runs</h2>" in page and "name=a" in page
    # The form offers the newest run against the one before it (both selects used to open on
    # the newest, a run against itself).
    assert ("<select name=b><option value='2026-01-01T110000Z'>2026-01-01T11:00:00+00:00"
            "</option><option value='2026-01-01T100000Z' selected>") in page
    page = _page(home, {"run": "2026-01-01T100000Z", "a": "", "b": ""})["fragment"]
    assert "failed (no review)" not in page and "✓ review 1" in page and "(shown)" in page
    ctx = _page(home, {"run": "", "a": "2026-01-01T100000Z", "b": "2026-01-01T110000Z"})
    assert "Run 2026-01-01T100000Z against run 2026-01-01T110000Z" in ctx["fragment"]
    assert "found only by the first 2, only by the second 0" in ctx["fragment"]
    # A URL naming no run (or a path) reads nothing.
    ctx = _page(home, {"run": "../../etc/passwd", "a": "", "b": ""})
    assert ctx["error"].startswith("no run ../../etc/passwd")
    assert json.loads((home / "eval" / "latest.json").read_text())["configs"]


def test_forged_files_in_the_home_give_a_message_not_an_error(tmp_path):
    home = tmp_path / "home"
    (home / "eval").mkdir(parents=True)
    (home / "eval" / "latest.json").write_text(json.dumps({
        "started_at": "x", "finished_at": "y", "cases": [], "tolerance_lines": 3,
        "configs": [{"label": "a", "stopped": None, "summary": {"recall": "high"}, "cases": []}]}))
    (home / "eval" / "report-2026-01-01T100000Z.json").write_text('{"configs": 3}')
    (home / "eval" / "report-2026-01-01T110000Z.json").write_text("not json")
    (home / "eval" / "running.json").write_text(json.dumps({"spent_usd": "lots", "done": []}))
    ctx = _page(home, {"run": "", "a": "2026-01-01T100000Z", "b": "2026-01-01T110000Z"})
    assert ctx["running"] is None and "cannot" in ctx["error"]
    ctx = _page(home, {"run": "", "a": "", "b": ""})
    assert "latest.json cannot be shown" in ctx["error"] and "<h2>Runs</h2>" in ctx["fragment"]
    assert "running.json cannot be read" in ctx["fragment"]
    assert running_state({"spent_usd": 1, "done": "3", "cases": 9})[0]["done"] == 3


def test_the_web_page_styles_every_cell_kind_of_the_defect_grid():
    """The standalone report colours found, missed and failed cells; the web page had no rule
    for a failed case's cell, so "failed (no review)" looked like an ordinary cell."""
    from pathlib import Path

    css = (Path(__file__).parents[3] / "dsh_harness/web/static/style.css").read_text()
    for kind in ("hit", "miss", "fail"):
        assert f".eval-report td.{kind} {{" in css, kind
