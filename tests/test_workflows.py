"""Workflow agents: SequentialAgent, ParallelAgent and LoopAgent, composed and as tools."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from conftest import assert_valid_protocol, of_type, requests_of, session_messages, speakers
from relayrace import Agent, GuardrailTriggeredEvent, Runner, UserError, tool
from relayrace.agents.guardrails import TopicDenyListGuardrail
from relayrace.sessions import MemorySession
from relayrace.teams.patterns import swarm
from relayrace.teams.routing import AgentTarget, Always, FromSpeaker, Rule, TerminateTarget
from relayrace.teams.team import Team
from relayrace.teams.workflows import LoopAgent, ParallelAgent, SequentialAgent
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


def agent(name: str, model: Any, **options: Any) -> Agent:
    return Agent(name, instructions=f"You are {name}.", description=f"{name} step",
                 model=model, **options)


# --------------------------------------------------------------------------- sequential


async def test_sequential_runs_steps_in_order_in_one_session() -> None:
    model = ScriptedModel(by_agent={"outline": [text("OUTLINE-1")], "draft": [text("DRAFT-1")],
                                    "polish": [text("FINAL-1")]})
    flow = SequentialAgent("flow", steps=[agent("outline", model), agent("draft", model),
                                          agent("polish", model)])
    result = await Runner.run(flow, "write an essay")
    assert speakers(model) == ["outline", "draft", "polish"]
    assert result.final_output == "FINAL-1"
    assert result.last_agent.name == "polish"
    later = "\n".join(m.content for m in model.requests[2].messages)
    assert "OUTLINE-1" in later and "DRAFT-1" in later and "write an essay" in later
    assert_valid_protocol(await session_messages(result.session))


async def test_sequential_step_may_use_tools() -> None:
    @tool
    def count(text: str) -> int:
        """Count characters."""
        return len(text)

    model = ScriptedModel(by_agent={"a": [tool_call("count", {"text": "abcd"}), text("four")],
                                    "b": [text("done")]})
    flow = SequentialAgent("flow", steps=[agent("a", model, tools=[count]), agent("b", model)])
    result = await Runner.run(flow, "go")
    assert result.final_output == "done"
    assert [r.message.content for r in result.tool_results] == ["4"]
    assert_valid_protocol(await session_messages(result.session))


# --------------------------------------------------------------------------- parallel


def timed_agent(name: str, log: list[tuple[str, float, float]]) -> Agent:
    async def fn(request: Any) -> Any:
        start = time.perf_counter()
        await asyncio.sleep(0.05)  # a model's latency: the branches' overlap is tested
        log.append((name, start, time.perf_counter()))
        return text(f"{name} says {request.messages[-1].content}")

    return Agent(name, instructions="x", model=FunctionModel(fn))


async def test_parallel_runs_branches_at_once_on_the_latest_request() -> None:
    log: list[tuple[str, float, float]] = []
    flow = ParallelAgent("fan", branches=[timed_agent("left", log), timed_agent("right", log)])
    result = await Runner.run(flow, "the question")
    assert len(log) == 2
    assert max(s for _, s, _ in log) < min(e for _, _, e in log), "branches did not overlap"
    out = result.final_output
    assert "left says the question" in out and "right says the question" in out
    assert out.index("left says") < out.index("right says")
    assert len(result.delegations) == 2
    assert_valid_protocol(await session_messages(result.session))


async def test_parallel_branch_failure_does_not_sink_the_others() -> None:
    ok = Agent("ok", instructions="x", model=FunctionModel(lambda r: text("fine")))
    bad = Agent("bad", instructions="x", model=ScriptedModel([RuntimeError("broken branch")]))
    result = await Runner.run(ParallelAgent("fan", branches=[ok, bad]), "go")
    assert "fine" in result.final_output
    assert "broken branch" in result.final_output


# --------------------------------------------------------------------------- loop


async def test_loop_stops_when_the_until_marker_appears() -> None:
    model = ScriptedModel(by_agent={
        "writer": [text("v1"), text("v2"), text("v3")],
        "critic": [text("needs work"), text("APPROVED"), text("unused")],
    })
    flow = LoopAgent("loop", steps=[agent("writer", model), agent("critic", model)],
                     max_iterations=3, until="APPROVED")
    result = await Runner.run(flow, "write")
    assert speakers(model) == ["writer", "critic", "writer", "critic"]
    assert result.final_output == "APPROVED"
    assert result.reason == "until"


async def test_loop_until_may_be_a_function() -> None:
    model = ScriptedModel(by_agent={"counter": [text("1"), text("2"), text("3"), text("4")]})
    flow = LoopAgent("loop", steps=[agent("counter", model)], max_iterations=4,
                     until=lambda out: int(out) >= 3)
    result = await Runner.run(flow, "count")
    assert result.final_output == "3"
    assert len(model.requests) == 3


async def test_loop_stops_at_max_iterations() -> None:
    model = FunctionModel(lambda req: text(f"{req.agent} again"))
    flow = LoopAgent("loop", steps=[agent("writer", model), agent("critic", model)],
                     max_iterations=2, until="APPROVED")
    result = await Runner.run(flow, "write")
    assert speakers(model) == ["writer", "critic", "writer", "critic"]
    assert result.reason == "max_iterations"


def test_invalid_workflows_are_user_errors() -> None:
    with pytest.raises(UserError):
        LoopAgent("loop", steps=[Agent("a", instructions="x")], max_iterations=0)
    with pytest.raises(UserError):
        SequentialAgent("flow", steps=[])
    with pytest.raises(UserError):
        ParallelAgent("fan", branches=[])


# --------------------------------------------------------------------------- composition


async def test_workflows_nest() -> None:
    model = ScriptedModel(by_agent={
        "research_a": [text("A-FACTS")], "research_b": [text("B-FACTS")],
        "writer": [text("draft 1"), text("draft 2")],
        "critic": [text("more"), text("APPROVED")],
    })
    flow = SequentialAgent("flow", steps=[
        ParallelAgent("gather", branches=[agent("research_a", model),
                                          agent("research_b", model)]),
        LoopAgent("refine", steps=[agent("writer", model), agent("critic", model)],
                  max_iterations=3, until="APPROVED"),
    ])
    result = await Runner.run(flow, "topic")
    assert result.final_output == "APPROVED"
    first_writer = requests_of(model, "writer")[0]
    seen = "\n".join(m.content for m in first_writer.messages)
    assert "A-FACTS" in seen and "B-FACTS" in seen
    assert_valid_protocol(await session_messages(result.session))


async def test_a_team_step_is_followed_by_the_next_step() -> None:
    model = ScriptedModel(by_agent={"writer": [text("w")], "reviewer": [text("r")],
                                    "summarizer": [text("SUMMARY-DONE")]})
    team = Team("review", agents=[agent("writer", model), agent("reviewer", model)], rules=[
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), TerminateTarget("reviewed")),
    ])
    flow = SequentialAgent("flow", steps=[team, agent("summarizer", model)])
    result = await Runner.run(flow, "go")
    assert speakers(model) == ["writer", "reviewer", "summarizer"]
    assert result.final_output == "SUMMARY-DONE"


async def test_a_supervisor_and_a_swarm_as_steps() -> None:
    model = ScriptedModel(by_agent={
        "boss": [tool_call("worker", {"query": "do it"}), text("BOSS-DONE")],
        "worker": [text("worked")],
        "sales": [tool_call("transfer_to_billing")],
        "billing": [text("BILLING-DONE")],
    })
    boss = Agent("boss", instructions="x", model=model, pattern="supervisor",
                 tools=[agent("worker", model).as_tool()])
    desk = swarm("desk", [agent("sales", model), agent("billing", model)])
    flow = SequentialAgent("flow", steps=[boss, desk])
    result = await Runner.run(flow, "go")
    assert speakers(model) == ["boss", "worker", "boss", "sales", "billing"]
    assert result.final_output == "BILLING-DONE"
    billing = requests_of(model, "billing")[0]
    assert "BOSS-DONE" in "\n".join(m.content for m in billing.messages)


async def test_a_workflow_inside_a_team() -> None:
    model = ScriptedModel(by_agent={"a": [text("A")], "b": [text("B")], "judge": [text("JUDGED")]})
    pipeline = SequentialAgent("pipeline", steps=[agent("a", model), agent("b", model)])
    team = Team("t", agents=[pipeline, agent("judge", model)], rules=[
        Rule(FromSpeaker("pipeline"), AgentTarget("judge")),
        Rule(FromSpeaker("judge"), TerminateTarget("judged")),
    ])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["a", "b", "judge"]
    assert result.final_output == "JUDGED"
    assert result.reason == "judged"


async def test_a_workflow_as_a_tool() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("flow", {"query": "make a plan"}),
                        text("coordinated")],
        "outline": [text("OUTLINE")],
        "draft": [text("SUMMARY: PLAN-DRAFTED\nCONFIDENCE: high - simple")],
    })
    flow = SequentialAgent("flow", steps=[agent("outline", model), agent("draft", model)],
                           description="Plans things.")
    coordinator = Agent("coordinator", instructions="x", model=model, tools=[flow.as_tool()])
    session = MemorySession()
    result = await Runner.run(coordinator, "go", session=session)
    assert result.final_output == "coordinated"
    [res] = result.tool_results
    assert not res.is_error and "PLAN-DRAFTED" in res.message.content
    assert "OUTLINE" not in res.message.content  # the report, not the transcript
    outline = requests_of(model, "outline")[0]
    assert outline.messages[-1].content == "make a plan"
    [child] = session.child_sessions
    assert child.info.path == "coordinator/flow"
    assert result.reports[0].summary == "PLAN-DRAFTED"


async def test_a_loop_as_a_tool_reports_its_last_answer() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("refine", {"query": "improve"}), text("ok")],
        "writer": [text("v1"), text("v2")],
        "critic": [text("again"), text("APPROVED v2")],
    })
    loop = LoopAgent("refine", steps=[agent("writer", model), agent("critic", model)],
                     max_iterations=3, until="APPROVED")
    coordinator = Agent("coordinator", instructions="x", model=model,
                        tools=[loop.as_tool(report=False)])
    result = await Runner.run(coordinator, "go")
    [res] = result.tool_results
    assert res.message.content == "APPROVED v2"


async def test_a_swarm_hop_limit_does_not_leak_into_later_steps() -> None:
    model = ScriptedModel([tool_call("transfer_to_b", {}), text("b answers"),
                           tool_call("transfer_to_d", {}), text("d answers")])
    desk = swarm("sw", [agent("a", model), agent("b", model)], max_handoffs=1)
    d = agent("d", model)
    c = Agent("c", instructions="c", model=model, sub_agents=[d])
    flow = SequentialAgent("wf", steps=[desk, c])
    result = await Runner.run(flow, "go", max_handoffs=10)
    assert speakers(model) == ["a", "b", "c", "d"]
    assert requests_of(model, "c")[0].tools == ["transfer_to_d"]
    assert [r.message.content for r in result.tool_results] == \
        ["Transferred from a to b.", "Transferred from c to d."]
    assert not any(r.is_error for r in result.tool_results)
    assert result.final_output == "d answers"
    assert result.last_agent.name == "d"


async def test_a_team_output_guardrail_does_not_leak_into_later_steps() -> None:
    model = ScriptedModel([text("team member answer"), text("writer answer about refunds")])
    team = Team("t", agents=[agent("m1", model)], rules=[Rule(Always(), TerminateTarget("done"))],
                output_guardrails=[TopicDenyListGuardrail(["refunds"])])
    flow = SequentialAgent("wf", steps=[team, agent("writer", model)])
    result = await Runner.run(flow, "go")
    assert speakers(model) == ["m1", "writer"]
    assert result.final_output == "writer answer about refunds"
    assert result.reason == ""
    assert of_type(result.new_events, GuardrailTriggeredEvent) == []

