"""Runner.stream: typed events as they happen, text deltas, then the result."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import add, root_with_billing
from relayrace import (
    Agent,
    AgentEvent,
    HandoffEvent,
    MaxTurnsExceeded,
    MessageEvent,
    RunFinishedEvent,
    Runner,
    RunResult,
    RunStartedEvent,
    TextDeltaEvent,
    ToolResultEvent,
)
from relayrace.sessions import MemorySession
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


async def collect(stream: Any) -> list[AgentEvent]:
    return [event async for event in stream]


async def test_text_deltas_then_result() -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    model = ScriptedModel([text(answer)])
    stream = Runner.stream(Agent("a", instructions="x", model=model), "hi")
    assert stream.result is None
    events = await collect(stream)
    deltas = [e for e in events if isinstance(e, TextDeltaEvent)]
    assert len(deltas) > 1  # text arrives in pieces
    assert "".join(d.delta for d in deltas) == answer
    assert all(d.agent == "a" for d in deltas)
    assert isinstance(stream.result, RunResult)
    assert stream.result.final_output == answer
    # Deltas come before the final message event and before the run finishes.
    last_delta = max(i for i, e in enumerate(events) if isinstance(e, TextDeltaEvent))
    final_msg = max(i for i, e in enumerate(events) if isinstance(e, MessageEvent))
    assert last_delta < final_msg
    assert isinstance(events[0], RunStartedEvent)
    assert isinstance(events[-1], RunFinishedEvent)


async def test_a_model_without_native_streaming_still_streams_its_text() -> None:
    """Runner.stream promises text deltas; a model that only answers whole turns (the
    default Model.stream, FunctionModel) must still deliver its text as delta(s)."""
    model = FunctionModel(lambda req: text("whole answer at once"))
    stream = Runner.stream(Agent("a", instructions="x", model=model), "hi")
    events = await collect(stream)
    deltas = [e.delta for e in events if isinstance(e, TextDeltaEvent)]
    assert "".join(deltas) == "whole answer at once"
    assert stream.result is not None and stream.result.final_output == "whole answer at once"


async def test_stream_yields_every_logged_event_in_order() -> None:
    model = ScriptedModel([
        [text("Adding."), tool_call("add", {"a": 2, "b": 2})],
        tool_call("transfer_to_billing", {"reason": "money"}),
        text("Billing says four."),
    ])
    session = MemorySession()
    stream = Runner.stream(root_with_billing(model), "2+2", session=session)
    events = await collect(stream)
    logged = [e for e in events if not isinstance(e, TextDeltaEvent)]
    assert logged == await session.get_events()
    assert stream.result is not None
    assert logged == stream.result.new_events
    kinds = [type(e) for e in logged]
    assert ToolResultEvent in kinds and HandoffEvent in kinds
    assert kinds.index(ToolResultEvent) < kinds.index(HandoffEvent)
    assert stream.result.last_agent.name == "billing"
    billing_text = "".join(e.delta for e in events
                           if isinstance(e, TextDeltaEvent) and e.agent == "billing")
    assert billing_text == "Billing says four."


async def test_deltas_are_not_stored_in_the_session() -> None:
    session = MemorySession()
    model = ScriptedModel([text("some words here")])
    await collect(Runner.stream(Agent("a", instructions="x", model=model), "hi",
                                session=session))
    assert not any(isinstance(e, TextDeltaEvent) for e in await session.get_events())


async def test_events_arrive_while_the_run_is_in_progress() -> None:
    seen_before_second_turn: list[str] = []
    received: list[AgentEvent] = []

    async def fn(req: Any) -> Any:
        if len(req.messages) == 1:
            return tool_call("add", {"a": 1, "b": 1})
        await asyncio.sleep(0.01)  # a model's latency: the consumer gets to run meanwhile
        seen_before_second_turn.extend(type(e).__name__ for e in received)
        return text("two")

    stream = Runner.stream(Agent("a", instructions="x", model=FunctionModel(fn), tools=[add]),
                           "go")
    async for event in stream:
        received.append(event)
    assert "ToolResultEvent" in seen_before_second_turn


async def test_stream_error_is_raised_typed_and_result_stays_unset() -> None:
    model = FunctionModel(lambda req: tool_call("add", {"a": 1, "b": 1}))
    stream = Runner.stream(Agent("a", instructions="x", model=model, tools=[add]), "loop",
                           max_turns=2)
    events: list[AgentEvent] = []
    with pytest.raises(MaxTurnsExceeded):
        async for event in stream:
            events.append(event)
    assert stream.result is None
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status == "failed"


async def test_stream_rejects_unknown_options() -> None:
    from relayrace import UserError

    # The misspelled option is named as soon as the stream is created, before any work.
    with pytest.raises(UserError, match="sesion"):
        Runner.stream(Agent("a", instructions="x", model=ScriptedModel([text("x")])), "hi",
                      sesion=MemorySession())


async def test_stream_usage_matches_a_plain_run() -> None:
    turns = [tool_call("add", {"a": 1, "b": 2}), text("three")]
    plain = await Runner.run(root_with_billing(ScriptedModel(turns)), "sum")
    stream = Runner.stream(root_with_billing(ScriptedModel(turns)), "sum")
    await collect(stream)
    assert stream.result is not None
    assert stream.result.usage == plain.usage
