"""Eval cases, runs, judges, capture and replay, through ``relayrace.evals``' Python API
(offline: the teams run on scripted models)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from relayrace import Agent, UserError, tool
from relayrace.evals import (
    Case,
    CaseFileError,
    EvalResult,
    Expect,
    ExpectFinal,
    Rubric,
    case_schema,
    load_cases,
    load_eval_run,
    run_case,
    run_eval,
)
from relayrace.evals.baseline import compare
from relayrace.evals.capture import append_case, capture_case
from relayrace.evals.confusion import ERROR, ConfusionMatrix
from relayrace.evals.pytest import assert_case, parametrize_cases
from relayrace.evals.replay import first_divergence, replay
from relayrace.sessions import MemoryStore
from relayrace.testing import FunctionModel, ScriptedModel, final_output, text, tool_call

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "examples" / "support"
RESEARCH = ROOT / "examples" / "research"


def _import(directory: Path, name: str) -> Any:
    sys.path.insert(0, str(directory))
    try:
        for module in ("team", "script", "eval_models"):
            sys.modules.pop(module, None)
        return __import__(name)
    finally:
        sys.path.remove(str(directory))


def support() -> tuple[Agent[Any], Any]:
    team = _import(SUPPORT, "team").build_team("openai:gpt-4o-mini")
    return team, _import(SUPPORT, "eval_models").scripted


def write(tmp_path: Path, text_: str, name: str = "cases.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text_)
    return path


# -- case files ---------------------------------------------------------------------------


def test_a_case_file_error_names_the_file_the_line_and_a_fix(tmp_path: Path) -> None:
    path = write(tmp_path, """cases:
  - id: a
    input: hi
    expect:
      path: [triage, billing]
      tools:
        mode: sorted
        calls: [{name: x}]
  - id: b
    input: ho
    expect:
      fnal: {agent: x}
""")
    with pytest.raises(CaseFileError) as caught:
        load_cases(path)
    lines = str(caught.value).splitlines()
    assert lines[0].startswith(f"{path}:7: expect.tools.mode: Input should be 'strict', ")
    assert lines[1] == f"{path}:12: unknown key 'expect.fnal'; did you mean 'final'?"


@pytest.mark.parametrize(("body", "message"), [
    ("- id: a\n  input: hi\n  turns: [x]\n", ":1: case: a case has either input (one message) "
                                              "or turns (several)"),
    ("- id: a\n  input: hi\n- id: a\n  input: ho\n", ":3: duplicate case id 'a' (first at "),
    ("- id: a\n  input: [hi\n", ": invalid YAML"),
    ("- id: a\n  input: hi\n  expect:\n    rubric: {criteria: x, min_score: 9}\n",
     ":4: expect.rubric: min_score is a score from 1 to 5, got 9"),
    ("cases: []\nteam: x\n", ":2: unknown key 'team' at the top of a case file"),
])
def test_case_file_mistakes(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(CaseFileError, match=None) as caught:
        load_cases(write(tmp_path, body))
    assert message in str(caught.value)


def test_jsonl_cases_and_their_errors_have_lines(tmp_path: Path) -> None:
    path = write(tmp_path, '{"id": "a", "input": "hi"}\n\n{"id": "b", "inptu": "x"}\n',
                 "cases.jsonl")
    with pytest.raises(CaseFileError, match=r"cases.jsonl:3: unknown key 'inptu'; did you "
                                            r"mean 'input'\?"):
        load_cases(path)
    path.write_text('{"id": "a", "input": "hi"}\n{"id": "b", "turns": ["x", "y"]}\n')
    assert [c.messages for c in load_cases(path)] == [["hi"], ["x", "y"]]


def test_deep_or_huge_case_files_are_refused_at_their_line_all_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = '{"id": "b", "input": "x", "context": {"a": ' + "[" * 50_000 + "]" * 50_000 + "}}"
    brackets = '{"id": "c", "input": "[[[[' + "[" * 200 + '", "tags": ["x"]}'  # in a string
    path = write(tmp_path, f'{{"id": "a", "input": "hi"}}\n{deep}\n{brackets}\n{{"id": 1}}\n',
                 "cases.jsonl")
    with pytest.raises(CaseFileError) as caught:
        load_cases(path)
    lines = str(caught.value).splitlines()
    assert lines[0] == f"{path}:2: nested deeper than 100 levels; a case is a few levels of " \
                       "keys and lists."
    assert lines[1].startswith(f"{path}:4: ")  # the next mistake too; line 3 is fine
    yaml_deep = write(tmp_path, "- id: a\n  input: x\n  context: {a: " + "[" * 50_000 + "}\n")
    with pytest.raises(CaseFileError, match=r"cases.yaml:3: invalid YAML: nested deeper"):
        load_cases(yaml_deep)
    monkeypatch.setattr("relayrace.evals.loading._MAX_BYTES", 60)
    big = write(tmp_path, '{"id": "a", "input": "hi"}\n' * 3, "big.jsonl")
    with pytest.raises(CaseFileError, match=r"big.jsonl:3: the case file passes"):
        load_cases(big)


def test_the_schema_in_docs_is_current_and_the_examples_fit_it() -> None:
    shipped = json.loads((ROOT / "docs" / "eval-cases.schema.json").read_text())
    assert shipped == case_schema()
    for path in (SUPPORT / "evals.yaml", RESEARCH / "evals.yaml"):
        jsonschema.validate(yaml.safe_load(path.read_text()), shipped)
        assert load_cases(path)
    cases = load_cases(SUPPORT / "evals.yaml")
    assert len(cases) >= 12
    assert any(c.turns and len(c.turns) > 1 for c in cases)
    assert sum(bool(c.expect.delegations) for c in cases) >= 2


# -- the shipped examples pass on their scripted models -----------------------------------


async def test_the_support_cases_pass_and_each_case_run_is_a_stored_session() -> None:
    team, scripted = support()
    cases = load_cases(SUPPORT / "evals.yaml")
    store = MemoryStore()
    result = await run_eval(team, cases, model=scripted, repeat=2, concurrency=8, store=store)
    failed = [(r.case_id, r.error, [c.detail for c in r.checks if not c.passed])
              for r in result.runs if not r.passed]
    assert failed == []
    assert len(result.runs) == 2 * len(cases) and result.pass_rate == 1.0
    # Each case run is an ordinary session, the eval run's child; the run reads back.
    run = result.runs[0]
    events = await store.session(run.session_id).get_events()
    assert events[0].kind == "run_started" and events[-1].kind == "run_finished"
    info = await store.get_info(run.session_id)
    assert info is not None and info.parent_id == result.run_id
    again = await load_eval_run(store, result.run_id)
    assert [r.to_dict() for r in again.runs] == [r.to_dict() for r in result.runs]
    assert again.repeat == 2 and again.pass_rate == 1.0


async def test_the_research_cases_pass() -> None:
    team = _import(RESEARCH, "team").build_team("openai:gpt-4o-mini")
    scripted = _import(RESEARCH, "eval_models").scripted
    result = await run_eval(team, load_cases(RESEARCH / "evals.yaml"), model=scripted)
    assert [(r.case_id, r.status, r.error) for r in result.runs] == [
        ("full-brief", "passed", ""), ("market-and-risk", "passed", "")]


# -- failures are per case run ------------------------------------------------------------


def misrouting(case: Case) -> ScriptedModel:
    """Routes everything to technical, which answers at once."""
    return ScriptedModel(by_agent={"triage": [tool_call("transfer_to_technical", {})],
                                   "technical": [text("Try turning it off and on.")]})


async def test_a_failing_case_says_where_its_path_diverged_and_the_matrix_shows_it() -> None:
    team, _ = support()
    case = Case(id="refund", input="charged twice",
                expect=Expect(path=["triage", "billing"], final=ExpectFinal(agent="billing")))
    result = await run_eval(team, [case], model=misrouting, repeat=2)
    run = result.runs[0]
    assert run.status == "failed"
    assert run.checks[0].detail == "  triage\n- billing\n+ technical"
    assert run.checks[1].detail == "answered by technical, expected billing"
    matrix = ConfusionMatrix.of(result.runs)
    assert matrix.count("billing", "technical") == 2 and matrix.accuracy == 0.0


async def test_a_team_that_raises_is_an_error_of_that_case_run_only() -> None:
    team, scripted = support()
    broken = Case(id="broken", input="hi", expect=Expect(path=["triage"]))
    good = load_cases(SUPPORT / "evals.yaml")[0]
    result = await run_eval(team, [broken, good],
                            model=lambda c: scripted(c) if c.id != "broken" else
                            ScriptedModel([RuntimeError("provider down")]))
    assert [r.status for r in result.runs] == ["error", "passed"]
    assert result.runs[0].error == "RuntimeError: provider down"
    matrix = ConfusionMatrix.of(result.runs)
    # It failed at triage, the agent it should end with: routed right, by the path it took.
    assert matrix.count("triage", "triage") == 1 and matrix.apart(ERROR) == 0


async def test_a_conversation_over_its_timeout_is_an_error() -> None:
    team, _ = support()
    slow = FunctionModel(lambda r: text("late"), delay=0.5)
    run = await run_case(team, Case(id="slow", input="hi"), model=slow, run_timeout=0.05)
    assert (run.status, run.error) == ("error",
                                       "the case run took longer than 0.05 s (--timeout)")
    assert run.path == ["triage"]  # as far as it went


async def test_a_run_that_stops_for_approval_without_a_decision_fails_saying_what_to_give(
        ) -> None:
    @tool(requires_approval=True)
    async def wipe() -> str:
        """Wipe everything."""
        return "wiped"

    agent = Agent("ops", model=ScriptedModel([tool_call("wipe", {})]), tools=[wipe],
                  instructions="Operate.")
    run = await run_case(agent, Case(id="wipe", input="wipe it"))
    assert (run.status, run.stopped, run.pending) == ("failed", "approval of wipe", ["wipe"])
    assert run.checks[0].detail == ("stopped for approval of wipe; give approvals: or expect: "
                                    "pending:")
    assert run.path == ["ops"] and run.metrics.requests == 1


# -- the judge ----------------------------------------------------------------------------


RUBRIC = Case(id="judged", input="hi", expect=Expect(rubric=Rubric(criteria="Is polite.")))


def echo_team() -> Agent[Any]:
    return Agent("echo", model=ScriptedModel([text("Hello!")] * 10), instructions="Greet.")


def verdict(score: int) -> FunctionModel:
    return FunctionModel(lambda r: final_output({"score": score, "reasons": "greets warmly"}))


async def test_a_judge_scores_the_answer_against_the_rubric() -> None:
    run = await run_case(echo_team(), RUBRIC, judge=verdict(5))
    assert (run.status, run.score) == ("passed", 5)
    assert run.checks[-1].detail == "score 5/5 (min 4): greets warmly"
    low = await run_case(echo_team(), RUBRIC, judge=verdict(2))
    assert (low.status, low.score) == ("failed", 2)


# Only the slow judge's case has a tight timeout; the others get one a loaded CI machine meets.
@pytest.mark.parametrize(("judge", "timeout", "error"), [
    (FunctionModel(lambda r: RuntimeError("judge down")), 30.0,
     "the judge failed: RuntimeError: judge down"),
    (FunctionModel(lambda r: text("late"), delay=60.0), 0.2,
     "the judge gave no verdict within 0.2 s"),
    (verdict(7), 30.0, "the judge scored 7, outside 1-5 (reasons: greets warmly)"),
    (None, 30.0, "the case has a rubric but no judge model"),
])
async def test_a_judge_that_fails_is_a_clear_error_of_that_case_run(judge: Any, timeout: float,
                                                                    error: str) -> None:
    result = await run_eval(echo_team(), [RUBRIC, Case(id="plain", input="hi")], judge=judge,
                            judge_timeout=timeout)
    assert [r.status for r in result.runs] == ["error", "passed"]
    assert result.runs[0].error.startswith(error)


# -- capture, replay, baseline, pytest ----------------------------------------------------


async def test_capture_makes_a_case_that_passes_on_the_same_conversation(
        tmp_path: Path) -> None:
    team, scripted = support()
    multi = next(c for c in load_cases(SUPPORT / "evals.yaml") if c.turns)
    first = await run_case(team, multi, model=scripted)
    assert first.passed
    store = MemoryStore()
    stored = store.session("s1")
    run = await run_case(team, multi, model=scripted, session=stored)
    events = await stored.get_events()
    case = capture_case(events, "captured")
    assert case.turns == multi.turns
    assert case.expect.path == run.path == ["triage", "billing", "triage", "account"]
    path = tmp_path / "cases.yaml"
    path.write_text("# my cases\ncases:\n  - id: old\n    input: hi\n")
    append_case(path, Case(**{**case.__dict__, "id": "captured"}), note="from s1")
    assert path.read_text().startswith("# my cases\n")  # what was there is kept
    loaded = load_cases(path)
    assert [c.id for c in loaded] == ["old", "captured"]
    again = await run_case(team, loaded[1], model=lambda c: scripted(multi))
    assert again.passed, again.checks
    with pytest.raises(CaseFileError, match="a case 'captured' is there already"):
        append_case(path, loaded[1])


async def test_replay_reports_where_the_trajectory_diverged() -> None:
    team, scripted = support()
    case = load_cases(SUPPORT / "evals.yaml")[0]
    stored = MemoryStore().session("s")
    await run_case(team, case, model=scripted, session=stored)
    events = await stored.get_events()
    before, same = await replay(team, events, model=scripted(case))
    assert first_divergence(before, same) is None
    before, after = await replay(team, events, model=misrouting(case))
    split = first_divergence(before, after)
    assert split is not None
    assert (split.step, split.stored, split.replayed) == (1, "→ billing", "→ technical")
    assert split.shared == ["→ triage"]


async def test_baseline_comparison_per_case() -> None:
    team, scripted = support()
    cases = load_cases(SUPPORT / "evals.yaml")[:2]
    good = await run_eval(team, cases, model=scripted)
    bad = await run_eval(team, cases, model=misrouting)
    deltas = {d.case_id: d for d in compare(good, bad)}
    refund = deltas["refund-duplicate-charge"]
    assert refund.verdict == "worse" and refund.pass_rate == (1.0, 0.0)
    assert refund.path_changed and refund.path[1] == ["triage", "technical"]
    assert refund.tokens[0] is not None and refund.tokens[0] > refund.tokens[1]  # type: ignore[operator]
    back = EvalResult.from_dict(json.loads(json.dumps(bad.to_dict())))
    assert [d.verdict for d in compare(bad, back)] == ["same", "same"]


@parametrize_cases(SUPPORT / "evals.yaml")
def test_the_pytest_helper_runs_each_case(case: Case) -> None:
    team, scripted = support()
    assert_case(team, case, model=scripted)


def test_the_pytest_helper_fails_with_the_checks_that_failed() -> None:
    team, _ = support()
    case = Case(id="refund", input="charged twice", expect=Expect(path=["triage", "billing"]))
    with pytest.raises(AssertionError) as caught:
        assert_case(team, case, model=misrouting)
    head, _, rest = str(caught.value).partition("\n")
    assert head.startswith("eval case refund: failed (session ")
    assert rest == ("  path:\n      triage\n    - billing\n    + technical\n"
                    "  path: triage → technical")


def test_run_eval_rejects_a_repeat_below_one() -> None:
    with pytest.raises(UserError, match="at least 1; got repeat=0"):
        asyncio.run(run_eval(echo_team(), [RUBRIC], repeat=0))


def test_captured_cases_go_into_jsonl_and_list_files_and_a_bad_result_is_undone(
        tmp_path: Path) -> None:
    case = Case(id="c1", input="hi", expect=Expect(path=["triage"]))
    jsonl = tmp_path / "cases.jsonl"
    append_case(jsonl, case)
    append_case(jsonl, Case(id="c2", turns=["a", "b"]))
    assert [c.id for c in load_cases(jsonl)] == ["c1", "c2"]
    listed = write(tmp_path, "# top-level list\n- id: old\n  input: hi\n")
    append_case(listed, case, note="a note")
    assert [c.id for c in load_cases(listed)] == ["old", "c1"]
    assert "# a note\n- id: c1" in listed.read_text()
    broken = tmp_path / "broken.yaml"
    broken.write_text("cases:\n  - id: old\n    input: hi\n  # a trailing block scalar:\n"
                      "extra: |\n")
    before = broken.read_text()
    with pytest.raises(CaseFileError):
        append_case(broken, case)
    assert broken.read_text() == before
    with pytest.raises(CaseFileError, match="is YAML"):
        append_case(tmp_path / "cases.txt", case)
