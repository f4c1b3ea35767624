"""One turn, decided without a `Runner`: the engine's turn and tool runner on a loop built by
hand, given the calls an assistant message made (or a scripted model's answers).

Each test states a turn's input (the agent, its calls) and checks what the turn decides: the
route it returns, the results it logs, in call order, and the run state it leaves.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from relayrace import Agent, Message, ToolCall, TransferPolicy, tool
from relayrace._engine.loop import AgentLoop
from relayrace._engine.state import RunState
from relayrace._engine.toolexec import Route, run_tools
from relayrace._engine.turn import (
    Answer,
    Blocked,
    Finished,
    RunAgain,
    TeamRoute,
    Transfer,
    Yield,
)
from relayrace.agents.guardrails import TopicDenyListGuardrail
from relayrace.core.exceptions import HandoffLoopError, MaxHandoffsExceeded
from relayrace.sessions import MemorySession
from relayrace.teams.routing import Finish, TransferTo
from relayrace.testing import ScriptedModel, tool_call
from relayrace.tracing import Trace

RAN: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look something up.

    Args:
        key: What to look up.
    """
    RAN.append(key)
    return f"value of {key}"


@tool
def wrap_up() -> Finish:
    """End the run."""
    RAN.append("wrap_up")
    return Finish("done", "all wrapped up")


@tool
def pass_on() -> TransferTo:
    """Hand over by name."""
    RAN.append("pass_on")
    return TransferTo("billing", "tool said so")


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def desk() -> tuple[Agent[Any], Agent[Any], Agent[Any]]:
    model = ScriptedModel()
    billing = Agent("billing", instructions="b", model=model)
    account = Agent("account", instructions="a", model=model, mode="task")
    triage = Agent("triage", instructions="t", model=model, tools=[lookup, wrap_up, pass_on],
                   sub_agents=[billing, account])
    return triage, billing, account


async def turn(loop: AgentLoop, agent: Agent[Any],
               *calls: tuple[str, dict[str, Any]]) -> tuple[Route | None, list[Message]]:
    """Run one turn's ``calls`` (as the assistant message of ``agent`` made them)."""
    made = tuple(ToolCall(f"c{i}", name, json.dumps(args)) for i, (name, args) in
                 enumerate(calls))
    loop.pieces.push(Message("assistant", "", made, None, agent.name))
    span = loop.pieces.state.trace.start("agent", agent.name, None)
    route = await run_tools(loop.pieces, agent, list(made), span, await loop.pieces.offer(agent))
    return route, [m for m in loop.transcript if m.role == "tool"]


def new_loop(entry: Agent[Any], **options: Any) -> AgentLoop:
    return AgentLoop(RunState(None, Trace()), entry, MemorySession(), **options)


async def test_ordinary_calls_run_and_are_answered_in_call_order() -> None:
    triage, _, _ = desk()
    loop = new_loop(triage)
    route, results = await turn(loop, triage, ("lookup", {"key": "a"}), ("lookup", {"key": "b"}))
    assert route is None
    assert [r.content for r in results] == ["value of a", "value of b"]
    assert [r.tool_call_id for r in results] == ["c0", "c1"]


async def test_the_first_routing_request_wins_and_the_rest_are_answered_not_performed() -> None:
    triage, billing, _ = desk()
    loop = new_loop(triage)
    route, results = await turn(loop, triage, ("lookup", {"key": "a"}),
                                ("transfer_to_billing", {"reason": "invoice"}),
                                ("transfer_to_account", {"reason": "password"}))
    assert route is not None and route.kind == "transfer" and route.target is billing
    assert route.note is not None and route.note.content.startswith("Transferred from triage")
    assert results[0].content == "value of a"  # the ordinary tool still ran
    assert results[2].content.startswith("Not performed: only the first routing request")
    assert "transfer to billing" in results[2].content
    assert loop.pieces.transfers.count == 1


async def test_a_typed_finish_from_a_tool_ends_the_turn_with_its_summary() -> None:
    triage, _, _ = desk()
    loop = new_loop(triage)
    route, results = await turn(loop, triage, ("wrap_up", {}), ("lookup", {"key": "a"}))
    assert route is not None and route.kind == "finish"
    assert (route.reason, route.summary) == ("done", "all wrapped up")
    assert [r.content for r in results] == ["Finishing the run: done", "value of a"]


async def test_a_typed_handoff_outside_a_team_transfers_by_name() -> None:
    triage, billing, _ = desk()
    loop = new_loop(triage)
    route, results = await turn(loop, triage, ("pass_on", {}))
    assert route is not None and route.target is billing
    assert results[0].content.startswith("Transferred from triage to billing")


async def test_unknown_and_forbidden_calls_are_refused_with_what_is_allowed() -> None:
    triage, billing, _ = desk()
    loop = new_loop(triage)
    route, results = await turn(loop, billing, ("nope", {}), ("transfer_to_account", {}))
    assert route is None  # billing may not transfer anywhere: its policy forbids peers
    assert results[0].content.startswith("Unknown tool 'nope'.")
    assert "not allowed from 'billing'" in results[1].content
    assert RAN == []


async def test_malformed_arguments_are_a_tool_error_the_model_can_correct() -> None:
    triage, _, _ = desk()
    loop = new_loop(triage)
    made = (ToolCall("c0", "lookup", "{" * 3000),)
    loop.pieces.push(Message("assistant", "", made, None, "triage"))
    span = loop.pieces.state.trace.start("agent", "triage", None)
    assert await run_tools(loop.pieces, triage, [ToolCall("c0", "lookup", "{" * 3000)], span,
                           await loop.pieces.offer(triage)) is None
    [result] = [m for m in loop.transcript if m.role == "tool"]
    assert "Invalid arguments for lookup" in result.content and RAN == []


async def test_a_swarm_limit_refuses_and_a_run_limit_ends_the_run() -> None:
    triage, _, _ = desk()
    loop = new_loop(triage, max_handoffs=0)
    with pytest.raises(MaxHandoffsExceeded):
        await turn(loop, triage, ("transfer_to_billing", {"reason": "r"}))
    # The refusal was answered and logged before the error: the session stays valid.
    assert [m.content for m in loop.transcript if m.role == "tool"] == [
        "Not performed: this run already made 0 handoffs."]


async def test_handing_back_and_forth_without_work_is_a_loop() -> None:
    model = ScriptedModel()
    b = Agent("b", instructions="b", model=model, transfer_policy=TransferPolicy(to_parent=True))
    a = Agent("a", instructions="a", model=model, sub_agents=[b])
    loop = new_loop(a)
    await turn(loop, a, ("transfer_to_b", {}))
    await turn(loop, b, ("transfer_to_a", {}))
    with pytest.raises(HandoffLoopError, match="a -> b -> a -> b"):  # the hops repeat
        await turn(loop, a, ("transfer_to_b", {}))


async def test_finish_task_returns_to_the_caller_with_the_result() -> None:
    triage, _, account = desk()
    loop = new_loop(triage)
    loop.pieces.transfers.resume(["triage"])  # triage handed account a task
    route, results = await turn(loop, account, ("finish_task", {"result": "password reset"}))
    assert route is not None and route.kind == "return" and route.target is triage
    assert route.summary == "password reset"
    assert results[0].content == "Returned to triage with the result."


async def test_a_target_whose_input_guardrail_blocks_refuses_the_transfer_and_ends_the_run(
) -> None:
    model = ScriptedModel()
    guarded = Agent("billing", instructions="b", model=model,
                    input_guardrails=[TopicDenyListGuardrail(["refund"])])
    triage = Agent("triage", instructions="t", model=model, sub_agents=[guarded])
    loop = new_loop(triage)
    loop.pieces.push(Message.user("I want a refund"))
    route, results = await turn(loop, triage, ("transfer_to_billing", {"reason": "refund"}))
    assert route is None and loop.pieces.control.blocked is not None
    assert results[0].content == ("Not performed: billing's input guardrail blocked the "
                                  "request.")
    assert loop.pieces.transfers.count == 0


async def test_a_turn_is_a_value_saying_what_happens_next() -> None:
    model = ScriptedModel([tool_call("lookup", {"key": "a"}), tool_call("wrap_up"),
                           tool_call("transfer_to_billing", {"reason": "invoice"}), "All set."])
    billing = Agent("billing", instructions="b", model=model)
    triage = Agent("triage", instructions="t", model=model, tools=[lookup, wrap_up],
                   sub_agents=[billing])
    loop = new_loop(triage)
    loop.pieces.push(Message.user("hi"))
    span = loop.pieces.state.trace.start("agent", "triage", None)
    done = await loop.take_turn(triage, span, [], False)
    message, again = done.message, done.next
    assert type(again) is RunAgain and message is not None
    assert message.tool_calls[0].name == "lookup"
    finished = (await loop.take_turn(triage, span, [], False)).next
    assert type(finished) is Finished and finished.text == "all wrapped up"
    moved = (await loop.take_turn(triage, span, [], False)).next
    assert type(moved) is Transfer and moved.target is billing
    answered = (await loop.take_turn(billing, span, [], False)).next
    assert answered == Answer("All set.")
    assert loop.pieces.control.turns == 4


async def test_a_single_turn_agent_that_answers_yields_to_its_caller() -> None:
    model = ScriptedModel(["Your balance is 42."])
    helper = Agent("helper", instructions="h", model=model, mode="single_turn")
    triage = Agent("triage", instructions="t", model=model, sub_agents=[helper])
    loop = new_loop(triage)
    loop.pieces.push(Message.user("balance?"))
    loop.pieces.transfers.resume(["triage"])  # triage handed the question to helper
    done = await loop.take_turn(helper, loop.pieces.state.trace.start("agent", "helper", None),
                                [], False)
    message, step = done.message, done.next
    assert step == Yield(triage)
    assert message is not None and message.content == "Your balance is 42."


async def test_in_a_team_a_tools_transfer_request_ends_the_turn_for_the_team() -> None:
    model = ScriptedModel([tool_call("pass_on")])
    triage = Agent("desk", instructions="t", model=model, tools=[pass_on])
    loop = new_loop(triage)
    loop.pieces.push(Message.user("hi"))
    loop.pieces.scope.speaker_turn(True)  # as a team's speaker (turns_of does this)
    span = loop.pieces.state.trace.start("agent", "desk", None)
    step = (await loop.take_turn(triage, span, [], True)).next
    assert type(step) is TeamRoute and step.route.name == "billing"
    assert RAN == ["pass_on"]


async def test_an_output_guardrail_that_blocks_the_answer_ends_the_turn_blocked() -> None:
    model = ScriptedModel(["Here is how to get a refund."])
    agent = Agent("a", instructions="a", model=model,
                  output_guardrails=[TopicDenyListGuardrail(["refund"])])
    loop = new_loop(agent)
    loop.pieces.push(Message.user("hi"))
    span = loop.pieces.state.trace.start("agent", "a", None)
    step = (await loop.take_turn(agent, span, [], False)).next
    # The block's answer replaces the text, and the run ends with it.
    assert type(step) is Answer and step.text.startswith("I'm sorry, I can't share")
    assert "Here is how" not in step.text and loop.pieces.control.blocked == step.text


async def test_an_input_guardrail_that_blocks_what_arrived_ends_the_turn_blocked() -> None:
    model = ScriptedModel(["unused"])
    agent = Agent("a", instructions="a", model=model,
                  input_guardrails=[TopicDenyListGuardrail(["refund"])])
    loop = new_loop(agent)
    loop.pieces.push(Message.user("I want a refund"))
    done = await loop.take_turn(agent, loop.pieces.state.trace.start("agent", "a", None), [],
                                         False)
    message, step = done.message, done.next
    assert type(step) is Blocked and message is None
    assert model.remaining == 1  # the model was never asked
