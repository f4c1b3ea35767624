"""The engine's positional builders make exactly what the keyword constructors make."""

from __future__ import annotations

from typing import Any

from relayrace import Agent, Message, Runner, RunUsage, ToolCall, Usage
from relayrace._engine.builders import (
    new_context,
    new_handoff_event,
    new_message_event,
    new_request,
    new_run_finished_event,
    new_run_started_event,
    new_tool_message,
    new_tool_result_event,
)
from relayrace._engine.loop import AgentLoop
from relayrace._engine.state import RunState
from relayrace.agents.context import RunContext
from relayrace.core.events import (
    HandoffEvent,
    MessageEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolResultEvent,
    dump_events,
)
from relayrace.models import ModelRequest, ModelSettings
from relayrace.sessions import MemorySession
from relayrace.testing import FunctionModel, ScriptedModel
from relayrace.tracing import InMemoryTraceProcessor, Span, Trace


def same_event(fast: Any, slow: Any) -> None:
    fast.time = slow.time
    assert fast == slow
    assert dump_events([fast]) == dump_events([slow])  # every field set, and serializable


def test_event_builders_match_the_constructors() -> None:
    msg = Message("assistant", "hi", (ToolCall("c1", "t", "{}"),), None, "a")
    result = Message.tool("c1", "done", name="t")
    same_event(new_message_event("a", "p/a", msg, Usage(1, 2, 3), "m"),
               MessageEvent(agent="a", path="p/a", message=msg, usage=Usage(1, 2, 3), model="m"))
    same_event(new_message_event("a", "a", msg),
               MessageEvent(agent="a", path="a", message=msg))
    assert new_tool_message("done", "c1", "t") == result
    same_event(new_tool_result_event("a", "a", result, "t", True, "Traceback ..."),
               ToolResultEvent(agent="a", path="a", message=result, tool_name="t",
                               is_error=True, traceback="Traceback ..."))
    same_event(new_handoff_event("a", "a", "b", "why", "c1", "a"),
               HandoffEvent(agent="a", path="a", to_agent="b", reason="why", tool_call_id="c1",
                            returns_to="a"))
    same_event(new_run_started_event("a", "a", "t" * 32),
               RunStartedEvent(agent="a", path="a", trace_id="t" * 32))
    same_event(new_run_finished_event("a", "a", "failed", "boom", "why"),
               RunFinishedEvent(agent="a", path="a", status="failed", output="boom",
                                reason="why"))


async def test_request_and_context_builders_match_the_constructors() -> None:
    seen: list[ModelRequest] = []
    settings = ModelSettings(temperature=0.1)
    model = FunctionModel(lambda request: seen.append(request) or "ok")
    session = MemorySession()
    await Runner.run(Agent("a", instructions="sys", model=model, model_settings=settings), "hi",
                     session=session)
    (request,) = seen  # every field set: == compares them all
    assert request == ModelRequest(instructions="sys", messages=request.messages, tools=[],
                                   settings=settings, agent="a",
                                   conversation=session.session_id)
    assert request.messages[0].content == "hi"  # the live view: the answer follows it
    assert new_request("sys", request.messages, [], settings, "a", None,
                       session.session_id) == request
    msgs = [Message.user("hi")]
    agent = Agent("a", instructions="x", model=ScriptedModel())
    loop = AgentLoop(RunState(None, Trace()), agent, MemorySession())
    usage = loop.state.budget.usage
    assert usage == RunUsage()
    fast = new_context({"k": 1}, agent, "a", loop.log.session, usage, "c1", msgs, 2, None, loop,
                       "s:3:c1")
    assert fast == RunContext(context={"k": 1}, agent=agent, path="a", session=loop.log.session,
                              usage=usage, tool_call_id="c1", messages=msgs, depth=2,
                              span=None, children=loop, call_key="s:3:c1")


def test_spans_have_every_field() -> None:
    memory = InMemoryTraceProcessor()
    trace = Trace("f" * 32, processors=[memory])
    root = trace.start("run", "a", None)
    child = trace.start("tool", "t", root, call_id="c1")
    trace.end(child, "ToolRetry: bad")
    trace.end(root)
    assert memory.spans[0] == Span(trace_id="f" * 32, span_id=child.span_id,
                                   parent_id=root.span_id, kind="tool", name="t",
                                   start_ns=child.start_ns, end_ns=child.end_ns,
                                   attributes={"call_id": "c1"}, error="ToolRetry: bad")
    assert memory.spans[1].parent_id is None and memory.outline("f" * 32) == ["run:a", "  tool:t"]
