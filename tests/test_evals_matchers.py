"""The eval matchers. The tool-call modes are specified by the situations ``agentevals``' own
trajectory-match tests pin down (same calls; calls of one turn reordered; one turn split in
two; fewer or more calls; another tool; argument modes and per-argument overrides), each with
the outcome per mode those tests give."""

from __future__ import annotations

import time
from typing import Any

import pytest

from relayrace.core.events import DelegationEvent
from relayrace.evals import (
    ExpectCall,
    ExpectDelegation,
    ExpectFinal,
    ExpectLimits,
    ExpectPath,
    ExpectTools,
    Match,
    Metrics,
    match_delegations,
    match_final,
    match_limits,
    match_path,
    match_tools,
)
from relayrace.evals.matchers import match_value, path_diff
from relayrace.evals.trajectory import CallMade

MODES = ("strict", "unordered", "subset", "superset")


def made(name: str, agent: str = "a", **args: Any) -> CallMade:
    return CallMade(name, args, agent)


def want(name: str, **args: Any) -> ExpectCall:
    return ExpectCall(name=name, args=args)


def outcome(turns: list[list[CallMade]], calls: list[Any], args: str = "exact",
            ) -> dict[str, bool]:
    return {mode: match_tools(turns, ExpectTools(calls=calls, mode=mode,  # type: ignore[arg-type]
                                                 args=args)).passed  # type: ignore[arg-type]
            for mode in MODES}


def test_the_same_call_passes_in_every_mode() -> None:
    got = outcome([[made("get_weather", city="San Francisco")]],
                  [want("get_weather", city="San Francisco")])
    assert got == dict.fromkeys(MODES, True)


def test_calls_of_one_turn_in_another_order_pass_in_every_mode_even_strict() -> None:
    turns = [[made("get_weather", city="SF"), made("get_weather", city="London")]]
    calls = [[want("get_weather", city="London"), want("get_weather", city="SF")]]
    assert outcome(turns, calls) == dict.fromkeys(MODES, True)  # type: ignore[arg-type]


def test_one_turn_split_in_two_fails_only_strict() -> None:
    turns = [[made("get_weather", city="SF")], [made("get_weather", city="London")]]
    calls = [[want("get_weather", city="London"), want("get_weather", city="SF")]]
    assert outcome(turns, calls) == {  # type: ignore[arg-type]
        "strict": False, "unordered": True, "subset": True, "superset": True}


def test_fewer_calls_than_expected_pass_only_subset() -> None:
    turns = [[made("get_weather", city="SF")]]
    calls = [[want("get_weather", city="London"), want("get_weather", city="SF")]]
    assert outcome(turns, calls) == {  # type: ignore[arg-type]
        "strict": False, "unordered": False, "subset": True, "superset": False}


def test_another_tool_fails_every_mode() -> None:
    got = outcome([[made("get_weather", city="SF")]],
                  [want("accuweather_forecast", city="San Francisco")])
    assert got == dict.fromkeys(MODES, False)


def test_extra_calls_with_arguments_ignored_pass_only_superset() -> None:
    turns = [[made("get_weather", city="San Francisco"), made("get_weather", city="London")]]
    got = outcome(turns, [want("get_weather", city="SF and London")], args="ignore")
    assert got == {"strict": False, "unordered": False, "subset": False, "superset": True}


def test_a_subset_of_calls_with_arguments_ignored_passes_only_subset() -> None:
    turns = [[made("get_weather", city="SF and London")]]
    calls = [[want("get_weather", city="San Francisco"), want("get_weather", city="London")]]
    assert outcome(turns, calls, args="ignore") == {  # type: ignore[arg-type]
        "strict": False, "unordered": False, "subset": True, "superset": False}


@pytest.mark.parametrize(("mode", "passed"), [("exact", False), ("ignore", True),
                                              ("subset", False), ("superset", True)])
def test_more_arguments_than_expected(mode: str, passed: bool) -> None:
    turns = [[made("get_flight_info", is_cool=True, flight_no="LX0112")]]
    calls = [want("get_flight_info", flight_no="LX0112")]
    assert outcome(turns, calls, args=mode)["strict"] is passed  # type: ignore[arg-type]


@pytest.mark.parametrize(("mode", "passed"), [("exact", False), ("ignore", True),
                                              ("subset", True), ("superset", False)])
def test_fewer_arguments_than_expected(mode: str, passed: bool) -> None:
    turns = [[made("get_flight_info", flight_no="LX0112")]]
    calls = [want("get_flight_info", flight_no="LX0112", foo="bar")]
    assert outcome(turns, calls, args=mode)["strict"] is passed  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["exact", "ignore", "subset", "superset"])
def test_equal_arguments_pass_every_argument_mode(mode: str) -> None:
    turns = [[made("get_flight_info", flight_no="LX0112")]]
    calls = [want("get_flight_info", flight_no="LX0112")]
    assert outcome(turns, calls, args=mode)["strict"]  # type: ignore[arg-type]


def test_a_nested_field_matcher_overrides_the_rest_of_the_arguments() -> None:
    # agentevals: an override that compares only time.start of lookup_policy's arguments.
    turns = [[made("lookup_policy", query="flight change",
                   time={"start": "2024-01-01", "end": "2024-02-02"})]]
    exact = ExpectCall(name="lookup_policy", args={"query": "upgrade rules",
                                                   "time": {"start": "2024-01-01"}})
    assert not match_tools(turns, ExpectTools(calls=[exact])).passed
    only_start = ExpectCall(name="lookup_policy", args_match="ignore",
                            where={"time.start": Match(equals="2024-01-01")})
    assert match_tools(turns, ExpectTools(calls=[only_start])).passed
    wrong = ExpectCall(name="lookup_policy", where={"time.start": Match(equals="2025-01-01")})
    assert not match_tools(turns, ExpectTools(calls=[wrong])).passed


def test_per_argument_matchers_check_generated_values_the_rest_compares_exactly() -> None:
    turns = [[made("issue_refund", id="rf-93ab", amount=149.0, invoice="INV-2041")]]
    call = ExpectCall(name="issue_refund", args={"invoice": "INV-2041", "amount": 149.0},
                      where={"id": Match(regex=r"^rf-[0-9a-f]{4}$")})
    assert match_tools(turns, ExpectTools(calls=[call])).passed
    call.args = {"invoice": "INV-9999", "amount": 149.0}
    failed = match_tools(turns, ExpectTools(calls=[call]))
    assert not failed.passed
    assert "model turn 1: expected issue_refund" in failed.detail
    assert "INV-2041" in failed.detail  # what was called instead


def test_pairing_is_one_to_one_and_finds_the_pairing_a_greedy_match_misses() -> None:
    # The first expected call fits both calls; greedy pairing would take the wrong one.
    turns = [[made("search", q="alpha beta"), made("search", q="alpha")]]
    calls = [[ExpectCall(name="search", where={"q": Match(contains="alpha")}),
              ExpectCall(name="search", where={"q": Match(contains="beta")})]]
    assert outcome(turns, calls)["unordered"]  # type: ignore[arg-type]
    twice = [[ExpectCall(name="search"), ExpectCall(name="search"), ExpectCall(name="search")]]
    assert not outcome(turns, twice)["unordered"]  # type: ignore[arg-type]


def test_the_agent_that_made_a_call_can_be_required() -> None:
    turns = [[made("check", agent="technical")]]
    assert match_tools(turns, ExpectTools(calls=[ExpectCall(name="check",
                                                           agent="technical")])).passed
    assert not match_tools(turns, ExpectTools(calls=[ExpectCall(name="check",
                                                               agent="billing")])).passed


def test_unordered_failure_says_what_was_missing_and_what_was_not_expected() -> None:
    check = match_tools([[made("a"), made("b")]],
                        ExpectTools(calls=[want("a"), want("c")], mode="unordered"))
    assert check.detail == "unordered: not called: c({}); not expected: b({})"


# -- the handoff path ---------------------------------------------------------------------


def test_an_exact_path_shows_the_first_divergence_as_a_diff() -> None:
    check = match_path(["triage", "technical", "database"],
                       ExpectPath(agents=["triage", "billing"]))
    assert not check.passed
    assert check.detail == "  triage\n- billing\n+ technical"
    assert match_path(["triage", "billing"], ExpectPath(agents=["triage", "billing"])).passed
    assert path_diff(["a", "b"], ["a", "b", "c"]) == "  a\n  b\n- (end)\n+ c"


def test_in_order_allows_agents_between_and_contains_any_order() -> None:
    actual = ["triage", "technical", "network"]
    assert match_path(actual, ExpectPath(agents=["triage", "network"], match="in_order")).passed
    assert not match_path(actual, ExpectPath(agents=["network", "triage"],
                                             match="in_order")).passed
    assert match_path(actual, ExpectPath(agents=["network", "triage"], match="contains")).passed
    missing = match_path(actual, ExpectPath(agents=["billing"], match="contains"))
    assert missing.detail == "never reached: billing (path: triage → technical → network)"


# -- delegations, the final answer, limits, values ---------------------------------------


def delegation(child: str, **report: Any) -> DelegationEvent:
    return DelegationEvent(agent="technical", child_agent=child, child_session_id="s",
                           report=report or None)


def test_delegations_check_the_childs_report_fields() -> None:
    made_ = [delegation("incidents", confidence="high", sources=["INC-311"], gaps=[],
                        summary="INC-311: replicas lagged")]
    spec = ExpectDelegation(child="incidents", by="technical", confidence=["high", "medium"],
                            sources=True, gaps=False, summary=Match(contains="inc-311"))
    assert match_delegations(made_, [spec]).passed
    low = ExpectDelegation(child="incidents", confidence="low")
    assert match_delegations(made_, [low]).detail == \
        "incidents: confidence 'high', expected low"
    gaps = ExpectDelegation(child="incidents", gaps=True)
    assert match_delegations(made_, [gaps]).detail == "incidents: names no gaps"
    other = ExpectDelegation(child="market")
    assert match_delegations(made_, [other]).detail == \
        "market: never delegated to (delegations: incidents)"
    bare = [delegation("incidents")]
    assert match_delegations(bare, [spec]).detail == "incidents: came back without a report"


def test_two_expected_delegations_need_two_delegations() -> None:
    spec = ExpectDelegation(child="incidents")
    assert not match_delegations([delegation("incidents")], [spec, spec]).passed
    assert match_delegations([delegation("incidents"), delegation("incidents")],
                             [spec, spec]).passed


def test_the_final_answer_and_who_gave_it() -> None:
    assert match_final("Refunded: RF-7300", "billing",
                       ExpectFinal(agent="billing", contains=["rf-7300"])).passed
    wrong = match_final("Refunded", "triage", ExpectFinal(agent="billing"))
    assert wrong.detail == "answered by triage, expected billing"
    typed = {"invoice": "INV-1", "total": 3}
    schema = {"type": "object", "required": ["invoice", "total"],
              "properties": {"total": {"type": "integer", "minimum": 1}}}
    assert match_final(typed, "b", ExpectFinal(schema=schema)).passed
    assert match_final('{"invoice": "INV-1", "total": 3}', "b", ExpectFinal(schema=schema)).passed
    bad = match_final({"invoice": "INV-1", "total": 0}, "b", ExpectFinal(schema=schema))
    assert "does not fit the schema at total" in bad.detail


def test_value_matchers() -> None:
    assert match_value(Match(equals=149.0), 149.0) is None
    assert match_value(Match(equals={"a": 1}), '{"a": 1}') is None
    assert match_value(Match(equals="x"), "y") == "expected x, got y"
    assert match_value(Match(regex=r"\bpaid\b"), "It is paid.") is None
    assert match_value(Match(contains=["a", "Z"]), "abc") == "abc does not contain 'Z'"
    with pytest.raises(ValueError, match="at least one of"):
        Match()
    with pytest.raises(ValueError, match="final needs agent, or at least one of"):
        ExpectFinal()


def test_regex_is_bounded_and_checked_when_built() -> None:
    # A backtracking engine takes exponential time here; RE2 answers at once.
    started = time.perf_counter()
    assert "does not match /(a+)+$/" in (match_value(Match(regex=r"(a+)+$"), "a" * 50_000 + "b")
                                         or "")
    assert match_value(Match(regex=r"(a+)+b$"), "a" * 50_000 + "b") is None
    assert time.perf_counter() - started < 1.0
    with pytest.raises(ValueError, match=r"regex '\(' is invalid"):
        Match(regex="(")
    with pytest.raises(ValueError, match="not one RE2 matches in linear time .*backreferences"):
        ExpectFinal(regex=r"(\w)\1")
    with pytest.raises(ValueError, match="lookaround"):
        Match(regex="(?=paid)")


def test_limits() -> None:
    metrics = Metrics(requests=5, input_tokens=900, output_tokens=200, handoffs=2,
                      tool_calls=1, seconds=0.5)
    assert match_limits(metrics, ExpectLimits(max_requests=5, max_tokens=1100)).passed
    over = match_limits(metrics, ExpectLimits(max_requests=4, max_handoffs=1,
                                              max_seconds=0.25))
    assert over.detail == "requests 5 > 4; handoffs 2 > 1; seconds 0.50 > 0.25"
