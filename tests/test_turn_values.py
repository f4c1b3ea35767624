"""What a call and a turn decide are frozen values (``_engine.turn``, ``_engine.steps``), and a
tool call's identity is one value (``_engine.callkey.CallKey``) every key is spelled from."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from relayrace import Agent, Message, RunContext, Runner, ToolCall, tool
from relayrace._engine.callkey import CallKey
from relayrace._engine.loop import AgentLoop
from relayrace._engine.state import RunState
from relayrace._engine.steps import Finishing, Redirected, Returned, _attempts
from relayrace._engine.toolexec import run_tools
from relayrace._engine.turn import End, Transfer, TurnResult
from relayrace.sessions import MemorySession
from relayrace.testing import ScriptedModel, text, tool_call
from relayrace.tracing import Trace


async def test_a_confirmed_transfer_is_a_new_frozen_value_carrying_its_view_and_note() -> None:
    model = ScriptedModel()
    billing = Agent("billing", instructions="b", model=model)
    triage = Agent("triage", instructions="t", model=model, sub_agents=[billing])
    loop = AgentLoop(RunState(None, Trace()), triage, MemorySession())
    call = ToolCall("c0", "transfer_to_billing", json.dumps({"reason": "invoice"}))
    loop.pieces.push(Message("assistant", "", (call,), None, "triage"))
    span = loop.pieces.state.trace.start("agent", "t", None)
    route = await run_tools(loop.pieces, triage, [call], span,
                            await loop.pieces.offer(triage))
    assert type(route) is Transfer and route.target is billing and route.call is call
    assert route.note is not None and route.note.content.startswith("Transferred from triage")
    with pytest.raises(dataclasses.FrozenInstanceError):
        route.note = None  # type: ignore[misc]


async def test_what_a_turn_decides_cannot_be_changed_after_it_is_made() -> None:
    model = ScriptedModel([tool_call("transfer_to_billing", {"reason": "r"}), text("hi")])
    billing = Agent("billing", instructions="b", model=model)
    triage = Agent("triage", instructions="t", model=model, sub_agents=[billing])
    loop = AgentLoop(RunState(None, Trace()), triage, MemorySession())
    loop.pieces.push(Message.user("hello"))
    span = loop.pieces.state.trace.start("agent", "t", None)
    turn = await loop.take_turn(triage, span, [], False)
    step = turn.next
    assert type(turn) is TurnResult and type(step) is Transfer
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.next = End(step.call, "changed")  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.reason = "changed"  # type: ignore[misc]


def test_a_durable_step_recorded_before_the_variants_replays_as_the_same_outcome() -> None:
    # The JSON of a tool's attempt, as durable steps recorded it before (all fields always).
    def old(kind: str, **fields: str) -> str:
        return json.dumps({"kind": kind, "text": "", "tb": "", "reason": "", "summary": "",
                           "scope": "run", **fields})

    assert _attempts().validate_json(old("value", text="42")) == Returned("42")
    assert _attempts().validate_json(old("transfer", text="billing", reason="r")) == \
        Redirected("billing", "r")
    assert _attempts().validate_json(old("finish", reason="done", summary="s", scope="loop")) == \
        Finishing("done", "s", "loop")
    assert End(ToolCall("c", "t", "{}"), "done").kind == "finish"


def test_every_key_of_a_call_is_spelled_from_its_call_key() -> None:
    key = CallKey("sess", 3, ToolCall("c1", "lookup", '{"k": 1}'))
    assert key.context_key == "sess:3:c1"
    assert key.step_key == "sess/tool/3/c1/lookup"
    assert key.request == ("sess", "c1", "lookup", '{"k": 1}')
    assert key == CallKey("sess", 3, ToolCall("c1", "lookup", '{"k": 1}'))


async def test_a_tools_run_context_carries_its_calls_key() -> None:
    seen: list[str] = []

    @tool
    def probe(ctx: RunContext[Any]) -> str:
        """Report the call key."""
        seen.append(ctx.call_key)
        return "ok"

    model = ScriptedModel([tool_call("probe"), text("done")])
    result = await Runner.run(Agent("a", instructions="a", model=model, tools=[probe]), "go")
    call = model.requests[1].messages[-2].tool_calls[0]
    # The assistant message that made the call is the conversation's second (after the input).
    assert seen == [CallKey(result.session.session_id, 1, call).context_key]


def test_the_frozen_values_build_as_dataclasses() -> None:
    call = ToolCall("c", "t", "{}")
    end = End(call, reason="done")  # positional, keyword and default fields
    assert (end.call, end.reason, end.summary, end.scope) == (call, "done", "", "run")
    assert end == End(call, "done", "", "run") and end != End(call, "other")
    assert Transfer(call, None, "r").note is None  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        End()  # type: ignore[call-arg]  # the call is required
    with pytest.raises(TypeError):
        End(call, nope=1)  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        end.reason = "changed"  # type: ignore[misc]
    assert Returned("42") == Returned(text="42") and Returned("42").kind == "value"
