"""Astromesh's plan_and_execute, parallel_fan_out and pipeline patterns, through the public API."""

from __future__ import annotations

import asyncio

import pytest

from conftest import wait_until
from relayrace import (
    Agent,
    DelegationEvent,
    MessageEvent,
    ModelBehaviorError,
    PatternStepFailed,
    Runner,
)
from relayrace.sessions import MemorySession
from relayrace.teams.patterns import ParallelFanOut, Pipeline, PlanAndExecute
from relayrace.testing import ScriptedModel, final_output, text


def _worker(model: ScriptedModel) -> Agent:
    return Agent("support", instructions="Help.", model=model)


async def test_plan_and_execute_runs_each_step_then_synthesizes() -> None:
    model = ScriptedModel([final_output({"steps": ["find the order", "check the refund"]}),
                           text("order A7 found"), text("refund allowed"),
                           text("A7 can be refunded.")])
    session = MemorySession()
    result = await Runner.run(PlanAndExecute(agent=_worker(model), max_steps=3), "Refund A7?",
                              session=session)
    assert result.final_output == "A7 can be refunded."
    model.assert_complete()
    step2 = model.requests[2].messages[-1].content
    assert "step 2 of 2" in step2 and "order A7 found" in step2  # sees the earlier results
    synthesis = model.requests[3].messages[-1].content
    assert "refund allowed" in synthesis
    children = [e for e in session.events if isinstance(e, DelegationEvent)]
    assert len(children) == 3 and all(e.ok for e in children)  # the plan and two steps
    notes = [e.message.content for e in result.new_events if isinstance(e, MessageEvent)
             and "a plan of" in (e.message.content or "")]
    assert len(notes) == 1 and notes[0].endswith(
        "a plan of 2 steps]\n1. find the order\n2. check the refund")


async def test_a_plan_longer_than_max_steps_is_sent_back_then_fails_typed() -> None:
    too_long = final_output({"steps": ["a", "b", "c"]})
    model = ScriptedModel([too_long, final_output({"steps": ["a", "b"]}), text("A done"),
                           text("B done"), text("Both done.")])
    result = await Runner.run(PlanAndExecute(agent=_worker(model), max_steps=2), "Do it")
    assert result.final_output == "Both done."
    assert "is too long" in model.requests[1].messages[-1].content  # told, and it fixed it

    stubborn = ScriptedModel([too_long] * 3)
    with pytest.raises(ModelBehaviorError, match="no valid plan of at most 2 steps: "):
        await Runner.run(PlanAndExecute(agent=_worker(stubborn), max_steps=2), "Do it")


async def test_fan_out_runs_subtasks_at_once_and_collects_a_failure() -> None:
    started: list[str] = []
    gate = asyncio.Event()

    async def answer(request):  # type: ignore[no-untyped-def]
        task = request.messages[-1].content
        if "Split" in task:
            return final_output({"subtasks": ["flights", "hotels", "trains"]})
        if task in ("flights", "hotels", "trains"):
            started.append(task)
            if len(started) == 3:
                gate.set()
            await gate.wait()  # all three run at the same time, or this never returns
            if task == "hotels":
                raise RuntimeError("hotel API down")
            return text(f"{task}: ok")
        return text("Summary: " + task[-60:])

    from relayrace.testing import FunctionModel

    model = FunctionModel(answer)
    worker = Agent("planner", instructions="Plan trips.", model=model)
    result = await Runner.run(ParallelFanOut(agent=worker, on_error="collect"), "Plan a trip")
    assert sorted(started) == ["flights", "hotels", "trains"]
    synthesis = model.requests[-1].messages[-1].content
    assert "flights: ok" in synthesis and "hotel API down" in synthesis
    assert result.final_output.startswith("Summary:")


async def test_fan_out_cancel_stops_the_others_at_the_first_error() -> None:
    cancelled: list[str] = []

    async def answer(request):  # type: ignore[no-untyped-def]
        task = request.messages[-1].content
        if "Split" in task:
            return final_output({"subtasks": ["slow", "broken"]})
        if task == "broken":
            raise RuntimeError("boom")
        try:
            await asyncio.sleep(30)  # still running when its sibling fails
        except asyncio.CancelledError:
            cancelled.append(task)
            raise
        return text("never")

    from relayrace.testing import FunctionModel

    worker = Agent("w", instructions="Work.", model=FunctionModel(answer))
    with pytest.raises(PatternStepFailed, match="subtask 2 of 2") as info:
        await Runner.run(ParallelFanOut(agent=worker, on_error="cancel"), "Go")
    assert "boom" in info.value.error
    assert cancelled == ["slow"]


async def test_fan_out_split_over_max_subtasks_is_refused() -> None:
    model = ScriptedModel([final_output({"subtasks": ["a", "b", "c"]})] * 3)
    with pytest.raises(ModelBehaviorError, match="at most 2 subtasks"):
        await Runner.run(ParallelFanOut(agent=_worker(model), max_subtasks=2), "Go")


async def test_pipeline_feeds_each_stage_the_previous_output() -> None:
    model = ScriptedModel([text("facts: A, B"), text("draft from A, B"), text("Final text.")])
    session = MemorySession()
    result = await Runner.run(Pipeline(agent=_worker(model), stages=("research", "draft",
                                                                     "edit")),
                              "Write about A", session=session)
    assert result.final_output == "Final text."
    assert "Input: facts: A, B" in model.requests[1].messages[-1].content
    assert "'edit'" in model.requests[2].messages[-1].content
    assert sum(isinstance(e, DelegationEvent) for e in session.events) == 3


async def test_pipeline_stage_failure_is_typed() -> None:
    model = ScriptedModel([text("ok"), RuntimeError("stage broke")])
    with pytest.raises(PatternStepFailed, match="stage 'process'"):
        await Runner.run(Pipeline(agent=_worker(model), stages=("analyze", "process")), "Go")


@pytest.mark.parametrize("stages", [("one",), tuple("abcdefg"), ("a", ""), ("a", "a"), "ab"])
def test_pipeline_needs_two_to_six_named_stages(stages: tuple[str, ...]) -> None:
    from relayrace import UserError

    with pytest.raises(UserError, match="stage"):
        Pipeline(agent=_worker(ScriptedModel()), stages=stages)


def test_bad_bounds_are_refused() -> None:
    from relayrace import UserError

    with pytest.raises(UserError, match="max_steps"):
        PlanAndExecute(agent=_worker(ScriptedModel()), max_steps=0)
    with pytest.raises(UserError, match="on_error"):
        ParallelFanOut(agent=_worker(ScriptedModel()), on_error="ignore")  # type: ignore[arg-type]


def _yaml(tmp_path, orchestration: str):  # type: ignore[no-untyped-def]
    from pathlib import Path

    folder = Path(tmp_path)
    (folder / "a.agent.yaml").write_text(
        "apiVersion: astromesh/v1\nkind: Agent\nmetadata: {name: a}\nspec:\n"
        f"  prompts: {{system: Help.}}\n  orchestration: {orchestration}\n")
    return folder


async def test_yaml_patterns_run_with_no_warning(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from relayrace.config import load_team

    model = ScriptedModel([text("notes"), text("Done.")])
    team = load_team(_yaml(tmp_path, "{pattern: pipeline, stages: [research, write], "
                                     "max_iterations: 3}"), model=model)
    assert team.warnings == []
    pipeline = team["a"]
    assert isinstance(pipeline, Pipeline) and pipeline.stages == ("research", "write")
    assert pipeline.worker.max_turns == 3
    assert (await Runner.run(pipeline, "Go")).final_output == "Done."

    for orchestration, kind in (("{pattern: plan_and_execute, max_steps: 3}", PlanAndExecute),
                                ("{pattern: parallel_fan_out, max_subtasks: 2, "
                                 "on_error: collect}", ParallelFanOut)):
        (tmp_path / "a.agent.yaml").unlink()
        team = load_team(_yaml(tmp_path, orchestration), model=model)
        assert team.warnings == [] and isinstance(team["a"], kind)
    assert team["a"].on_error == "collect" and team["a"].max_subtasks == 2


def test_yaml_pattern_keys_are_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from relayrace import ConfigError
    from relayrace.config import load_team

    (warning,) = load_team(_yaml(tmp_path, "{pattern: react, stages: [a, b]}")).warnings
    assert warning.key == "spec.orchestration.stages" and "'pipeline'" in warning.message
    for bad, error in (("{pattern: pipeline, stages: [only]}", "spec.orchestration.stages"),
                       ("{pattern: parallel_fan_out, on_error: ignore}",
                        "spec.orchestration.on_error"),
                       ("{pattern: plan_and_execute, max_steps: 0}",
                        "spec.orchestration.max_steps")):
        (tmp_path / "a.agent.yaml").unlink()
        with pytest.raises(ConfigError, match=r"a\.agent\.yaml:\d+: " + error.replace(".", r"\.")):
            load_team(_yaml(tmp_path, bad))


async def test_a_subtask_waiting_for_approval_stops_the_run_for_a_person() -> None:
    from relayrace import tool
    from relayrace.testing import FunctionModel, tool_call

    @tool(requires_approval=True)
    def book(what: str) -> str:
        """Book something."""
        return f"booked {what}"

    async def answer(request):  # type: ignore[no-untyped-def]
        last = request.messages[-1]
        if last.content.startswith("Split"):
            return final_output({"subtasks": ["book a flight", "book a hotel"]})
        if last.content == "book a hotel":  # still running when the flight stops for approval
            await wait_until(lambda: any(e.kind == "approval_requested"
                                         for child in session.child_sessions
                                         for e in child.events),
                             "the flight's subtask to stop for approval")
        if last.role == "tool":
            return text(f"done: {last.content}")
        if last.content.startswith("book a "):
            return tool_call("book", {"what": last.content[7:]})
        return text("Trip ready.")

    worker = Agent("travel", instructions="Travel.", model=FunctionModel(answer), tools=[book])
    session = MemorySession()
    stopped = await Runner.run(ParallelFanOut(agent=worker), "Trip", session=session)
    # Both subtasks ask: one waiting for a person does not cancel the other.
    assert stopped.pending is not None and len(stopped.pending.approvals) == 2
    done = await Runner.resume(stopped.pending, approvals={
        c.call_id: True for c in stopped.pending.approvals})
    assert done.final_output == "Trip ready."
