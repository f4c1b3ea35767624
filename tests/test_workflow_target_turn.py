"""A workflow as a handoff target: by default the agent that transferred answers again in the
same run; with ``ends_turn=True`` (ADK's choice) the workflow's answer ends the run and that
agent answers the next user turn. The two scenarios of ADK's ``test_agent_transfer.py``
(``test_auto_to_sequential``, ``test_auto_to_loop``), ported with scripted models."""

from __future__ import annotations

from typing import Any

from conftest import assert_valid_protocol, session_messages
from relayrace import Agent, Runner, TransferPolicy, tool
from relayrace.sessions import MemorySession
from relayrace.teams.routing import Finish
from relayrace.teams.workflows import LoopAgent, SequentialAgent
from relayrace.testing import ScriptedModel, text, tool_call

SINGLE = TransferPolicy(to_parent=False, to_peers=False)


@tool
def exit_loop() -> Finish:
    """Leave the loop."""
    return Finish("done", scope="loop")


async def spoken(session: MemorySession) -> list[tuple[str, str]]:
    """(agent, what it said) for each assistant message in the session."""
    return [(m.name or "", m.content or ",".join(c.name for c in m.tool_calls))
            for m in await session_messages(session) if m.role == "assistant"]


def root_with(flow: Any, model: ScriptedModel) -> Agent[Any]:
    return Agent("root_agent", instructions="Route.", model=model, sub_agents=[flow])


async def test_auto_to_sequential() -> None:
    model = ScriptedModel(by_agent={
        "root_agent": [tool_call("transfer_to_sub_agent_1"), text("response3")],
        "sub_agent_1_1": [text("response1")], "sub_agent_1_2": [text("response2")]})
    steps = [Agent(n, instructions=n, model=model, transfer_policy=SINGLE)
             for n in ("sub_agent_1_1", "sub_agent_1_2")]
    root = root_with(SequentialAgent("sub_agent_1", steps=steps, ends_turn=True), model)
    session = MemorySession()
    first = await Runner.run(root, "test1", session=session)
    assert await spoken(session) == [("root_agent", "transfer_to_sub_agent_1"),
                                     ("sub_agent_1_1", "response1"),
                                     ("sub_agent_1_2", "response2")]
    assert first.final_output == "response2" and first.last_agent.name == "sub_agent_1_2"
    # root_agent is the current agent again: the sequence is done.
    second = await Runner.run(root, "test2", session=session)
    assert (await spoken(session))[3:] == [("root_agent", "response3")]
    assert second.final_output == "response3"
    assert_valid_protocol(await session_messages(session))


async def test_auto_to_loop() -> None:
    model = ScriptedModel(by_agent={
        "root_agent": [tool_call("transfer_to_sub_agent_1"), text("response4"),
                       text("response5")],
        "sub_agent_1_1": [text("response1"), text("response3")],
        "sub_agent_1_2": [text("response2"), tool_call("exit_loop")]})
    one = Agent("sub_agent_1_1", instructions="1", model=model, transfer_policy=SINGLE)
    two = Agent("sub_agent_1_2", instructions="2", model=model, transfer_policy=SINGLE,
                tools=[exit_loop])
    flow = LoopAgent("sub_agent_1", steps=[one, two], max_iterations=10, ends_turn=True)
    root = root_with(flow, model)
    session = MemorySession()
    first = await Runner.run(root, "test1", session=session)
    # The loop was left through a tool, with no answer of its own: root_agent sums up.
    assert await spoken(session) == [
        ("root_agent", "transfer_to_sub_agent_1"), ("sub_agent_1_1", "response1"),
        ("sub_agent_1_2", "response2"), ("sub_agent_1_1", "response3"),
        ("sub_agent_1_2", "exit_loop"), ("root_agent", "response4")]
    assert first.final_output == "response4"
    second = await Runner.run(root, "test2", session=session)
    assert (await spoken(session))[6:] == [("root_agent", "response5")]
    assert second.final_output == "response5"
    assert_valid_protocol(await session_messages(session))


async def test_by_default_the_agent_that_transferred_answers_in_the_same_run() -> None:
    model = ScriptedModel(by_agent={
        "root_agent": [tool_call("transfer_to_sub_agent_1"), text("Here it is.")],
        "a": [text("response1")], "b": [text("response2")]})
    steps = [Agent(n, instructions=n, model=model) for n in ("a", "b")]
    result = await Runner.run(root_with(SequentialAgent("sub_agent_1", steps=steps), model),
                              "test1", session=MemorySession())
    assert result.final_output == "Here it is." and result.last_agent.name == "root_agent"
    assert [r.agent for r in model.requests] == ["root_agent", "a", "b", "root_agent"]
