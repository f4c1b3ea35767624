"""Coordination patterns: supervisor (workers only), swarm (peer handoffs), transfer_tool."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import (
    assert_valid_protocol,
    messages_of,
    of_type,
    requests_of,
    session_messages,
    speakers,
)
from relayrace import (
    Agent,
    HandoffEvent,
    HandoffLoopError,
    MaxHandoffsExceeded,
    MaxTurnsExceeded,
    Message,
    RunFinishedEvent,
    Runner,
    UserError,
    tool,
)
from relayrace.sessions import MemorySession
from relayrace.teams.patterns import swarm, transfer_tool
from relayrace.teams.routing import TransferTo
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


def transfer_tools(request: Any) -> set[str]:
    return {t for t in request.tools if t.startswith("transfer_to")}


# --------------------------------------------------------------------------- supervisor

CALLS: list[str] = []


@tool
def send_email(to: str) -> str:
    """Send an e-mail."""
    CALLS.append(to)
    return "sent"


def supervisor(model: Any, *, max_turns: int | None = None) -> Agent:
    writer = Agent("writer", instructions="You write.", description="Writes copy.", model=model)
    checker = Agent("checker", instructions="You check.", description="Checks facts.",
                    model=model)
    return Agent("boss", instructions="You supervise.", model=model, pattern="supervisor",
                 tools=[writer.as_tool(), checker.as_tool(), send_email], max_turns=max_turns)


async def test_supervisor_is_offered_only_its_workers() -> None:
    model = ScriptedModel(by_agent={"boss": [text("done")]})
    await Runner.run(supervisor(model), "go")
    assert set(model.requests[0].tools) == {"writer", "checker"}


async def test_supervisor_delegates_to_workers() -> None:
    model = ScriptedModel(by_agent={
        "boss": [tool_call("writer", {"query": "draft"}),
                 tool_call("checker", {"query": "check"}), text("all done")],
        "writer": [text("SUMMARY: draft written")],
        "checker": [text("SUMMARY: facts ok")],
    })
    result = await Runner.run(supervisor(model), "go")
    assert [d.child_agent for d in result.delegations] == ["writer", "checker"]
    assert result.final_output == "all done"
    assert result.last_agent.name == "boss"


async def test_supervisor_calling_an_ordinary_tool_is_refused() -> None:
    CALLS.clear()
    model = ScriptedModel(by_agent={"boss": [tool_call("send_email", {"to": "x@example.com"}),
                                             text("ok, I will not")]})
    result = await Runner.run(supervisor(model), "go")
    [res] = result.tool_results
    assert res.is_error
    assert "supervisor" in res.message.content
    assert "writer" in res.message.content and "checker" in res.message.content
    assert CALLS == []
    assert result.final_output == "ok, I will not"
    assert_valid_protocol(await session_messages(result.session))


async def test_supervisor_turns_are_bounded_by_max_turns() -> None:
    model = FunctionModel(lambda req: tool_call("writer", {"query": "again"})
                          if req.agent == "boss" else text("draft"))
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(supervisor(model, max_turns=3), "go")
    assert len(requests_of(model, "boss")) == 3


def test_supervisor_without_workers_is_a_user_error() -> None:
    with pytest.raises(UserError, match="worker"):
        Agent("boss", instructions="x", pattern="supervisor")
    with pytest.raises(UserError, match="worker"):
        Agent("boss", instructions="x", pattern="supervisor", tools=[send_email])


def test_supervisor_with_specialists_counts_them_as_workers() -> None:
    worker = Agent("w", instructions="x", description="d")
    boss = Agent("boss", instructions="x", pattern="supervisor", specialists=[worker])
    assert {t.name for t in boss.tools} >= {"delegate_to_agent"}


async def test_supervisor_is_not_offered_handoffs() -> None:
    model = ScriptedModel(by_agent={"boss": [text("done")]})
    sub = Agent("sub", instructions="x", model=model)
    writer = Agent("writer", instructions="x", model=model)
    boss = Agent("boss", instructions="x", model=model, pattern="supervisor",
                 tools=[writer.as_tool()], sub_agents=[sub])
    await Runner.run(boss, "go")
    assert transfer_tools(model.requests[0]) == set()


# --------------------------------------------------------------------------- swarm


def members(model: Any) -> list[Agent]:
    return [Agent(name, instructions=f"You are {name}.", description=f"{name} desk",
                  model=model) for name in ("sales", "billing", "support")]


async def test_swarm_members_hand_off_as_peers() -> None:
    model = ScriptedModel(by_agent={
        "sales": [tool_call("transfer_to_billing", {"reason": "invoice"})],
        "billing": [text("billing here")],
    })
    team = swarm("desk", members(model))
    result = await Runner.run(team, "I have an invoice question")
    assert speakers(model) == ["sales", "billing"]
    assert transfer_tools(model.requests[0]) == {"transfer_to_billing", "transfer_to_support"}
    assert transfer_tools(model.requests[1]) == {"transfer_to_sales", "transfer_to_support"}
    assert result.final_output == "billing here"
    assert result.last_agent.name == "billing"


async def test_swarm_remembers_the_active_agent_across_runs() -> None:
    model = ScriptedModel(by_agent={"sales": [tool_call("transfer_to_billing")],
                                    "billing": [text("first answer"), text("second answer")]})
    team = swarm("desk", members(model))
    session = MemorySession()
    await Runner.run(team, "question one", session=session)
    result = await Runner.run(team, "question two", session=session)
    assert speakers(model) == ["sales", "billing", "billing"]
    assert result.final_output == "second answer"
    assert_valid_protocol(await session_messages(session))


async def test_swarm_hides_and_refuses_handoffs_after_max_handoffs() -> None:
    model = ScriptedModel(by_agent={
        "sales": [tool_call("transfer_to_billing")],
        "billing": [tool_call("transfer_to_support"), text("I'll answer myself")],
        "support": [],
    })
    team = swarm("desk", members(model), max_handoffs=1)
    result = await Runner.run(team, "go")
    billing_requests = requests_of(model, "billing")
    assert transfer_tools(billing_requests[0]) == set()
    assert transfer_tools(billing_requests[1]) == set()
    refused = [r for r in result.tool_results if r.tool_name == "transfer_to_support"]
    assert len(refused) == 1 and refused[0].is_error
    assert not requests_of(model, "support")
    assert result.final_output == "I'll answer myself"
    assert len(result.handoffs) == 1
    assert_valid_protocol(await session_messages(result.session))


async def test_swarm_handoff_budget_is_per_run() -> None:
    model = ScriptedModel(by_agent={"sales": [tool_call("transfer_to_billing")],
                                    "billing": [text("one"), tool_call("transfer_to_support")],
                                    "support": [text("support here")]})
    team = swarm("desk", members(model), max_handoffs=1)
    session = MemorySession()
    await Runner.run(team, "go", session=session)
    result = await Runner.run(team, "again", session=session)
    assert transfer_tools(model.requests[2]) == {"transfer_to_sales", "transfer_to_support"}
    assert result.final_output == "support here"


async def test_swarm_receiver_sees_a_bounded_transcript_by_turns() -> None:
    model = ScriptedModel(by_agent={"sales": [text("old answer"), tool_call("transfer_to_billing")],
                                    "billing": [text("billing here")]})
    team = swarm("desk", members(model), transcript_turns=1)
    session = MemorySession()
    await Runner.run(team, "OLD-TOPIC question", session=session)
    await Runner.run(team, "NEW-TOPIC question", session=session)
    billing = requests_of(model, "billing")[0]
    seen = "\n".join(m.content for m in billing.messages)
    assert "NEW-TOPIC" in seen
    assert "OLD-TOPIC" not in seen and "old answer" not in seen
    assert_valid_protocol(billing.messages)
    # The session itself keeps everything.
    assert "OLD-TOPIC question" in [m.content for m in await session_messages(session)]


async def test_swarm_receiver_sees_a_bounded_transcript_by_chars() -> None:
    model = ScriptedModel(by_agent={"sales": [tool_call("transfer_to_billing")],
                                    "billing": [text("billing here")]})
    team = swarm("desk", members(model), transcript_chars=300)
    history = [Message.user("A" * 2000), Message.assistant("B" * 2000, name="sales"),
               Message.user("latest question")]
    await Runner.run(team, history)
    billing = requests_of(model, "billing")[0]
    assert sum(len(m.content) for m in billing.messages) <= 600
    assert "latest question" in [m.content for m in billing.messages]
    assert_valid_protocol(billing.messages)


async def test_first_swarm_member_sees_everything() -> None:
    model = ScriptedModel(by_agent={"sales": [text("hello")]})
    team = swarm("desk", members(model), transcript_turns=1)
    history = [Message.user("first"), Message.assistant("reply", name="sales"),
               Message.user("second")]
    await Runner.run(team, history)
    assert [m.content for m in model.requests[0].messages] == ["first", "reply", "second"]


def test_swarm_needs_two_agents() -> None:
    model = ScriptedModel()
    with pytest.raises(UserError):
        swarm("desk", members(model)[:1])
    with pytest.raises(UserError):
        Agent("x", instructions="x", pattern="swarm")


def test_swarm_does_not_take_over_the_given_agents() -> None:
    model = ScriptedModel()
    agents = members(model)
    swarm("desk", agents)
    swarm("desk2", agents)  # the originals can be reused: members are cloned
    assert all(a.parent is None for a in agents)


# --------------------------------------------------------------------------- transfer_tool


def test_transfer_tool_describes_a_handoff() -> None:
    t = transfer_tool("editor")
    assert t.name == "transfer_to_editor"
    assert "reason" in t.parameters["properties"]
    assert transfer_tool("editor", name="to_editor").name == "to_editor"


async def test_transfer_tool_returns_a_typed_handoff() -> None:
    t = transfer_tool("editor")
    value = await t.invoke(None, '{"reason": "needs polish"}')  # type: ignore[arg-type]
    assert value == TransferTo("editor", "needs polish")


def bouncing_pair(model: Any) -> Agent:
    """``a`` and its sub-agent ``b`` pass control back and forth with typed handoffs
    (``transfer_tool``, named apart from ``a``'s own transfer tool to ``b``)."""
    b = Agent("b", instructions="b", model=model, tools=[transfer_tool("a", name="pass_to_a")])
    return Agent("a", instructions="a", model=model,
                 tools=[transfer_tool("b", name="pass_to_b")], sub_agents=[b])


async def test_a_typed_handoff_outside_a_team_counts_against_max_handoffs() -> None:
    model = ScriptedModel([tool_call("pass_to_b"), tool_call("pass_to_a"),
                           tool_call("pass_to_b"), tool_call("pass_to_a"), text("end")])
    session = MemorySession()
    with pytest.raises(MaxHandoffsExceeded):
        await Runner.run(bouncing_pair(model), "go", max_handoffs=1, session=session)
    assert speakers(model) == ["a", "b"]
    events = await session.get_events()
    assert [(e.agent, e.to_agent) for e in of_type(events, HandoffEvent)] == [("a", "b")]
    assert_valid_protocol(messages_of(events))
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status == "failed"


async def test_typed_handoffs_bouncing_back_and_forth_are_a_handoff_loop() -> None:
    model = FunctionModel(lambda req: tool_call("pass_to_b" if req.agent == "a"
                                                else "pass_to_a"))
    session = MemorySession()
    with pytest.raises(HandoffLoopError) as info:
        await Runner.run(bouncing_pair(model), "go", max_turns=50, session=session)
    assert set(info.value.hops) == {"a", "b"}
    assert len(model.requests) <= 6
    events = await session.get_events()
    assert_valid_protocol(messages_of(events))
