"""The eval's results as people read them: JSON with every case and finding, a markdown summary
table, and an HTML report (per-configuration bars and a per-defect grid)."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any

from ..core.clock import utcnow
from .cases import Case
from .run import ConfigResult
from .score import TOLERANCE, score_case, summarize
from .validate import corpus_stats

REPORT_VERSION = 1


def build_report(cases: list[Case], results: list[ConfigResult], *, started_at: datetime,
                 estimate: dict[str, Any] | None = None,
                 judge: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    by_id = {c.id: c for c in cases}
    configs = []
    for res in results:
        scores = [score_case(by_id[r.case_id], r) for r in res.runs]
        verdicts = (judge or {}).get(res.config.label, {})
        rows = []
        for run, s in zip(res.runs, scores, strict=True):
            rows.append({
                "case": s.case_id, "language": s.language, "clean": s.clean,
                "error": run.error, "reviewed": run.reviewed, "cost_usd": round(run.cost_usd, 6),
                "prompt_tokens": run.prompt_tokens, "cached_tokens": run.cached_tokens,
                "output_tokens": run.output_tokens, "model_calls": run.model_calls,
                "wall_s": run.wall_s,
                "defects": [d.model_dump() for d in s.defects],
                "findings": [{"push": f.finding.push, "path": f.finding.path,
                              "line": f.finding.line, "start_line": f.finding.start_line,
                              "kind": f.kind, "target": f.target, "body": f.finding.body,
                              **({"judge": verdicts[key]} if (key := f"{s.case_id}:{f.target}")
                                 in verdicts and f.kind == "hit" else {})}
                             for f in s.findings]})
        summary = summarize(scores, res.runs)
        if verdicts:
            summary["judge"] = {"hits_judged": len(verdicts),
                                "describes_defect": sum(v.get("describes") is True
                                                        for v in verdicts.values())}
        configs.append({"label": res.config.label, "model": res.config.model,
                        "team": list(res.config.team), "stopped": res.stopped,
                        "wall_s": res.wall_s, "summary": summary, "cases": rows})
    return {"version": REPORT_VERSION,
            "started_at": started_at.astimezone(UTC).isoformat(timespec="seconds"),
            "finished_at": utcnow().isoformat(timespec="seconds"),
            "tolerance_lines": TOLERANCE, "corpus": corpus_stats(cases),
            "cases": [c.id for c in cases], "estimate": estimate, "configs": configs}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _rr(s: dict[str, Any]) -> str:
    r = s["re_review"]
    return (f"{r['new_found']}/{r['new_defects']} new, {r['fixes_recognised']}/{r['fixes']} "
            f"fixes, {r['repeats']} repeats"
            + (f", {r['resolved_unfixed']} wrongly resolved" if r["resolved_unfixed"] else ""))


def markdown(report: dict[str, Any]) -> str:
    head = ("| configuration | cases | recall | precision | F1 | FP/PR | findings on clean | "
            "decoy hits | re-review | cost/PR $ | tokens | cache hit | wall s | failures |")
    lines = [head, "|" + "|".join("---" for _ in range(head.count("|") - 1)) + "|"]
    for c in report["configs"]:
        s = c["summary"]
        lines.append(
            f"| {c['label']} | {s['cases']} | {_pct(s['recall'])} | {_pct(s['precision'])} | "
            f"{_num(s['f1'])} | {_num(s['false_positives_per_pr'])} | {s['findings_on_clean']} "
            f"| {s['decoy_hits']}/{s['decoys']} | {_rr(s)} | {_num(s['cost_per_pr_usd'], 4)} | "
            f"{s['prompt_tokens'] + s['output_tokens']} | {_pct(s['cache_hit'])} | "
            f"{s['wall_s']:.1f} | {s['failures']} |")
    out = "\n".join(lines)
    for key, title in (("by_category", "recall by category"),
                       ("by_severity", "recall by severity")):
        rows = sorted({k for c in report["configs"] for k in c["summary"][key]})
        if not rows:
            continue
        out += f"\n\n| {title} | " + " | ".join(c["label"] for c in report["configs"])
        out += " |\n|" + "|".join("---" for _ in range(len(report["configs"]) + 1)) + "|"
        for row in rows:
            cells = []
            for c in report["configs"]:
                x = c["summary"][key].get(row)
                cells.append(f"{_pct(x['recall'])} ({x['found']}/{x['defects']})" if x else "–")
            out += f"\n| {row} | " + " | ".join(cells) + " |"
    out += "\n"
    for c in report["configs"]:
        if c["stopped"]:
            out += f"\n{c['label']}: stopped early: {c['stopped']}\n"
    out += (f"\nA finding matches a defect on the same path within {report['tolerance_lines']} "
            "lines; scores compare configurations on this small synthetic corpus, they are not an "
            "absolute measure of review quality.\n")
    return out


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem}
th{background:#f5f5f5;text-align:left}td.num{text-align:right}
.hit{background:#dff3e3;text-align:center}.miss{background:#f8e0e0;text-align:center}
.muted{color:#777}pre{white-space:pre-wrap;margin:0}.wide{overflow-x:auto}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def html_fragment(report: dict[str, Any]) -> str:
    """The report's body (also shown inside the web UI); every text escaped."""
    cfgs = report["configs"]
    parts = [f"<p class='muted'>Started {_e(report['started_at'])}, finished "
             f"{_e(report['finished_at'])}; {len(report['cases'])} cases; tolerance "
             f"±{_e(report['tolerance_lines'])} lines. Scores compare configurations on a small "
             "synthetic corpus; they are not an absolute measure of review quality.</p>"]
    # Each table in a .wide box: on a phone it scrolls instead of widening the page.
    parts.append("<h2>Configurations</h2><div class=wide><table><tr><th>configuration</th>"
                 "<th colspan=3>recall · precision · F1</th><th>FP/PR</th>"
                 "<th>findings on clean</th>"
                 "<th>decoy hits</th><th>re-review</th><th>cost/PR $</th><th>cache hit</th>"
                 "<th>wall s</th><th>failures</th></tr>")
    for c in cfgs:
        s = c["summary"]
        # SVG attributes, not style: the web UI's CSP allows no inline styles. A grey track
        # under each bar, so a 0 % score reads as an empty bar, not as a missing cell; the label
        # inside the SVG, so it never wraps away from its bar.
        bars = "".join(
            f"<div><svg width='220' height='14' role='img' aria-label='{name}'><rect "
            f"width='120' height='12' fill='#e4e7eb'/><rect "
            f"width='{120 * (v or 0):.0f}' height='12' fill='{color}'/><text x='126' y='11' "
            f"font-size='12' fill='currentColor'>{name} {_pct(v)}</text></svg></div>"
            for color, name, v in (("#4a7bd0", "recall", s["recall"]),
                                   ("#3a9a5b", "precision", s["precision"]),
                                   ("#b0762a", "F1", s["f1"])))
        parts.append(
            f"<tr><td>{_e(c['label'])}"
            + (f"<div class='muted'>stopped: {_e(c['stopped'])}</div>" if c["stopped"] else "")
            + f"</td><td colspan=3>{bars}</td><td class=num>{_num(s['false_positives_per_pr'])}"
            f"</td><td class=num>{s['findings_on_clean']}</td><td class=num>{s['decoy_hits']}/"
            f"{s['decoys']}</td><td>{_e(_rr(s))}</td><td class=num>"
            f"{_num(s['cost_per_pr_usd'], 4)}</td><td class=num>{_pct(s['cache_hit'])}</td>"
            f"<td class=num>{s['wall_s']:.1f}</td><td class=num>{s['failures']}</td></tr>")
    parts.append("</table></div>")
    # Per-defect grid: which configuration found which defect (and in which review).
    parts.append("<h2>Defects</h2><div class=wide><table><tr><th>case</th><th>defect</th>"
                 "<th>category</th>"
                 "<th>severity</th>" + "".join(f"<th>{_e(c['label'])}</th>" for c in cfgs)
                 + "</tr>")
    found: dict[tuple[str, str], dict[str, Any]] = {}
    order: list[tuple[str, str, dict[str, Any]]] = []
    for i, c in enumerate(cfgs):
        for row in c["cases"]:
            for d in row["defects"]:
                key = (row["case"], d["id"])
                if key not in found:
                    found[key] = {}
                    order.append((row["case"], d["id"], d))
                found[key][i] = d["found_in"]
    for case_id, did, d in order:
        cells = "".join(
            (f"<td class=hit>✓ review {found[(case_id, did)][i]}</td>"
             if found[(case_id, did)].get(i) else
             ("<td class=miss>✗</td>" if i in found[(case_id, did)] else "<td>–</td>"))
            for i in range(len(cfgs)))
        parts.append(f"<tr><td>{_e(case_id)}</td><td title='{_e(d['description'])}'>{_e(did)}"
                     f"</td><td>{_e(d['category'])}</td><td>{_e(d['severity'])}</td>{cells}"
                     "</tr>")
    parts.append("</table></div><h2>Findings</h2>")
    for c in cfgs:
        parts.append(f"<details><summary>{_e(c['label'])}</summary><div class=wide><table>"
                     "<tr><th>case</th>"
                     "<th>review</th><th>where</th><th>kind</th><th>comment</th></tr>")
        for row in c["cases"]:
            if row["error"]:
                parts.append(f"<tr><td>{_e(row['case'])}</td><td colspan=4 class=miss>"
                             f"{_e(row['error'])}</td></tr>")
            for f in row["findings"]:
                where = f"{f['path']}:{f['start_line'] or f['line']}" + (
                    f"-{f['line']}" if f["start_line"] else "")
                parts.append(f"<tr><td>{_e(row['case'])}</td><td>{f['push']}</td>"
                             f"<td>{_e(where)}</td><td>{_e(f['kind'])}"
                             + (f" → {_e(f['target'])}" if f["target"] else "")
                             + f"</td><td><pre>{_e(f['body'][:600])}</pre></td></tr>")
        parts.append("</table></div></details>")
    return "\n".join(parts)


def html_page(report: dict[str, Any]) -> str:
    return ("<!doctype html><html><head><meta charset='utf-8'><title>dsh github-reviewer eval"
            f"</title><style>{_CSS}</style></head><body><h1>Review quality eval</h1>"
            f"{html_fragment(report)}</body></html>\n")
