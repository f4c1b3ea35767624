"""Leaving a loop without ending the run: a step's tool returns ``Finish(scope="loop")``
(ADK's ``escalate``), and control goes on after the loop."""

from __future__ import annotations

import pytest

from conftest import assert_valid_protocol, session_messages
from relayrace import Agent, Runner, UserError, tool
from relayrace.sessions import MemorySession
from relayrace.teams.routing import Finish
from relayrace.teams.workflows import LoopAgent, SequentialAgent
from relayrace.testing import ScriptedModel, text, tool_call


@tool
def good_enough(why: str) -> Finish:
    """Say the draft is good enough, which ends the revision loop."""
    return Finish(why, scope="loop")


def pipeline(model: ScriptedModel) -> SequentialAgent:
    writer = Agent("writer", instructions="Write.", model=model)
    critic = Agent("critic", instructions="Critique.", model=model, tools=[good_enough])
    revise = LoopAgent("revise", steps=[writer, critic], max_iterations=5)
    publisher = Agent("publisher", instructions="Publish.", model=model)
    return SequentialAgent("pipeline", steps=[revise, publisher])


async def test_a_step_leaves_the_loop_and_the_run_goes_on_after_it() -> None:
    model = ScriptedModel(by_agent={
        "writer": [text("draft 1"), text("draft 2")],
        "critic": [text("too long"), tool_call("good_enough", {"why": "short now"})],
        "publisher": [text("Published draft 2.")]})
    session = MemorySession()
    result = await Runner.run(pipeline(model), "write a post", session=session)
    assert result.final_output == "Published draft 2."
    assert [r.agent for r in model.requests] == ["writer", "critic", "writer", "critic",
                                                  "publisher"]
    results = [m.content for m in await session_messages(session) if m.role == "tool"]
    assert results == ["Leaving the loop: short now"]
    assert_valid_protocol(await session_messages(session))


async def test_leaving_an_inner_loop_leaves_only_that_loop() -> None:
    model = ScriptedModel(by_agent={
        "writer": [text("a"), text("b"), text("c")],
        "critic": [tool_call("good_enough", {"why": "ok"})] * 2,
        "publisher": [text("p1"), text("p2")]})
    outer = LoopAgent("outer", steps=[pipeline(model)], max_iterations=2)
    result = await Runner.run(outer, "go", session=MemorySession())
    assert result.final_output == "p2"
    assert [r.agent for r in model.requests] == ["writer", "critic", "publisher",
                                                  "writer", "critic", "publisher"]


async def test_outside_a_loop_it_ends_the_turn_like_an_answer() -> None:
    model = ScriptedModel(by_agent={
        "critic": [tool_call("good_enough", {"why": "fine"})],
        "publisher": [text("Published.")]})
    critic = Agent("critic", instructions="Critique.", model=model, tools=[good_enough])
    flow = SequentialAgent("flow", steps=[critic,
                                          Agent("publisher", instructions="P.", model=model)])
    result = await Runner.run(flow, "go", session=MemorySession())
    assert result.final_output == "Published."


def test_an_unknown_scope_is_refused() -> None:
    with pytest.raises(UserError, match="scope is 'run'"):
        Finish("x", scope="team")  # type: ignore[arg-type]
