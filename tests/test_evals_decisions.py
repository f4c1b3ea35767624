"""A person's decisions in eval cases: approvals and answers given through ``Runner.resume``,
``expect.pending``, runs that stop early counted for what they did, and the capture round
trip (a session with an approved refund and a delegation becomes a case that passes), also
through ``relayrace serve``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures.eval_approvals import REFUNDS, build, scripted
from relayrace.core.events import ApprovalRequestedEvent, QuestionAskedEvent, ToolResultEvent
from relayrace.evals import CaseFileError, CaseRun, load_cases, parse_case, run_case, run_eval
from relayrace.evals.capture import append_case, capture_case, child_logs
from relayrace.evals.confusion import ERROR, STOPPED, ConfusionMatrix, reached
from relayrace.runner import Runner
from relayrace.sessions import MemoryStore, SQLiteStore
from relayrace.testing import ScriptedModel, tool_call

HERE = Path(__file__).resolve().parent
EXPECT = {"path": ["triage", "billing"],
          "tools": {"mode": "superset", "args": "ignore",
                    "calls": [{"name": "ask_user"}, {"name": "issue_refund"}]},
          "delegations": [{"child": "researcher", "by": "billing", "confidence": "high"}],
          "final": {"agent": "billing", "contains": "Refunded"}}


def case(**data: Any) -> Any:
    return parse_case({"id": "refund", "input": "I was charged twice for INV-2041.", **data})


async def test_approvals_and_answers_resume_the_run_and_each_decision_is_logged() -> None:
    store = MemoryStore()
    before = len(REFUNDS)
    run = await run_case(build(), case(approvals={"issue_refund": "approve"}, answers=["card"],
                                       expect=EXPECT), model=scripted,
                         session=store.session("s1"))
    assert run.status == "passed", run.checks
    assert run.decisions[0] == "answer 'Refund to your card or as credit?': 'card'"
    assert run.decisions[1].startswith("approve issue_refund (")
    assert len(REFUNDS) == before + 1
    # The case run's own log: each request, then what the decision did.
    events = await store.session("s1").get_events()
    asked = next(e for e in events if isinstance(e, ApprovalRequestedEvent))
    result = next(e for e in events if isinstance(e, ToolResultEvent)
                  and e.message.tool_call_id == asked.tool_call_id)
    assert result.message.content.startswith('refunded 149.00 EUR on INV-2041')
    question = next(e for e in events if isinstance(e, QuestionAskedEvent))
    answer = next(e for e in events if isinstance(e, ToolResultEvent)
                  and e.message.tool_call_id == question.tool_call_id)
    assert answer.message.content == "card"


async def test_a_rejection_is_given_and_the_tool_does_not_run() -> None:
    before = len(REFUNDS)
    run = await run_case(build(), case(approvals={"issue_refund": ["reject"]},
                                       answers=["card"]), model=scripted)
    assert run.status == "passed" and run.decisions[1].startswith("reject issue_refund")
    assert len(REFUNDS) == before


async def test_expect_pending_and_a_stop_without_a_decision() -> None:
    team = build()
    waits = await run_case(team, case(answers=["card"],
                                      expect={"pending": ["issue_refund"],
                                              "path": ["triage", "billing"]}), model=scripted)
    assert waits.status == "passed", waits.checks
    assert (waits.stopped, waits.pending) == ("approval of issue_refund", ["issue_refund"])
    stuck = await run_case(team, case(answers=["card"], expect=EXPECT), model=scripted)
    assert stuck.status == "failed"
    assert stuck.checks[0].detail == ("stopped for approval of issue_refund; give approvals: "
                                      "or expect: pending:")
    # It stopped at billing, with what it had done so far.
    assert stuck.path == ["triage", "billing"] and stuck.metrics.requests >= 4
    assert stuck.metrics.tokens > 0 and stuck.calls[0] == ['lookup_invoice({"invoice_id": '
                                                           '"INV-2041"})']
    asked = await run_case(team, case(expect={"pending": ["ask_user"]}), model=scripted)
    assert asked.status == "passed" and asked.stopped == "an answer to ask_user"
    wrong = await run_case(team, case(approvals={"issue_refund": "approve"}, answers=["card"],
                                      expect={"pending": ["issue_refund"]}), model=scripted)
    assert wrong.checks[0].detail == ("the run did not stop for a person; expected it to wait "
                                      "on issue_refund")
    with pytest.raises(CaseFileError, match="non-empty list"):
        case(approvals={"issue_refund": []})


async def test_a_stopped_run_is_routed_by_its_path_in_the_matrix() -> None:
    broken = ScriptedModel(by_agent={"triage": [RuntimeError("provider down")]})
    result = await run_eval(build(), [case(answers=["card"], expect=EXPECT),
                                      parse_case({"id": "early", "input": "hi",
                                                  "expect": {"final": {"agent": "billing"}}})],
                            model=lambda c: scripted(c) if c.id == "refund" else broken)
    matrix = ConfusionMatrix.of(result.runs)
    assert matrix.count("billing", "billing") == 1  # stopped at billing: routed right
    assert matrix.count("billing", ERROR) == 1  # failed at triage, before any routing
    assert matrix.accuracy == 1.0 and matrix.reached == ["billing", "error"]
    assert matrix.summary() == "100% right (1 error(s) counted apart)"


@given(st.lists(st.builds(
    CaseRun, case_id=st.just("c"), repeat=st.just(0),
    status=st.sampled_from(["passed", "failed", "error"]),
    path=st.lists(st.sampled_from(["triage", "billing", "tech"]), max_size=3),
    last_agent=st.sampled_from(["", "billing", "tech"]),
    expected_agent=st.sampled_from([None, "billing", "tech", "triage"]),
    stopped=st.sampled_from(["", "approval of x"])), max_size=12))
def test_every_run_with_an_expected_agent_is_counted_once(runs: list[CaseRun]) -> None:
    matrix = ConfusionMatrix.of(runs)
    named = [r for r in runs if r.expected_agent is not None]
    assert sum(matrix.counts.values()) == len(named)
    apart = matrix.apart(STOPPED) + matrix.apart(ERROR)
    routed = len(named) - apart
    right = sum(matrix.count(a, a) for a in matrix.expected)
    assert matrix.accuracy == (right / routed if routed else 0.0)
    for run in named:
        assert reached(run) in matrix.reached


def test_unknown_tools_in_decisions_are_reported_at_their_lines_with_a_suggestion(
        tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text("- id: a\n  input: hi\n  approvals:\n    issue_refnd: approve\n"
                     "- id: b\n  input: hi\n  expect:\n    pending: [isue_refund]\n")
    loaded = load_cases(cases)
    with pytest.raises(CaseFileError) as raised:
        asyncio.run(run_eval(build(), loaded, model=scripted))
    assert str(raised.value).splitlines() == [
        f"{cases}:4: approvals: the team has no tool 'issue_refnd'; did you mean "
        "'issue_refund'?",
        f"{cases}:8: expect.pending: the team has no tool 'isue_refund'; did you mean "
        "'issue_refund'?"]


async def test_capture_round_trip_with_an_approved_refund_and_a_delegation(
        tmp_path: Path) -> None:
    store = MemoryStore()
    team = build(scripted(case()))
    result = await Runner.run(team, "I was charged twice for INV-2041.",
                              session=store.session("live"))
    assert result.pending is not None and result.pending.questions
    question = result.pending.questions[0]
    result = await Runner.resume(result.pending, answers={question.id: "card"})
    assert result.pending is not None and result.pending.approvals
    call = result.pending.approvals[0].call_id
    result = await Runner.resume(result.pending, approvals={call: True})
    assert result.pending is None
    events = await store.session("live").get_events()
    captured = capture_case(events, "captured", children=await child_logs(store, events))
    assert captured.approvals == {"issue_refund": "approve"} and captured.answers == ["card"]
    assert captured.expect.path == ["triage", "billing"]
    assert captured.expect.delegations[0].child == "researcher"
    assert captured.expect.final is not None
    assert captured.expect.final.equals == "Refunded 149.00 EUR on INV-2041 to your card."
    into = tmp_path / "captured.yaml"
    append_case(into, captured, note="from live")
    again = await run_case(build(), load_cases(into)[0], model=scripted)
    assert again.status == "passed", again.checks


def test_capture_round_trip_through_relayrace_serve(tmp_path: Path) -> None:
    from test_host_guard import cli

    team = f"{HERE / 'fixtures' / 'eval_approvals.py'}:team"
    cases = tmp_path / "cases.yaml"
    with cli(tmp_path, "serve", team, "--db", str(tmp_path / "s.db"), "--eval-cases",
             str(cases)) as url, httpx.Client(base_url=url, timeout=60) as http:
        sid = http.post("/api/sessions", json={}).json()["session_id"]
        http.post(f"/api/sessions/{sid}/runs", json={"input": "I was charged twice."})
        waiting = http.get(f"/api/sessions/{sid}/pending").json()
        qid = waiting["questions"][0]["id"]
        http.post(f"/api/sessions/{sid}/pending",
                  json={"answers": {qid: "card"}, "background": False})
        waiting = http.get(f"/api/sessions/{sid}/pending").json()
        call = waiting["approvals"][0]["call_id"]
        http.post(f"/api/sessions/{sid}/pending",
                  json={"approvals": {call: True}, "background": False})
        assert http.get(f"/api/sessions/{sid}/pending").json()["approvals"] == []
        saved = http.post(f"/api/sessions/{sid}/eval-case",
                          json={"id": "served", "append": True})
        assert saved.status_code == 200, saved.text
    captured = load_cases(cases)[0]
    assert captured.approvals == {"issue_refund": "approve"} and captured.answers == ["card"]
    run = asyncio.run(run_case(build(), captured, model=scripted))
    assert run.status == "passed", run.checks


async def test_a_session_still_waiting_is_captured_with_expect_pending() -> None:
    store = MemoryStore()
    await Runner.run(build(scripted(case())), "I was charged twice.",
                     session=store.session("w"))
    captured = capture_case(await store.session("w").get_events(), "waiting")
    assert captured.expect.pending == ["ask_user"] and captured.expect.final is None
    run = await run_case(build(), captured, model=scripted)
    assert run.status == "passed", run.checks


def test_a_stored_case_run_with_decisions_round_trips(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    result = asyncio.run(run_eval(build(), [case(approvals={"issue_refund": "approve"},
                                                 answers=["card"], expect=EXPECT)],
                                  model=scripted, store=store))
    assert result.runs[0].passed and result.runs[0].decisions


async def test_the_report_drills_into_each_run_with_its_decisions_and_first_divergence(
        ) -> None:
    from relayrace.evals.html import html_report

    result = await run_eval(build(), [case(approvals={"issue_refund": "approve"},
                                           answers=["card"], expect=EXPECT),
                                      case(id="stuck", answers=["card"], expect=EXPECT)],
                            model=scripted)
    page = html_report(result)
    assert page.count('<details class="case"') == 2 and page.count('<details class="run"') == 2
    assert "decisions given: answer &#x27;Refund to your card or as credit?&#x27;" in page
    stuck = page[page.index('id="case-stuck"'):]
    assert stuck.count("◀ first divergence") == 1
    diverged = stuck[stuck.index('<tr class="diverged">'):]
    assert diverged.startswith('<tr class="diverged"><td>waits on</td><td>—</td>'
                               '<td>issue_refund <span class="mark">')


async def test_a_person_taking_over_is_expected_by_their_agents_name() -> None:
    from relayrace import Agent, human

    desk = Agent("desk", instructions="Hand hard cases to a person.",
                 sub_agents=[human("supervisor")])
    model = ScriptedModel([tool_call("transfer_to_supervisor", {"reason": "angry"})])
    expected = await run_case(desk, parse_case({"id": "t", "input": "I want a manager",
                                                "expect": {"pending": ["supervisor"]}}),
                              model=lambda c: model)
    assert expected.status == "passed", expected.checks
    assert expected.stopped == "a person (supervisor) holding the conversation"
    again = ScriptedModel([tool_call("transfer_to_supervisor", {"reason": "angry"})])
    unexpected = await run_case(desk, parse_case({"id": "t", "input": "I want a manager"}),
                                model=lambda c: again)
    assert unexpected.checks[0].detail == ("stopped for a person (supervisor) holding the "
                                           "conversation; a case cannot reply for them; give "
                                           "expect: pending:")
