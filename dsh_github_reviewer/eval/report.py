"""The eval's results as people read them: JSON with every case and finding, a markdown summary
table, and an HTML report (per-configuration bars and a per-defect grid)."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any

from ..core.clock import utcnow
from .cases import Case
from .compare import compare_all
from .run import ConfigResult
from .score import TOLERANCE, FindingScore, pair_key, score_case, summarize
from .validate import corpus_stats

REPORT_VERSION = 2
JUDGED_KEYS = ("found", "hits", "recall", "recall_ci95", "precision", "precision_ci95", "f1",
               "f1_ci95")


def _finding_row(f: FindingScore, j: FindingScore | None, verdicts: dict[str, Any],
                 case_id: str) -> dict[str, Any]:
    row: dict[str, Any] = {"push": f.finding.push, "path": f.finding.path,
                           "line": f.finding.line, "start_line": f.finding.start_line,
                           "kind": f.kind, "target": f.target, "body": f.finding.body}
    if f.target and f.kind != "decoy":
        verdict = verdicts.get(pair_key(case_id, f.finding, f.target))
        if verdict is not None:
            row["judge"] = verdict
    if j is not None:
        row["judged_kind"], row["judged_target"] = j.kind, j.target
    return row


def build_report(cases: list[Case], results: list[ConfigResult], *, started_at: datetime,
                 estimate: dict[str, Any] | None = None,
                 judge: dict[str, dict[str, Any]] | None = None,
                 stopped: str | None = None) -> dict[str, Any]:
    """The report of one run. ``judge``: config label -> ``pair_key`` -> verdict (then every
    figure is given twice: by location alone and judge-confirmed). ``stopped``: why the run
    ended early (Ctrl-C), if it did."""
    by_id = {c.id: c for c in cases}
    configs = []
    for res in results:
        verdicts = (judge or {}).get(res.config.label, {}) if judge is not None else None
        confirmed = ({k: v.get("describes") for k, v in verdicts.items()}
                     if verdicts is not None else None)
        scores = [score_case(by_id[r.case_id], r) for r in res.runs]
        judged = ([score_case(by_id[r.case_id], r, confirmed=confirmed) for r in res.runs]
                  if confirmed is not None else None)
        rows = []
        for i, (run, s) in enumerate(zip(res.runs, scores, strict=True)):
            js = judged[i] if judged is not None else None
            jfound = {d.id: d.found_in for d in js.defects} if js is not None else {}
            rows.append({
                "case": s.case_id, "title": by_id[s.case_id].title, "language": s.language,
                "clean": s.clean, "repeat": run.repeat, "error": run.error,
                "failed": run.error is not None, "reviewed": run.reviewed,
                "cost_usd": round(run.cost_usd, 6),
                "prompt_tokens": run.prompt_tokens, "cached_tokens": run.cached_tokens,
                "output_tokens": run.output_tokens, "model_calls": run.model_calls,
                "wall_s": run.wall_s,
                "defects": [d.model_dump() | ({"judged_found_in": jfound[d.id]}
                                              if js is not None else {}) for d in s.defects],
                "findings": [_finding_row(f, js.findings[k] if js is not None else None,
                                          verdicts or {}, s.case_id)
                             for k, f in enumerate(s.findings)]})
        summary = summarize(scores, res.runs)
        if judged is not None and verdicts is not None:
            js_summary = summarize(judged)
            summary["judged"] = {
                **{k: js_summary[k] for k in JUDGED_KEYS},
                "pairs_judged": len(verdicts),
                "pairs_confirmed": sum(v.get("describes") is True for v in verdicts.values()),
                "judge_errors": sum(v.get("describes") is None for v in verdicts.values())}
        configs.append({"label": res.config.label, "model": res.config.model,
                        "team": list(res.config.team), "axes": res.config.axes,
                        "stopped": res.stopped, "wall_s": res.wall_s, "summary": summary,
                        "cases": rows})
    comparisons = compare_all(configs)
    if judge is not None:
        comparisons += compare_all(configs, judged=True)
    return {"version": REPORT_VERSION,
            "started_at": started_at.astimezone(UTC).isoformat(timespec="seconds"),
            "finished_at": utcnow().isoformat(timespec="seconds"),
            "tolerance_lines": TOLERANCE, "max_width_slack_lines": 2 * TOLERANCE,
            "judge": judge is not None, "stopped": stopped,
            "corpus": corpus_stats(cases), "cases": [c.id for c in cases],
            "titles": {c.id: c.title for c in cases},
            "estimate": estimate, "configs": configs, "comparisons": comparisons}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _ci(x: list[float] | None, pct: bool = True) -> str:
    if not x:
        return ""
    return (f" [{100 * x[0]:.0f}–{100 * x[1]:.0f}%]" if pct
            else f" [{x[0]:.2f}–{x[1]:.2f}]")


def rate(s: dict[str, Any], key: str) -> str:
    """A figure with its 95 % interval, e.g. "69% [56–80%]" (F1 as a number)."""
    if key == "f1":
        return _num(s.get("f1")) + _ci(s.get("f1_ci95"), pct=False)
    return _pct(s.get(key)) + _ci(s.get(f"{key}_ci95"))


def _rr(s: dict[str, Any]) -> str:
    r = s["re_review"]
    return (f"{r['new_found']}/{r['new_defects']} new, {r['fixes_recognised']}/{r['fixes']} "
            f"fixes, {r['repeats']} repeats"
            + (f", {r['resolved_unfixed']} wrongly resolved" if r["resolved_unfixed"] else ""))


def judge_notes(report: dict[str, Any]) -> list[str]:
    """A line per configuration whose judge gave no verdict on some pairs (a provider error or
    an answer neither YES nor NO): such pairs count as not confirmed, so a judge that failed
    would otherwise read as a reviewer whose findings are all wrong."""
    out = []
    for c in report["configs"]:
        j = c["summary"].get("judged") or {}
        if j.get("judge_errors"):
            out.append(f"{c['label']}: the judge gave no verdict on {j['judge_errors']} of "
                       f"{j['pairs_judged']} pairs (an error or an unclear answer); they count "
                       "as not confirmed, so the judge-confirmed figures are too low")
    return out


def _judged_cells(s: dict[str, Any]) -> list[str]:
    j = s.get("judged")
    if not j:
        return ["–", "–", "–"]
    return [rate(j, "recall"), rate(j, "precision"), rate(j, "f1")]


def slice_rows(report: dict[str, Any], key: str) -> list[tuple[str, list[dict[str, Any] | None]]]:
    rows = sorted({k for c in report["configs"] for k in c["summary"].get(key, {})})
    return [(row, [c["summary"].get(key, {}).get(row) for c in report["configs"]])
            for row in rows]


def _slice_cell(x: dict[str, Any] | None) -> str:
    if not x:
        return "–"
    return (f"{rate(x, 'recall')} ({x['found']}/{x['defects']}); precision "
            f"{rate(x, 'precision')} (n={x.get('findings', 0)}); F1 {rate(x, 'f1')}")


def comparison_line(c: dict[str, Any]) -> str:
    f1 = ("–" if c["f1_diff"] is None else f"{c['f1_diff']:+.2f}" + _ci(c["f1_diff_ci95"],
                                                                         pct=False))
    return (f"{c['a']} vs {c['b']}{' (judge-confirmed)' if c['judged'] else ''}: "
            f"{c['cases']} cases, {c['defects']} defects; found only by the first "
            f"{c['found_by_a_only']}, only by the second {c['found_by_b_only']} (exact McNemar "
            f"p = {c['mcnemar_p']:.3g}); F1 difference {f1} (permutation p = "
            f"{c.get('f1_permutation_p', 1.0):.3g}): **{c['verdict']}**")


def markdown(report: dict[str, Any]) -> str:
    judged = report.get("judge", False)
    head = ("| configuration | cases | recall [95% CI] | precision [95% CI] | F1 [95% CI] | "
            + ("judged recall | judged precision | judged F1 | " if judged else "")
            + "FP/PR | findings on clean | decoy hits | re-review | cost/PR $ | tokens | "
            "cache hit | wall s | failures |")
    lines = [head, "|" + "|".join("---" for _ in range(head.count("|") - 1)) + "|"]
    for c in report["configs"]:
        s = c["summary"]
        n = s["cases"] if s.get("repeats", 1) == 1 else f"{s['cases']} ({s['repeats']} runs)"
        lines.append(
            f"| {c['label']} | {n} | {rate(s, 'recall')} (n={s['defects']}) | "
            f"{rate(s, 'precision')} (n={s['findings']}) | {rate(s, 'f1')} | "
            + (" | ".join(_judged_cells(s)) + " | " if judged else "")
            + f"{_num(s['false_positives_per_pr'])} | {s['findings_on_clean']} "
            f"| {s['decoy_hits']}/{s['decoys']} | {_rr(s)} | {_num(s['cost_per_pr_usd'], 4)} | "
            f"{s['prompt_tokens'] + s['output_tokens']} | {_pct(s['cache_hit'])} | "
            f"{s['wall_s']:.1f} | {s['failures']} |")
    out = "\n".join(lines)
    for key, title in (("by_category", "by category"), ("by_severity", "by severity"),
                       ("by_language", "by language")):
        rows = slice_rows(report, key)
        if not rows:
            continue
        out += f"\n\n| {title} | " + " | ".join(c["label"] for c in report["configs"])
        out += " |\n|" + "|".join("---" for _ in range(len(report["configs"]) + 1)) + "|"
        for row, cells in rows:
            out += f"\n| {row} | " + " | ".join(_slice_cell(x) for x in cells) + " |"
    out += "\n"
    if report.get("comparisons"):
        out += "\nPaired comparisons (the same cases):\n"
        out += "".join(f"\n* {comparison_line(c)}" for c in report["comparisons"]) + "\n"
    if judged:
        for note in judge_notes(report):
            out += f"\n**{note}**\n"
        out += "\nJudge verdicts on findings near a defect:\n"
        for c in report["configs"]:
            for row in c["cases"]:
                for f in row["findings"]:
                    if "judge" in f:
                        v = f["judge"].get("describes")
                        word = {True: "YES", False: "NO"}.get(v, "no answer")
                        out += (f"\n* {c['label']} · {row['case']} · {f['target']} "
                                f"({f['path']}:{f['line']}): {word}")
        out += "\n"
    failed = [(c["label"], r) for c in report["configs"] for r in c["cases"] if r["error"]]
    if failed:
        out += "\nFailed cases (no review posted; their defects count as missed):\n"
        out += "".join(f"\n* {label} · {r['case']}: {r['error']}" for label, r in failed)
        out += "\n"
    for c in report["configs"]:
        if c["stopped"]:
            out += f"\n{c['label']}: stopped early: {c['stopped']}\n"
    if report.get("stopped"):
        out += f"\nThe run was stopped: {report['stopped']}; the report is partial.\n"
    out += (f"\nA finding matches a defect on the same path within {report['tolerance_lines']} "
            f"lines when it spans at most the defect's lines plus "
            f"{report.get('max_width_slack_lines', 2 * report['tolerance_lines'])}; intervals "
            "are 95 % (Wilson; F1 by bootstrap over cases). Scores compare configurations on "
            "this synthetic corpus, they are not an absolute measure of review quality.\n")
    return out


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem}
th{background:#f5f5f5;text-align:left}td.num{text-align:right}
.hit{background:#dff3e3;text-align:center}.miss{background:#f8e0e0;text-align:center}
.fail{background:#eee;color:#555;text-align:center;font-style:italic}
.muted{color:#777}pre{white-space:pre-wrap;margin:0}.wide{overflow-x:auto}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _bar(color: str, name: str, v: float | None, ci: list[float] | None) -> str:
    # SVG attributes, not style: the web UI's CSP allows no inline styles. A grey track under
    # each bar, so a 0 % score reads as an empty bar, not as a missing cell; the 95 % interval
    # as a thin dark line over it; the label inside the SVG, so it never wraps away.
    whisker = (f"<rect x='{120 * ci[0]:.0f}' y='5' width='{max(1, 120 * (ci[1] - ci[0])):.0f}' "
               "height='2' fill='#333'/>" if ci else "")
    label = f"{name} {_pct(v) if name != 'F1' else _num(v)}{_ci(ci, pct=name != 'F1')}"
    return (f"<div><svg width='300' height='14' role='img' aria-label='{name}'><rect "
            f"width='120' height='12' fill='#e4e7eb'/><rect "
            f"width='{120 * (v or 0):.0f}' height='12' fill='{color}'/>{whisker}<text x='126' "
            f"y='11' font-size='12' fill='currentColor'>{_e(label)}</text></svg></div>")


def _slice_table(report: dict[str, Any], key: str, title: str) -> str:
    rows = slice_rows(report, key)
    if not rows:
        return ""
    cfgs = report["configs"]
    out = [f"<h3>{_e(title)}</h3><div class=wide><table><tr><th>{_e(key[3:])}</th>"
           + "".join(f"<th>{_e(c['label'])}</th>" for c in cfgs) + "</tr>"]
    for row, cells in rows:
        out.append(f"<tr><td>{_e(row)}</td>" + "".join(
            f"<td>{_e(_slice_cell(x))}</td>" for x in cells) + "</tr>")
    return "".join(out) + "</table></div>"


def html_fragment(report: dict[str, Any]) -> str:
    """The report's body (also shown inside the web UI); every text escaped."""
    cfgs = report["configs"]
    judged = report.get("judge", False)
    titles = report.get("titles", {})
    parts = [f"<p class='muted'>Started {_e(report['started_at'])}, finished "
             f"{_e(report['finished_at'])}; {len(report['cases'])} cases; a finding matches "
             f"within ±{_e(report['tolerance_lines'])} lines and spans at most the defect plus "
             f"{_e(report.get('max_width_slack_lines', 2 * report['tolerance_lines']))} lines. "
             "Intervals are 95 % (Wilson; F1 by bootstrap over cases). Scores compare "
             "configurations on a small synthetic corpus; they are not an absolute measure of "
             "review quality.</p>"]
    if report.get("stopped"):
        parts.append(f"<p class=error>The run was stopped: {_e(report['stopped'])}; the report "
                     "is partial.</p>")
    # Each table in a .wide box: on a phone it scrolls instead of widening the page.
    parts.append("<h2>Configurations</h2><div class=wide><table><tr><th>configuration</th>"
                 "<th colspan=3>recall · precision · F1 (location)</th>"
                 + ("<th colspan=3>judge-confirmed</th>" if judged else "")
                 + "<th>FP/PR</th><th>findings on clean</th>"
                 "<th>decoy hits</th><th>re-review</th><th>cost/PR $</th><th>cache hit</th>"
                 "<th>wall s</th><th>failed cases</th></tr>")
    for c in cfgs:
        s = c["summary"]
        bars = "".join(_bar(color, name, s[k], s.get(f"{k}_ci95")) for color, name, k in (
            ("#4a7bd0", "recall", "recall"), ("#3a9a5b", "precision", "precision"),
            ("#b0762a", "F1", "f1")))
        j = s.get("judged")
        jbars = "".join(_bar(color, name, j[k], j.get(f"{k}_ci95")) for color, name, k in (
            ("#4a7bd0", "recall", "recall"), ("#3a9a5b", "precision", "precision"),
            ("#b0762a", "F1", "f1"))) if j else "–"
        n = (f"<div class=muted>n = {s['defects']} defects, {s['findings']} findings, "
             f"{s['cases']} case runs</div>")
        parts.append(
            f"<tr><td>{_e(c['label'])}"
            + (f"<div class='muted'>stopped: {_e(c['stopped'])}</div>" if c["stopped"] else "")
            + f"</td><td colspan=3>{bars}{n}</td>"
            + (f"<td colspan=3>{jbars}</td>" if judged else "")
            + f"<td class=num>{_num(s['false_positives_per_pr'])}"
            f"</td><td class=num>{s['findings_on_clean']}</td><td class=num>{s['decoy_hits']}/"
            f"{s['decoys']}</td><td>{_e(_rr(s))}</td><td class=num>"
            f"{_num(s['cost_per_pr_usd'], 4)}</td><td class=num>{_pct(s['cache_hit'])}</td>"
            f"<td class=num>{s['wall_s']:.1f}</td><td class=num>{s['failures']}</td></tr>")
    parts.append("</table></div>")
    parts += [f"<p><strong>{_e(note)}</strong></p>" for note in judge_notes(report)]
    if report.get("comparisons"):
        parts.append("<h2>Paired comparisons</h2><ul>" + "".join(
            f"<li>{_e(comparison_line(c)).replace('**', '')}</li>"
            for c in report["comparisons"]) + "</ul>")
    parts.append(_slice_table(report, "by_category", "By category"))
    parts.append(_slice_table(report, "by_severity", "By severity"))
    parts.append(_slice_table(report, "by_language", "By language"))
    # Per-defect grid: which configuration found which defect (and in which review); a case
    # whose review failed is marked apart from a defect the review missed.
    parts.append("<h2>Defects</h2><div class=wide><table><tr><th>case</th><th>defect</th>"
                 "<th>category</th>"
                 "<th>severity</th>" + "".join(f"<th>{_e(c['label'])}</th>" for c in cfgs)
                 + "</tr>")
    cells: dict[tuple[str, str], dict[int, list[str]]] = {}
    order: list[tuple[str, str, dict[str, Any]]] = []
    for i, c in enumerate(cfgs):
        for row in c["cases"]:
            for d in row["defects"]:
                key = (row["case"], d["id"])
                if key not in cells:
                    cells[key] = {}
                    order.append((row["case"], d["id"], d))
                if row["error"]:
                    mark = "failed"
                elif d["found_in"]:
                    mark = f"review {d['found_in']}"
                    if judged and d.get("judged_found_in") is None:
                        mark += " (judge: no)"
                else:
                    mark = "missed"
                if c["summary"].get("repeats", 1) > 1:  # which run, not "review 1, review 1"
                    mark = f"run {row.get('repeat', 1)}: {mark}"
                cells[key].setdefault(i, []).append(mark)
    for case_id, did, d in order:
        tds = []
        for i in range(len(cfgs)):
            marks = cells[(case_id, did)].get(i)
            if not marks:
                tds.append("<td>–</td>")
            elif all(m.endswith("failed") for m in marks):
                tds.append("<td class=fail>failed (no review)</td>")
            elif all(m.endswith(("missed", "failed")) for m in marks):
                tds.append("<td class=miss>✗ missed</td>")
            else:
                tds.append(f"<td class=hit>✓ {_e(', '.join(marks))}</td>")
        parts.append(f"<tr><td title='{_e(titles.get(case_id, ''))}'>{_e(case_id)}"
                     f"<div class=muted>{_e(titles.get(case_id, ''))}</div></td>"
                     f"<td title='{_e(d['description'])}'>{_e(did)}"
                     f"</td><td>{_e(d['category'])}</td><td>{_e(d['severity'])}</td>"
                     f"{''.join(tds)}</tr>")
    parts.append("</table></div><h2>Findings</h2>")
    for c in cfgs:
        parts.append(f"<details><summary>{_e(c['label'])}</summary><div class=wide><table>"
                     "<tr><th>case</th>"
                     "<th>review</th><th>where</th><th>kind</th>"
                     + ("<th>judge</th>" if judged else "") + "<th>comment</th></tr>")
        for row in c["cases"]:
            if row["error"]:
                parts.append(f"<tr><td>{_e(row['case'])}</td><td colspan=4 class=fail>"
                             f"failed: {_e(row['error'])}</td></tr>")
            for f in row["findings"]:
                where = f"{f['path']}:{f['start_line'] or f['line']}" + (
                    f"-{f['line']}" if f["start_line"] else "")
                verdict = ""
                if judged:
                    v = f.get("judge", {}).get("describes") if "judge" in f else "–"
                    verdict = "<td>" + _e({True: "YES", False: "NO", None: "no answer"}.get(
                        v, "–") if v != "–" else "–") + "</td>"
                parts.append(f"<tr><td>{_e(row['case'])}</td><td>{f['push']}</td>"
                             f"<td>{_e(where)}</td><td>{_e(f['kind'])}"
                             + (f" → {_e(f['target'])}" if f["target"] else "")
                             + f"</td>{verdict}<td><pre>{_e(f['body'][:600])}</pre></td></tr>")
        parts.append("</table></div></details>")
    return "\n".join(parts)


def html_page(report: dict[str, Any]) -> str:
    return ("<!doctype html><html><head><meta charset='utf-8'><title>dsh github-reviewer eval"
            f"</title><style>{_CSS}</style></head><body><h1>Review quality eval</h1>"
            f"{html_fragment(report)}</body></html>\n")
