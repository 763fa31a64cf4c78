"""The web UI's eval page (``/eval``): the reports ``dsh github-reviewer eval`` wrote into this
deployment's home (``<home>/eval/report-<stamp>.json``, ``latest.json``), any one of them
(``?run=<stamp>``), two runs compared (``?a=<stamp>&b=<stamp>``: the paired comparison of
their configurations on the cases both ran), and the progress of a run under way
(``running.json``). A run that was killed cannot remove its ``running.json``: it is shown as
gone once its process is not alive on this host or its heartbeat is older than ``STALE_S``."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core.clock import utcnow
from .compare import compare
from .report import comparison_line, html_fragment

HISTORY = 50  # newest reports listed
STALE_S = 120.0  # several missed heartbeats (written every 15 s)
_STAMP = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{6}Z$")


def latest_path(home: Path) -> Path:
    return home / "eval" / "latest.json"


def running_path(home: Path) -> Path:
    return home / "eval" / "running.json"


def report_path(home: Path, stamp: str) -> Path | None:
    """The report of one run, or None for a stamp that is not one (no path from the URL)."""
    return home / "eval" / f"report-{stamp}.json" if _STAMP.match(stamp) else None


def _load(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"{path.name}: {exc}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


# What a report of another version (or a file that is not one) raises while it is shown.
FAILED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def _clean(running: dict[str, Any]) -> dict[str, Any] | None:
    """What the page shows of ``running.json``, with the types it formats (None: unreadable)."""
    try:
        return {"started_at": str(running.get("started_at", "")),
                "configs": [str(c) for c in running.get("configs") or []],
                "config": str(running.get("config") or ""),
                "done": int(running.get("done") or 0), "cases": int(running.get("cases") or 0),
                "spent_usd": float(running.get("spent_usd") or 0.0),
                **{k: int(running[k]) for k in ("done_all", "total") if k in running},
                **{k: running[k] for k in ("pid", "host", "updated_at", "repeats")
                   if k in running}}
    except FAILED:
        return None


def running_state(running: dict[str, Any] | None, now: datetime | None = None
                  ) -> tuple[dict[str, Any] | None, str | None]:
    """(the run under way, or None; a note when ``running.json`` is left from a run that is
    gone)."""
    if not isinstance(running, dict):
        return None, None
    shown = _clean(running)
    if shown is None:
        return None, "running.json cannot be read (another version?); no run is shown."
    now = now or utcnow()
    pid, host = running.get("pid"), running.get("host")
    if type(pid) is int and pid > 0 and host == socket.gethostname() and not _alive(pid):
        return None, (f"An eval started {running.get('started_at')} stopped without finishing "
                      f"(process {pid} is gone); its report, if any, is below.")
    stamp = running.get("updated_at")
    try:
        at = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        at = None
    if at is not None and at.tzinfo is not None and "pid" in running \
            and (now - at).total_seconds() > STALE_S:
        return None, (f"An eval started {running.get('started_at')} has not reported since "
                      f"{stamp}; it is taken to have stopped.")
    return shown, None


def history(home: Path) -> list[dict[str, Any]]:
    """The newest reports: stamp, start, configurations and their headline figures."""
    d = home / "eval"
    try:
        files = sorted(d.glob("report-*.json"), reverse=True)[:HISTORY]
    except OSError:
        return []
    out = []
    for f in files:
        stamp = f.stem.removeprefix("report-")
        report, error = _load(f)
        if report is None:
            out.append({"run": stamp, "error": error})
            continue
        try:
            out.append({"run": stamp, "started_at": report["started_at"],
                        "cases": len(report["cases"]), "stopped": report.get("stopped"),
                        "configs": [{"label": c["label"], "recall": c["summary"]["recall"],
                                     "precision": c["summary"]["precision"],
                                     "f1": c["summary"]["f1"]} for c in report["configs"]]})
        except FAILED as exc:
            out.append({"run": stamp, "error": f"another report version ({exc!r})"})
    return out


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Each configuration of run A against the one of the same label in run B (or, with one
    configuration each, those two), paired on the cases both ran."""
    out = []
    by_label = {c["label"]: c for c in b["configs"]}
    for c in a["configs"]:
        if c["label"] in by_label:
            out.append(compare(c, by_label[c["label"]]))
    if not out and len(a["configs"]) == 1 and len(b["configs"]) == 1:
        out.append(compare(a["configs"][0], b["configs"][0]))
    return out


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _pct(x: Any) -> str:
    return "–" if not isinstance(x, int | float) else f"{100 * x:.0f}%"


def history_html(runs: list[dict[str, Any]], shown: str | None) -> str:
    if not runs:
        return ""
    rows = []
    for r in runs:
        link = f"<a href='/eval?run={_e(r['run'])}'>{_e(r.get('started_at', r['run']))}</a>"
        if r.get("error"):
            rows.append(f"<tr><td>{link}</td><td colspan=2 class=muted>{_e(r['error'])}"
                        "</td></tr>")
            continue
        figs = "; ".join(f"{c['label']}: recall {_pct(c['recall'])}, precision "
                         f"{_pct(c['precision'])}, F1 {_pct(c['f1'])}" for c in r["configs"])
        mark = " (shown)" if r["run"] == shown else ""
        rows.append(f"<tr><td>{link}{_e(mark)}</td><td class=num>{_e(r['cases'])}</td>"
                    f"<td>{_e(figs)}" + (" · stopped early" if r.get("stopped") else "")
                    + "</td></tr>")
    valid = [r for r in runs if not r.get("error")]

    def options(pick: int) -> str:
        # The newest run against the one before it, not a run against itself.
        return "".join(f"<option value='{_e(r['run'])}'{' selected' if i == pick else ''}>"
                       f"{_e(r.get('started_at', r['run']))}</option>"
                       for i, r in enumerate(valid))
    form = ("<form method=get action='/eval' class=compare><label>Compare run <select name=a>"
            f"{options(0)}</select></label> <label>with <select name=b>{options(1)}</select>"
            "</label> <button type=submit>Compare</button></form>") if len(valid) > 1 else ""
    return ("<h2>Runs</h2><div class=wide><table><tr><th>started</th><th>cases</th>"
            "<th>configurations</th></tr>" + "".join(rows) + "</table></div>" + form)


def comparison_html(a: str, b: str, results: list[dict[str, Any]]) -> str:
    if not results:
        return (f"<h2>Run {_e(a)} against run {_e(b)}</h2><p class=muted>No configuration of "
                "one run matches one of the other by label.</p>")
    return (f"<h2>Run {_e(a)} against run {_e(b)}</h2><ul>"
            + "".join(f"<li>{_e(comparison_line(c)).replace('**', '')}</li>" for c in results)
            + "</ul>")


def _page(home: Path, params: dict[str, str]) -> dict[str, Any]:
    """Everything the page shows (runs in a thread: file reads)."""
    error = None
    note = None
    parts: list[str] = []
    shown = params.get("run")
    a, b = params.get("a"), params.get("b")
    if a and b:
        pa, pb = report_path(home, a), report_path(home, b)
        ra, ea = _load(pa) if pa else (None, "not a run")
        rb, eb = _load(pb) if pb else (None, "not a run")
        if ra is None or rb is None:
            error = f"cannot compare: {ea or eb or 'no such run'}"
        else:
            try:
                parts.append(comparison_html(a, b, compare_runs(ra, rb)))
            except FAILED as exc:
                error = f"cannot compare these runs (another report version: {exc!r})"
    path = report_path(home, shown) if shown else latest_path(home)
    report, load_error = _load(path) if path is not None else (None, "not a run")
    if shown and report is None:
        error = error or f"no run {shown}: {load_error or 'not found'}"
    error = error or load_error
    if report is not None:
        try:
            parts.append(html_fragment(report))
        except FAILED as exc:  # a report from another version, or not the eval's
            error = f"{path.name if path else 'report'} cannot be shown: {exc!r}"
    try:
        parts.append(history_html(history(home), shown))
    except FAILED as exc:
        error = error or f"the history cannot be shown: {exc!r}"
    running, _ = _load(running_path(home))
    running, note = running_state(running)
    if note:
        parts.insert(0, f"<p class=muted>{_e(note)}</p>")
    return {"fragment": "\n".join(p for p in parts if p) or None, "error": error,
            "running": running}


def register(router: Any) -> None:
    async def eval_page(request):
        params = {k: request.query_params.get(k, "") for k in ("run", "a", "b")}
        ctx = await asyncio.to_thread(_page, router.harness.home, params)
        return await router.render(request, "reviewer_eval.html", fragment=ctx["fragment"],
                                   error=ctx["error"], running=ctx["running"])

    async def eval_api(request):
        home = router.harness.home
        report, error = await asyncio.to_thread(_load, latest_path(home))
        running, _ = await asyncio.to_thread(_load, running_path(home))
        running, note = running_state(running)
        runs = await asyncio.to_thread(history, home)
        return router.json({"report": report, "error": error, "running": running,
                            "stale": note, "history": runs})

    router.add_page("/eval", eval_page, "Eval")
    router.add_route("/api/eval", eval_api)
