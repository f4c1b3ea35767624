"""The report's drill-down: per case a ``<details>`` block with every run, its trajectory
against the case's expectation turn by turn (path step by step, tool calls model turn by
model turn, delegations, the answer, a stop for a person), the first divergence marked, then
the decisions given, the steps as they happened and every check."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from pydantic import ValidationError

from .cases import EXPECT_ADAPTER, Expect, ExpectCall
from .matchers import describe_call
from .results import CaseRun, CaseSummary

__all__ = ["case_details"]


@dataclass(slots=True, frozen=True)
class _Row:
    """One line of the trajectory table."""

    section: str
    label: str
    expected: str
    reached: str
    same: bool | None
    """Whether they agree (``None``: nothing to compare)."""


def _check(run: CaseRun, name: str) -> bool | None:
    """Whether the run's check ``name`` held (``None``: not checked)."""
    return next((c.passed for c in run.checks if c.name == name), None)


def _path_rows(expect: Expect, run: CaseRun) -> list[_Row]:
    spec = expect.path_spec()
    if spec is None:
        return [_Row("path", f"step {i + 1}", "", agent, None) for i, agent in enumerate(run.path)]
    if spec.match != "exact":  # no step-by-step pairing: the two side by side
        return [_Row("path", spec.match, " → ".join(spec.agents), " → ".join(run.path) or
                     "(none)", _check(run, "path"))]
    rows = []
    for i in range(max(len(spec.agents), len(run.path))):
        want = spec.agents[i] if i < len(spec.agents) else "(end)"
        got = run.path[i] if i < len(run.path) else "(end)"
        rows.append(_Row("path", f"step {i + 1}", want, got, want == got))
    return rows


def _failed_turn(run: CaseRun) -> int | None:
    """The model turn (from 0) the tools check names, when it failed in ``strict`` mode."""
    detail = next((c.detail for c in run.checks if c.name == "tools" and not c.passed), "")
    found = re.match(r"model turn (\d+):", detail)
    return int(found.group(1)) - 1 if found else None


def _tool_rows(expect: Expect, run: CaseRun) -> list[_Row]:
    spec, made = expect.tools, run.calls
    if spec is None:
        return [_Row("tools", f"turn {i + 1}", "", ", ".join(turn), None)
                for i, turn in enumerate(made)]
    wanted = [[e] if isinstance(e, ExpectCall) else list(e) for e in spec.calls]
    if spec.mode != "strict":
        flat = [describe_call(e) for group in wanted for e in group]
        calls = [c for turn in made for c in turn]
        return [_Row("tools", spec.mode, ", ".join(flat), ", ".join(calls) or "(none)",
                     _check(run, "tools"))]
    check, failed = _check(run, "tools"), _failed_turn(run)
    rows = []
    for i in range(max(len(wanted), len(made))):
        want = ", ".join(map(describe_call, wanted[i])) if i < len(wanted) else "(end)"
        got = ", ".join(made[i]) if i < len(made) else "(end)"
        same: bool | None
        if check is None:  # an error before the checks: the tools called, by name
            same = i < len(wanted) and i < len(made) and sorted(
                e.name for e in wanted[i]) == sorted(c.split("(", 1)[0] for c in made[i])
        elif failed is None:
            same = True if check else None
        else:  # the turn the check names diverged; the later ones are not compared
            same = True if i < failed else False if i == failed else None
        rows.append(_Row("tools", f"turn {i + 1}", want, got, same))
    return rows


def _other_rows(expect: Expect, run: CaseRun) -> list[_Row]:
    rows = []
    if expect.pending is not None or run.pending:
        rows.append(_Row("person", "waits on", ", ".join(expect.pending or []) or "—",
                         ", ".join(run.pending) or "(did not stop)", _check(run, "pending")))
    if expect.delegations:
        made = [s.strip() for s in run.steps if " delegated to " in s]
        want = [f"{d.by + ' → ' if d.by else ''}{d.child}" for d in expect.delegations]
        rows.append(_Row("delegations", "children", ", ".join(want), ", ".join(made) or
                         "(none)", _check(run, "delegations")))
    if expect.final is not None:
        final = expect.final
        parts = [f"by {final.agent}"] if final.agent else []
        if final.equals is not None:
            parts.append(f"equals {json.dumps(final.equals, ensure_ascii=False)}")
        if final.contains is not None:
            wanted = [final.contains] if isinstance(final.contains, str) else final.contains
            parts.append("contains " + ", ".join(f"“{w}”" for w in wanted))
        if final.regex is not None:
            parts.append(f"matches /{final.regex}/")
        if final.schema is not None:
            parts.append("fits a schema")
        got = (f"by {run.last_agent}: " if run.last_agent else "") + (run.answer or "(none)")
        rows.append(_Row("answer", "final", "; ".join(parts), got, _check(run, "final")))
    return rows


def _expect(data: Any) -> Expect:
    try:
        return EXPECT_ADAPTER.validate_python(data or {})
    except ValidationError:  # a stored run from an older version: nothing to compare with
        return Expect()


def _table(rows: Sequence[_Row]) -> str:
    first = next((i for i, r in enumerate(rows) if r.same is False), None)
    out, section = ['<table class="trajectory"><tr><th></th><th>expected</th>'
                    '<th>reached</th></tr>'], ""
    for i, row in enumerate(rows):
        if row.section != section:
            section = row.section
            out.append(f'<tr class="section"><th colspan="3">{section}</th></tr>')
        css = "diverged" if i == first else "differs" if row.same is False else \
            "same" if row.same else ""
        mark = ' <span class="mark">◀ first divergence</span>' if i == first else ""
        out.append(f'<tr class="{css}"><td>{escape(row.label)}</td>'
                   f'<td>{escape(row.expected) or "—"}</td>'
                   f'<td>{escape(row.reached)}{mark}</td></tr>')
    out.append("</table>")
    return "".join(out)


def _run(expect: Expect, run: CaseRun) -> str:
    rows = [*_path_rows(expect, run), *_tool_rows(expect, run), *_other_rows(expect, run)]
    css = {"passed": "pass", "failed": "fail"}.get(run.status, "err")
    m = run.metrics
    head = (f'<summary><b class="{css}">run {run.repeat + 1}: {run.status}</b> · '
            f'{escape(" → ".join(run.path) or "(no path)")} · {m.seconds * 1000:.1f} ms · '
            f'{m.tokens} tok{" · stopped for " + escape(run.stopped) if run.stopped else ""}'
            "</summary>")
    body = [_table(rows)]
    if run.error:
        body.append(f'<p class="err">error: {escape(run.error)}</p>')
    if run.decisions:
        body.append('<p class="meta">decisions given: ' +
                    "; ".join(escape(d) for d in run.decisions) + "</p>")
    if run.steps:
        body.append('<ol class="steps">' + "".join(f"<li>{escape(s.strip())}</li>"
                                                   for s in run.steps) + "</ol>")
    checks = "".join(f'<li class="{"pass" if c.passed else "fail"}">{"✓" if c.passed else "✗"} '
                     f'{escape(c.name)}{"<pre>" + escape(c.detail) + "</pre>" if c.detail else ""}'
                     "</li>" for c in run.checks)
    if checks:
        body.append(f'<ul class="checks">{checks}</ul>')
    if run.session_id:
        body.append(f'<p class="meta">session {escape(run.session_id)}</p>')
    opened = " open" if not run.passed else ""
    return (f'<details class="run" data-status="{run.status}"{opened}>{head}'
            + "".join(body) + "</details>")


def case_details(case: CaseSummary, expected: Any) -> str:
    """``case``'s block: a summary line, then every run against ``expected`` (the case's
    ``expect`` as JSON data)."""
    expect = _expect(expected)
    passed = sum(r.passed for r in case.runs)
    css = "pass" if passed == len(case.runs) else "fail"
    opened = "" if passed == len(case.runs) else " open"  # the cases to look at, open
    return (f'<details class="case" id="case-{escape(case.case_id)}" '
            f'data-case="{escape(case.case_id)}"{opened}><summary><b>{escape(case.case_id)}</b> '
            f'<span class="{css}">{passed}/{len(case.runs)} passed</span></summary>'
            + "".join(_run(expect, r) for r in case.runs) + "</details>")
