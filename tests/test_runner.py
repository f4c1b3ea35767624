"""Runner: results, turn limits, model errors, the test models, bad input from the model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import assert_valid_protocol, messages_of, of_type, session_messages, speakers
from relayrace import (
    Agent,
    HandoffEvent,
    MaxTurnsExceeded,
    Message,
    MessageEvent,
    ModelBehaviorError,
    ModelProviderError,
    RelayraceError,
    RunFinishedEvent,
    Runner,
    RunResult,
    RunStartedEvent,
    RunTimeout,
    ToolResultEvent,
    TransferPolicy,
    UserError,
    tool,
)
from relayrace.sessions import MemorySession
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


@tool
def fail(why: str) -> str:
    """Always fails."""
    raise RuntimeError(why)


def small_team(model: Any, *, mode: str = "per_agent") -> Agent:
    b = Agent("b", instructions="B", model=model, tools=[add], handoff_tools=mode)
    c = Agent("c", instructions="C", model=model, handoff_tools=mode)
    return Agent("a", instructions="A", model=model, tools=[add, fail], sub_agents=[b, c],
                 handoff_tools=mode)


# --- results ------------------------------------------------------------------------------


async def test_run_result_fields() -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), text("3")])
    agent = small_team(model)
    result = await Runner.run(agent, "1+2?")
    assert isinstance(result, RunResult)
    assert result.final_output == "3"
    assert result.last_agent is agent
    assert isinstance(result.trace_id, str) and result.trace_id
    kinds = [type(e) for e in result.new_events]
    assert kinds == [RunStartedEvent, MessageEvent, MessageEvent, ToolResultEvent, MessageEvent,
                     RunFinishedEvent]
    finished = result.new_events[-1]
    assert finished.status == "completed" and finished.output == "3"
    assert result.usage.total.requests == 2
    assert result.usage.per_agent["a"].requests == 2
    # The events of the run are exactly what the session holds.
    assert await result.session.get_events() == result.new_events


async def test_two_runs_get_distinct_traces_and_new_events_only() -> None:
    model = ScriptedModel([text("one"), text("two")])
    agent = Agent("a", instructions="x", model=model)
    session = MemorySession()
    r1 = await Runner.run(agent, "first", session=session)
    r2 = await Runner.run(agent, "second", session=session)
    assert r1.trace_id != r2.trace_id
    assert len(await session.get_events()) == len(r1.new_events) + len(r2.new_events)
    assert [m.content for m in model.requests[1].messages] == ["first", "one", "second"]
    assert r2.new_events[0].trace_id == r2.trace_id


def test_run_sync() -> None:
    model = ScriptedModel([tool_call("add", {"a": 20, "b": 22}), text("42")])
    result = Runner.run_sync(Agent("a", instructions="x", model=model, tools=[add]), "sum")
    assert result.final_output == "42"
    assert result.tool_results[0].message.content == "42"


async def test_messages_input() -> None:
    model = ScriptedModel([text("ok")])
    agent = Agent("a", instructions="x", model=model)
    await Runner.run(agent, [Message.user("one"), Message.assistant("two"),
                             Message.user("three")])
    assert [m.content for m in model.requests[0].messages] == ["one", "two", "three"]


async def test_agent_without_model_is_a_user_error() -> None:
    with pytest.raises(UserError):
        await Runner.run(Agent("a", instructions="x"), "hi")


async def test_run_model_override() -> None:
    model = ScriptedModel([text("from override")])
    result = await Runner.run(Agent("a", instructions="x"), "hi", model=model)
    assert result.final_output == "from override"


# --- test models --------------------------------------------------------------------------


async def test_scripted_model_is_shared_in_call_order_and_records_requests() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_b", {"reason": "sum"}),
        [tool_call("add", {"a": 1, "b": 1}), tool_call("add", {"a": 2, "b": 2})],
        text("2 and 4"),
    ])
    result = await Runner.run(small_team(model), "go")
    assert speakers(model) == ["a", "b", "b"]
    assert [r.instructions for r in model.requests] == ["A", "B", "B"]
    assert set(model.requests[0].tools) == {"add", "fail", "transfer_to_b", "transfer_to_c"}
    assert model.requests[1].tools == ["add"]
    assert [m.content for m in model.requests[0].messages] == ["go"]
    # Parallel calls: one assistant message with two calls, answered in order.
    last = model.requests[2].messages
    assert len(last[-3].tool_calls) == 2
    assert [m.content for m in last[-2:]] == ["2", "4"]
    assert result.final_output == "2 and 4"
    model.assert_complete()


async def test_assert_complete_fails_with_turns_left() -> None:
    model = ScriptedModel([text("one"), text("unused")])
    await Runner.run(Agent("a", instructions="x", model=model), "hi")
    with pytest.raises(AssertionError):
        model.assert_complete()


async def test_requests_snapshot_does_not_change_later() -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 1}), text("done")])
    await Runner.run(Agent("a", instructions="x", model=model, tools=[add]), "hi")
    assert len(model.requests[0].messages) == 1
    assert len(model.requests[1].messages) == 3


async def test_function_model() -> None:
    def fn(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "user":
            return tool_call("add", {"a": 3, "b": 4})
        return text(f"result is {last.content}")

    async def afn(request: Any) -> Any:
        await asyncio.sleep(0)
        return fn(request)

    def future_fn(request: Any) -> Any:  # any awaitable will do, not only a coroutine
        future = asyncio.get_running_loop().create_future()
        future.set_result(fn(request))
        return future

    for f in (fn, afn, future_fn):
        model = FunctionModel(f)
        result = await Runner.run(Agent("a", instructions="x", model=model, tools=[add]), "go")
        assert result.final_output == "result is 7"
        assert len(model.requests) == 2


async def test_a_plain_string_is_a_text_turn_and_usage_counts_it() -> None:
    model = ScriptedModel([["thinking... ", tool_call("add", {"a": 1, "b": 2})], "three"])
    agent = Agent("a", instructions="x", model=model, tools=[add])
    result = await Runner.run(agent, "go")
    assert result.final_output == "three"
    assert [m.content for m in model.requests[-1].messages[-2:]] == ["thinking... ", "3"]
    same = await Runner.run(Agent("a", instructions="x", model=ScriptedModel([text("first")])),
                            "go")
    first = await Runner.run(Agent("a", instructions="x", model=ScriptedModel(["first"])), "go")
    assert first.usage == same.usage and first.final_output == "first"


@pytest.mark.parametrize("turn", [None, {"text": "hi"}, 42, ["fine", 3.5]])
async def test_a_turn_of_the_wrong_type_is_a_clear_error_and_the_log_stays_valid(
    turn: Any,
) -> None:
    session = MemorySession()
    agent = Agent("a", instructions="x", model=FunctionModel(lambda request: turn))
    with pytest.raises(TypeError, match=r"function: a (part of a )?turn is") as failure:
        await Runner.run(agent, "go", session=session)
    assert type(turn if not isinstance(turn, list) else turn[1]).__name__ in str(failure.value)
    events = await session.get_events()
    assert [m.content for m in messages_of(events)] == ["go"]
    assert of_type(events, RunFinishedEvent)[-1].status == "failed"


async def test_test_models_can_run_without_recording_requests() -> None:
    model = FunctionModel(lambda request: f"reply {len(request.messages)}", record=False)
    session = MemorySession()
    for _ in range(3):
        result = await Runner.run(Agent("a", instructions="x", model=model), "hi", session=session)
    assert result.final_output == "reply 5" and model.requests == []
    assert result.usage.total.input_tokens > 0  # tokens are still counted
    scripted = ScriptedModel(["a", "b"], record=False)
    await Runner.run(Agent("a", instructions="x", model=scripted), "hi")
    await Runner.run(Agent("a", instructions="x", model=scripted), "hi")
    assert scripted.requests == [] and scripted.remaining == 0


# --- limits and failures ------------------------------------------------------------------


async def test_max_turns_exceeded_leaves_a_consistent_session() -> None:
    model = FunctionModel(lambda req: [tool_call("add", {"a": 1, "b": 1}),
                                       tool_call("add", {"a": 2, "b": 2})])
    session = MemorySession()
    with pytest.raises(MaxTurnsExceeded) as info:
        await Runner.run(Agent("a", instructions="x", model=model, tools=[add]), "loop",
                         session=session, max_turns=3)
    assert info.value.max_turns == 3
    assert len(model.requests) == 3
    events = await session.get_events()
    assert_valid_protocol(messages_of(events))
    assert len(of_type(events, ToolResultEvent)) == 6
    last = events[-1]
    assert isinstance(last, RunFinishedEvent) and last.status == "failed"


async def test_max_turns_must_be_positive() -> None:
    with pytest.raises(UserError):
        await Runner.run(Agent("a", instructions="x", model=ScriptedModel([text("x")])), "hi",
                         max_turns=0)


async def test_empty_model_turn_is_a_typed_error_and_nothing_is_lost() -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), Message.assistant("")])
    session = MemorySession()
    with pytest.raises(ModelBehaviorError):
        await Runner.run(Agent("a", instructions="x", model=model, tools=[add]), "go",
                         session=session)
    events = await session.get_events()
    assert [m.content for m in messages_of(events)][:1] == ["go"]
    assert len(of_type(events, ToolResultEvent)) == 1
    assert_valid_protocol(messages_of(events))
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status == "failed"


async def test_empty_parts_turn_is_a_typed_error() -> None:
    model = ScriptedModel([[]])
    with pytest.raises(ModelBehaviorError):
        await Runner.run(Agent("a", instructions="x", model=model), "go")


async def test_provider_error_ends_the_run_and_keeps_the_log() -> None:
    model = ScriptedModel([
        tool_call("add", {"a": 1, "b": 2}),
        ModelProviderError("boom", status_code=500),
    ])
    session = MemorySession()
    with pytest.raises(ModelProviderError) as info:
        await Runner.run(Agent("a", instructions="x", model=model, tools=[add]), "go",
                         session=session)
    assert info.value.status_code == 500
    events = await session.get_events()
    assert isinstance(events[0], RunStartedEvent)
    assert [m.role for m in messages_of(events)] == ["user", "assistant", "tool"]
    assert_valid_protocol(messages_of(events))
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.status == "failed"
    assert "boom" in finished.output


async def test_provider_error_after_handoff_keeps_handoff_and_active_agent() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_b", {"reason": "x"}),
        ModelProviderError("down", status_code=503),
        text("b recovered"),
    ])
    team = small_team(model)
    session = MemorySession()
    with pytest.raises(ModelProviderError):
        await Runner.run(team, "go", session=session)
    assert len(of_type(await session.get_events(), HandoffEvent)) == 1
    result = await Runner.run(team, "again", session=session)
    assert model.requests[2].agent == "b"
    assert result.final_output == "b recovered"


# --- bad input from the model: each is a tool result and the run goes on -------------------


BAD_CALLS = {
    "malformed-json": (tool_call("add", '{"a": 1, "b":'), ["JSON"]),
    "schema-failure": (tool_call("add", {"a": "one", "b": 2}), ["a"]),
    "missing-arg": (tool_call("add", {"a": 1}), ["b"]),
    "unknown-tool": (tool_call("multiply", {"a": 1}), ["multiply", "add"]),
    "forbidden-transfer": (tool_call("transfer_to_grandchild"), ["grandchild"]),
    "raising-tool": (tool_call("fail", {"why": "disk full"}), ["disk full"]),
    "non-object-args": (tool_call("add", "[1, 2]"), ["add"]),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
async def test_bad_model_input_becomes_a_tool_result(case: str) -> None:
    call, expected = BAD_CALLS[case]
    model = ScriptedModel([call, text("recovered")])
    gc = Agent("grandchild", instructions="g", model=model)
    b = Agent("b", instructions="B", model=model, sub_agents=[gc])
    agent = Agent("a", instructions="A", model=model, tools=[add, fail], sub_agents=[b])
    result = await Runner.run(agent, "go")
    assert result.final_output == "recovered"
    (ev,) = result.tool_results
    assert ev.is_error
    for word in expected:
        assert word in ev.message.content, (word, ev.message.content)
    assert result.handoffs == []
    assert model.requests[1].messages[-1] == ev.message
    assert_valid_protocol(await session_messages(result.session))


@pytest.mark.parametrize("mode", ["per_agent", "single"])
async def test_many_bad_calls_in_one_turn_each_get_exactly_one_result(mode: str) -> None:
    transfer_b = (tool_call("transfer_to_b") if mode == "per_agent"
                  else tool_call("transfer_to_agent", {"agent_name": "b"}))
    transfer_c = (tool_call("transfer_to_c") if mode == "per_agent"
                  else tool_call("transfer_to_agent", {"agent_name": "c"}))
    model = ScriptedModel([
        [
            tool_call("add", "{oops"),
            tool_call("nope"),
            tool_call("transfer_to_agent", {"agent_name": "zed"}),
            tool_call("fail", {"why": "x"}),
            transfer_b,
            tool_call("add", {"a": 1, "b": 1}),
            transfer_c,
        ],
        text("b here"),
    ])
    result = await Runner.run(small_team(model, mode=mode), "go")
    assert len(result.tool_results) == 7
    assert [h.to_agent for h in result.handoffs] == ["b"]
    assert result.last_agent.name == "b"
    assert_valid_protocol(await session_messages(result.session))


async def test_tool_call_ids_are_answered_even_if_duplicated_names() -> None:
    model = ScriptedModel([[tool_call("add", {"a": 1, "b": 1}) for _ in range(5)], text("ok")])
    result = await Runner.run(Agent("a", instructions="x", model=model, tools=[add]), "go")
    assert [e.message.content for e in result.tool_results] == ["2"] * 5
    assert_valid_protocol(await session_messages(result.session))


async def test_children_only_policy_rejects_child_to_parent_and_peer() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_b"),
        tool_call("transfer_to_a"),
        tool_call("transfer_to_c"),
        text("b stays"),
    ])
    result = await Runner.run(small_team(model), "go")
    assert result.last_agent.name == "b"
    assert [e.is_error for e in result.tool_results] == [False, True, True]
    assert_valid_protocol(await session_messages(result.session))


async def test_policy_with_peers_accepts_the_peer() -> None:
    model = ScriptedModel([tool_call("transfer_to_b"), tool_call("transfer_to_c"), text("c")])
    b = Agent("b", instructions="B", model=model, transfer_policy=TransferPolicy(to_peers=True))
    c = Agent("c", instructions="C", model=model)
    a = Agent("a", instructions="A", model=model, sub_agents=[b, c])
    result = await Runner.run(a, "go")
    assert result.last_agent.name == "c"


async def test_errors_are_relayrace_errors() -> None:
    for exc in (MaxTurnsExceeded(3), ModelBehaviorError("x"), ModelProviderError("x")):
        assert isinstance(exc, RelayraceError)


async def test_a_timeout_keeps_the_results_of_sequential_tools_that_already_ran() -> None:
    """The run stops while the second sequential tool runs: the first keeps its real result."""
    ran: list[str] = []

    @tool(sequential=True)
    async def charge(x: str) -> str:
        """Charge."""
        ran.append(x)
        return f"charged {x}"

    @tool(sequential=True)
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(5)  # outlasts the agent's 0.2 s timeout: the timeout is tested
        return "slow"

    model = ScriptedModel([[tool_call("charge", {"x": "42 EUR"}, id="c"),
                            tool_call("slow", id="s")]])
    agent = Agent("a", instructions="a", model=model, tools=[charge, slow], timeout=0.2)
    session = MemorySession()
    with pytest.raises(RunTimeout):
        await Runner.run(agent, "go", session=session)
    assert ran == ["42 EUR"]
    events = await session.get_events()
    results = {e.message.tool_call_id: e.message.content
               for e in of_type(events, ToolResultEvent)}
    assert results["c"] == "charged 42 EUR"
    assert results["s"].startswith("Outcome unknown"), results["s"]
    assert "RunTimeout" in results["s"]
    assert_valid_protocol(messages_of(events))
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status == "failed"
