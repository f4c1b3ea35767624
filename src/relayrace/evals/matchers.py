"""The matchers: each compares one expectation of a case with a trajectory, and says where
it diverged.

Tool calls follow ``agentevals``' trajectory match modes (strict, unordered, subset,
superset) and argument modes (exact, ignore, subset, superset); calls are paired one to one
with a maximum matching, so an argument matcher that admits several calls never steals the
pairing another call needed.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import jsonschema

from relayrace.core.events import DelegationEvent

from .cases import (
    ArgsMode,
    ExpectCall,
    ExpectDelegation,
    ExpectFinal,
    ExpectLimits,
    ExpectPath,
    ExpectTools,
    Match,
)
from .patterns import compile_pattern
from .results import Check, Metrics
from .trajectory import CallMade

__all__ = [
    "args_match",
    "call_matches",
    "describe_call",
    "match_delegations",
    "match_final",
    "match_limits",
    "match_path",
    "match_tools",
    "match_value",
    "path_diff",
]

A = TypeVar("A")
B = TypeVar("B")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _data(value: Any) -> Any:
    """JSON data of ``value``: text holding JSON is parsed, other text stays text."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _short(value: Any, limit: int = 80) -> str:
    text = _text(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def match_value(match: Match, value: Any) -> str | None:
    """``None`` if ``value`` passes every check of ``match``, else why not."""
    if match.equals is not None and _data(value) != match.equals and value != match.equals:
        return f"expected {_short(match.equals)}, got {_short(value)}"
    if match.contains is not None:
        wanted = [match.contains] if isinstance(match.contains, str) else match.contains
        text = _text(value).lower()
        missing = [w for w in wanted if w.lower() not in text]
        if missing:
            return f"{_short(value)} does not contain {', '.join(map(repr, missing))}"
    if match.regex is not None:
        try:
            found = compile_pattern(match.regex).search(_text(value))
        except ValueError as exc:  # a Match built without validation
            return str(exc)
        if found is None:
            return f"{_short(value)} does not match /{match.regex}/"
    if match.schema is not None:
        try:
            validator = _validator(json.dumps(match.schema, sort_keys=True))
        except jsonschema.SchemaError as exc:
            return f"the schema is invalid: {exc.message}"
        error = jsonschema.exceptions.best_match(validator.iter_errors(_data(value)))
        if error is not None:
            at = "/".join(str(p) for p in error.absolute_path)
            return f"{_short(value)} does not fit the schema{f' at {at}' if at else ''}: " \
                   f"{error.message}"
    return None


@functools.lru_cache(maxsize=256)
def _validator(schema: str) -> Any:
    """A checked validator per schema (checking a schema costs far more than using it)."""
    loaded = json.loads(schema)
    cls = jsonschema.validators.validator_for(loaded)
    cls.check_schema(loaded)
    return cls(loaded)


_MISSING = object()


def _get(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return _MISSING
        data = data[part]
    return data


def _drop(data: dict[str, Any], dotted: str) -> None:
    *parents, last = dotted.split(".")
    node: Any = data
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


def _compare(actual: Any, expected: Any, mode: ArgsMode) -> bool:
    if mode == "ignore":
        return True
    if mode == "exact" or not isinstance(actual, dict) or not isinstance(expected, dict):
        return bool(actual == expected)
    if mode == "subset":  # every argument given was expected, with that value
        return all(k in expected and expected[k] == v for k, v in actual.items())
    return all(k in actual and actual[k] == v for k, v in expected.items())  # superset


def args_match(actual: Any, expected: ExpectCall, default: ArgsMode = "exact") -> bool:
    """Whether ``actual`` arguments fit ``expected``'s: its ``where`` checks hold, and the
    other arguments compare as its ``args_match`` (else ``default``) says."""
    for dotted, match in expected.where.items():
        found = _get(actual, dotted)
        if found is _MISSING or match_value(match, found) is not None:
            return False
    if expected.args is None:
        return True
    mode = expected.args_match or default
    if expected.where and isinstance(actual, dict):
        actual, wanted = copy.deepcopy(actual), copy.deepcopy(expected.args)
        for dotted in expected.where:
            _drop(actual, dotted)
            _drop(wanted, dotted)
        return _compare(actual, wanted, mode)
    return _compare(actual, expected.args, mode)


def call_matches(call: CallMade, expected: ExpectCall, default: ArgsMode = "exact") -> bool:
    """Whether ``call`` is the call ``expected`` describes."""
    return (call.name == expected.name
            and (expected.agent is None or expected.agent == call.agent)
            and args_match(call.args, expected, default))


def _matching(left: Sequence[A], right: Sequence[B],
              fits: Callable[[A, B], bool]) -> dict[int, int]:
    """A maximum one-to-one pairing of ``left`` with ``right`` items that fit: right -> left."""
    edges = [[j for j, r in enumerate(right) if fits(item, r)] for item in left]
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(left)):
        place(i, set())
    return owner


def describe_call(expected: ExpectCall) -> str:
    """An expected call as ``name(args)`` (``name()`` when any arguments do)."""
    args = "" if expected.args is None else _short(expected.args, 60)
    return f"{expected.name}({args})"


def match_tools(turns: Sequence[Sequence[CallMade]], spec: ExpectTools) -> Check:
    """The tool calls made (per model turn) against ``spec``, in its mode."""
    mode, default = spec.mode, spec.args
    fits: Callable[[CallMade, ExpectCall], bool] = lambda c, e: call_matches(c, e, default)  # noqa: E731
    wanted = [[e] if isinstance(e, ExpectCall) else list(e) for e in spec.calls]
    if mode == "strict":
        for i in range(max(len(turns), len(wanted))):
            got = list(turns[i]) if i < len(turns) else []
            want = wanted[i] if i < len(wanted) else []
            pairs = _matching(got, want, fits)
            if len(got) != len(want) or len(pairs) != len(want):
                shown = ", ".join(map(str, got)) or "no more calls"
                expect = ", ".join(map(describe_call, want)) or "no more calls"
                return Check("tools", False, f"model turn {i + 1}: expected {expect}; got "
                                             f"{shown}")
        return Check("tools", True)
    made = [c for turn in turns for c in turn]
    flat = [e for group in wanted for e in group]
    pairs = _matching(made, flat, fits)
    missing = [describe_call(e) for j, e in enumerate(flat) if j not in pairs]
    paired = set(pairs.values())
    extra = [str(c) for i, c in enumerate(made) if i not in paired]
    needs_all = mode in ("unordered", "superset")
    allows_extra = mode == "superset"
    problems = []
    if needs_all and missing:
        problems.append(f"not called: {', '.join(missing)}")
    if not allows_extra and extra:
        problems.append(f"not expected: {', '.join(extra)}")
    if problems:
        return Check("tools", False, f"{mode}: " + "; ".join(problems))
    return Check("tools", True)


def path_diff(expected: Sequence[str], actual: Sequence[str]) -> str:
    """The first divergence of two agent paths, as diff lines: the shared start, then the
    expected agent (``-``) against the one reached (``+``)."""
    i = 0
    while i < len(expected) and i < len(actual) and expected[i] == actual[i]:
        i += 1
    lines = [f"  {a}" for a in actual[:i]]
    lines.append(f"- {expected[i] if i < len(expected) else '(end)'}")
    lines.append(f"+ {actual[i] if i < len(actual) else '(end)'}")
    return "\n".join(lines)


def match_path(actual: Sequence[str], spec: ExpectPath) -> Check:
    """The agents that held the conversation against the expected path."""
    want = spec.agents
    if spec.match == "exact":
        if list(actual) == want:
            return Check("path", True)
        return Check("path", False, path_diff(want, actual))
    if spec.match == "contains":
        missing = [a for a in want if a not in actual]
        if missing:
            return Check("path", False, f"never reached: {', '.join(missing)} (path: "
                                        f"{' → '.join(actual)})")
        return Check("path", True)
    at, matched = 0, list[str]()  # in_order: each expected agent after the previous one
    for agent in want:
        try:
            at = actual.index(agent, at) + 1
        except ValueError:
            rest = list(actual[at:])
            return Check("path", False, path_diff([*matched, agent], [*matched, *rest[:1]])
                         + (f"\n  (then: {' → '.join(rest[1:])})" if rest[1:] else ""))
        matched.append(agent)
    return Check("path", True)


def _report_problem(event: DelegationEvent, spec: ExpectDelegation) -> str | None:
    if spec.by is not None and event.agent != spec.by:
        return f"delegated by {event.agent}, not {spec.by}"
    if spec.ok is not None and event.ok != spec.ok:
        return f"{'failed: ' + (event.error or '') if not event.ok else 'succeeded'}"
    report = event.report or {}
    wants_report = (spec.confidence is not None or spec.sources is not None
                    or spec.gaps is not None or spec.summary is not None)
    if wants_report and not report:
        return "came back without a report"
    if spec.confidence is not None:
        allowed = [spec.confidence] if isinstance(spec.confidence, str) else spec.confidence
        if report.get("confidence") not in allowed:
            return f"confidence {report.get('confidence')!r}, expected {' or '.join(allowed)}"
    if spec.sources is not None and bool(report.get("sources")) != spec.sources:
        return "cites sources" if not spec.sources else "cites no sources"
    if spec.gaps is not None and bool(report.get("gaps")) != spec.gaps:
        return f"names gaps: {report.get('gaps')}" if not spec.gaps else "names no gaps"
    if spec.summary is not None:
        why = match_value(spec.summary, report.get("summary", ""))
        if why is not None:
            return f"summary: {why}"
    return None


def match_delegations(made: Sequence[DelegationEvent],
                      specs: Sequence[ExpectDelegation]) -> Check:
    """Each expected delegation against a distinct delegation made."""
    pairs = _matching(made, specs, lambda e, s: e.child_agent == s.child
                      and _report_problem(e, s) is None)
    problems = []
    for j, spec in enumerate(specs):
        if j in pairs:
            continue
        same = [e for e in made if e.child_agent == spec.child]
        if not same:
            children = ", ".join(e.child_agent for e in made) or "none"
            problems.append(f"{spec.child}: never delegated to (delegations: {children})")
        else:
            why = _report_problem(same[0], spec) or "one delegation fits two expectations"
            problems.append(f"{spec.child}: {why}")
    if problems:
        return Check("delegations", False, "; ".join(problems))
    return Check("delegations", True)


def match_final(final: Any, last_agent: str, spec: ExpectFinal) -> Check:
    """The final answer and the agent that gave it."""
    if spec.agent is not None and last_agent != spec.agent:
        return Check("final", False, f"answered by {last_agent or 'nobody'}, expected "
                                     f"{spec.agent}")
    has_value = (spec.equals is not None or spec.contains is not None or spec.regex is not None
                 or spec.schema is not None)
    why = match_value(spec, final) if has_value else None
    return Check("final", why is None, why or "")


def match_limits(metrics: Metrics, spec: ExpectLimits) -> Check:
    """What the case run used against the limits."""
    over = []
    for label, used, limit in (("requests", metrics.requests, spec.max_requests),
                               ("tokens", metrics.tokens, spec.max_tokens),
                               ("handoffs", metrics.handoffs, spec.max_handoffs),
                               ("tool calls", metrics.tool_calls, spec.max_tool_calls),
                               ("seconds", metrics.seconds, spec.max_seconds)):
        if limit is not None and used > limit:
            shown = f"{used:.2f}" if isinstance(used, float) else str(used)
            over.append(f"{label} {shown} > {limit}")
    return Check("limits", not over, "; ".join(over))
