"""The HTML report of an eval run: one self-contained page (no script, no CDN) with its figures
drawn as inline SVG: pass rates as bars, the routing confusion matrix as a heat map, and the
token and latency (ms) distributions as histograms; every failing run; and per case a
drill-down into each run's trajectory against the expectation."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from html import escape

from .baseline import CaseDelta
from .confusion import ConfusionMatrix
from .drilldown import case_details
from .results import EvalResult

__all__ = ["html_report"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1100px;
color:#1d2330;background:#fafbfc;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.meta{color:#5b6475}.kpis{display:flex;gap:12px;margin:16px 0}
.kpi{background:#fff;border:1px solid #e3e6ec;border-radius:8px;padding:10px 16px;min-width:120px}
.kpi b{display:block;font-size:22px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:16px}
figure{background:#fff;border:1px solid #e3e6ec;border-radius:8px;margin:0;padding:12px;
overflow-x:auto}
figcaption{font-weight:600;margin-bottom:6px}svg text{font:12px system-ui,sans-serif}
table{border-collapse:collapse;width:100%;background:#fff}
td,th{border-bottom:1px solid #e3e6ec;padding:6px 8px;text-align:left;vertical-align:top}
pre{margin:0;white-space:pre-wrap;font:12px ui-monospace,monospace}
.pass{color:#1a7f37}.fail{color:#c62828}.err{color:#b26a00}
details.case{background:#fff;border:1px solid #e3e6ec;border-radius:8px;margin:6px 0;
padding:6px 12px}details.run{margin:8px 0 8px 12px}summary{cursor:pointer}
table.trajectory td,table.trajectory th{font-size:13px}
tr.section th{background:#f3f4f7;font-weight:600}tr.same td:last-child{color:#1a7f37}
tr.differs td:last-child{color:#c62828}tr.diverged{background:#fdecea}
tr.diverged td:last-child{color:#c62828;font-weight:600}.mark{font-size:12px}
ol.steps,ul.checks{font:13px ui-monospace,monospace;margin:6px 0}ul.checks{list-style:none;
padding-left:12px}
"""


def _color(rate: float) -> str:
    """Red through amber to green for a pass rate."""
    hue = int(120 * rate)
    return f"hsl({hue},62%,42%)"


def _bars(result: EvalResult) -> str:
    cases = result.cases
    row, label_w, bar_w = 22, 200, 250  # fits a figure's width: text is never scaled down
    height = row * len(cases) + 10
    parts = [f'<svg id="pass-rates" role="img" width="{label_w + bar_w + 60}" '
             f'height="{height}" viewBox="0 0 {label_w + bar_w + 60} {height}">']
    for i, case in enumerate(cases):
        y = 5 + i * row
        rate = case.pass_rate
        width = max(2, int(bar_w * rate))
        parts.append(
            f'<g class="bar" data-case="{escape(case.case_id)}" data-rate="{rate:.3f}">'
            f'<title>{escape(case.case_id)}: {rate:.0%} of {len(case.runs)} run(s)</title>'
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">'
            f'{escape(case.case_id[:32])}</text>'
            f'<rect x="{label_w}" y="{y + 2}" width="{bar_w}" height="{row - 6}" '
            f'fill="#eef0f4"/>'
            f'<rect x="{label_w}" y="{y + 2}" width="{width}" height="{row - 6}" '
            f'fill="{_color(rate)}"/>'
            f'<text x="{label_w + bar_w + 6}" y="{y + 14}">{rate:.0%}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _heatmap(matrix: ConfusionMatrix) -> str:
    if not matrix.counts:
        return '<p class="meta">No case names the agent it should end with.</p>'
    cell, left, top = 44, 110, 90
    rows, cols = matrix.expected, matrix.reached
    width, height = left + cell * len(cols) + 50, top + cell * len(rows) + 10
    parts = [f'<svg id="confusion" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             f'<text x="{left}" y="14" class="axis">reached →</text>',
             f'<text x="4" y="{top - 6}" class="axis">expected ↓</text>']
    for j, name in enumerate(cols):
        x = left + j * cell + cell // 2
        parts.append(f'<text transform="translate({x},{top - 8}) rotate(-45)">'
                     f'{escape(name)}</text>')
    for i, expected in enumerate(rows):
        y = top + i * cell
        total = matrix.row_total(expected) or 1
        parts.append(f'<text x="{left - 6}" y="{y + cell // 2 + 4}" text-anchor="end">'
                     f'{escape(expected)}</text>')
        for j, reached in enumerate(cols):
            n = matrix.count(expected, reached)
            share = n / total
            hue = 140 if expected == reached else 4
            fill = f"hsl({hue},60%,{96 - 50 * share:.0f}%)" if n else "#f3f4f7"
            ink = "#fff" if share > 0.55 else "#1d2330"
            parts.append(
                f'<g class="cell" data-expected="{escape(expected)}" '
                f'data-reached="{escape(reached)}" data-count="{n}">'
                f'<title>expected {escape(expected)}, reached {escape(reached)}: {n}</title>'
                f'<rect x="{left + j * cell}" y="{y}" width="{cell - 2}" height="{cell - 2}" '
                f'fill="{fill}"/>'
                f'<text x="{left + j * cell + cell // 2 - 1}" y="{y + cell // 2 + 4}" '
                f'text-anchor="middle" fill="{ink}">{n if n else ""}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _histogram(element_id: str, values: Sequence[float], unit: str, bins: int = 12) -> str:
    if not values:
        return f'<p class="meta" id="{element_id}">No figures.</p>'
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - low) / span * bins))] += 1
    width, height, base = 480, 170, 140
    bar = (width - 20) / bins
    peak = max(counts)
    parts = [f'<svg id="{element_id}" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">']
    for i, n in enumerate(counts):
        h = int((base - 10) * n / peak)
        lo = low + span * i / bins
        parts.append(f'<g class="bin" data-count="{n}"><title>{lo:.4g}–'
                     f'{lo + span / bins:.4g} {unit}: {n} run(s)</title>'
                     f'<rect x="{10 + i * bar:.1f}" y="{base - h}" width="{bar - 2:.1f}" '
                     f'height="{h}" fill="#4c6ef5"/></g>')
    parts.append(f'<line x1="10" y1="{base}" x2="{width - 10}" y2="{base}" stroke="#8a93a6"/>'
                 f'<text x="10" y="{base + 18}">{low:.4g} {unit}</text>'
                 f'<text x="{width - 10}" y="{base + 18}" text-anchor="end">{high:.4g} '
                 f'{unit}</text></svg>')
    return "".join(parts)


def _figures(result: EvalResult, metric: str, unit: str, scale: float = 1.0) -> str:
    d = result.distribution(metric)
    if d is None:
        return ""
    mean, p50, p90, low, high = (v * scale for v in (d.mean, d.p50, d.p90, d.min, d.max))
    return (f'<p class="meta">mean {mean:.4g} {unit} · median {p50:.4g} {unit} · p90 '
            f'{p90:.4g} {unit} · min {low:.4g} {unit} · max {high:.4g} {unit}</p>')


def _failures(result: EvalResult) -> str:
    rows = []
    for case in result.cases:
        for run in case.failed():
            failure = run.first_failure()
            what = run.error if run.status == "error" else \
                f"{failure.name}:\n{failure.detail}" if failure else ""
            css = "err" if run.status == "error" else "fail"
            rows.append(f'<tr><td><a href="#case-{escape(case.case_id)}">'
                        f'{escape(case.case_id)}</a></td><td class="{css}">{run.status} '
                        f'(run {run.repeat + 1})</td><td><pre>{escape(what)}</pre></td>'
                        f'<td>{escape(run.session_id)}</td></tr>')
    if not rows:
        return '<p class="pass">Every case run passed.</p>'
    return ('<table id="failures"><tr><th>case</th><th>status</th><th>first divergence</th>'
            '<th>session</th></tr>' + "".join(rows) + "</table>")


def _baseline(deltas: Sequence[CaseDelta]) -> str:
    def rate(v: float | None) -> str:
        return "—" if v is None else f"{v:.0%}"

    def num(v: float | None, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    def ms(v: float | None) -> str:
        return num(None if v is None else v * 1000, ".1f")

    rows = []
    for d in deltas:
        css = {"better": "pass", "worse": "fail"}.get(d.verdict, "")
        path = (f"{escape(' → '.join(d.path[0]))}<br>→ {escape(' → '.join(d.path[1]))}"
                if d.path_changed else "same")
        rows.append(f'<tr><td>{escape(d.case_id)}</td><td class="{css}">{d.verdict}</td>'
                    f'<td>{rate(d.pass_rate[0])} → {rate(d.pass_rate[1])}</td>'
                    f'<td>{path}</td>'
                    f'<td>{num(d.tokens[0], ".0f")} → {num(d.tokens[1], ".0f")}</td>'
                    f'<td>{ms(d.seconds[0])} → {ms(d.seconds[1])}</td></tr>')
    return ('<h2>Against the baseline</h2><table id="baseline"><tr><th>case</th><th></th>'
            '<th>pass rate</th><th>path</th><th>tokens</th><th>ms</th></tr>'
            + "".join(rows) + "</table>")


def html_report(result: EvalResult, *, baseline: Sequence[CaseDelta] = ()) -> str:
    """The report page of ``result`` (with a comparison, given ``baseline``'s deltas)."""
    matrix = ConfusionMatrix.of(result.runs)
    when = datetime.datetime.fromtimestamp(result.started, datetime.UTC).strftime(
        "%Y-%m-%d %H:%M UTC") if result.started else ""
    errors = sum(r.status == "error" for r in result.runs)
    cost = result.distribution("cost")
    kpis = [("pass rate", f"{result.pass_rate:.0%}"), ("case runs", str(len(result.runs))),
            ("cases", str(len(result.cases))), ("errors", str(errors)),
            ("stopped for a person", str(sum(bool(r.stopped) for r in result.runs))),
            ("routing accuracy", f"{matrix.accuracy:.0%}" if matrix.counts else "—"),
            ("cost", f"${cost.mean * cost.count:.4f}" if cost else "—")]
    tokens = [float(r.metrics.tokens) for r in result.runs if r.status != "error"]
    seconds = [r.metrics.seconds * 1000 for r in result.runs if r.status != "error"]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>relayrace eval: {escape(result.team)}</title><style>{_CSS}</style></head><body>
<h1>Eval of {escape(result.team)}</h1>
<p class="meta">run {escape(result.run_id)} · {escape(result.cases_file)} · {result.repeat}
repeat(s){' · model ' + escape(result.model) if result.model else ''} · {escape(when)} ·
{result.seconds * 1000:.0f} ms</p>
<div class="kpis">{"".join(f'<div class="kpi"><b>{v}</b>{k}</div>' for k, v in kpis)}</div>
<div class="grid">
<figure><figcaption>Pass rate per case</figcaption>{_bars(result)}</figure>
<figure><figcaption>Routing: expected agent × agent reached ({matrix.summary()})</figcaption>
{_heatmap(matrix)}
</figure>
<figure><figcaption>Tokens per case run</figcaption>{_histogram("tokens", tokens, "tok")}
{_figures(result, "tokens", "tok")}</figure>
<figure><figcaption>Latency per case run</figcaption>{_histogram("latency", seconds, "ms")}
{_figures(result, "seconds", "ms", 1000)}</figure>
</div>
<h2>Failures</h2>{_failures(result)}
<h2>Cases</h2>
<p class="meta">Each run against its case's expectation, turn by turn; the first divergence
is marked.</p>
<div id="cases">{"".join(case_details(c, result.expected.get(c.case_id)) for c in result.cases)}
</div>
{_baseline(baseline) if baseline else ""}
</body></html>
"""
