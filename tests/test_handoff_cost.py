"""What one handoff does, exactly, now that it does less work (issue 29, item 4): one
`Transfer` made per confirmed transfer, and the same events, spans, hook calls and usage as
before, on a memory session and on a persistent one."""

from __future__ import annotations

import gc
from typing import Any

import pytest

import relayrace._engine.moves as moves
from relayrace import Agent, RunContext, Runner, handoff, tool, tracing
from relayrace._engine.turn import Transfer
from relayrace.sessions import MemorySession
from relayrace.testing import FunctionModel, text, tool_call
from relayrace.tracing import (
    UNSEEN,
    InMemoryTraceProcessor,
    get_trace_processors,
    set_trace_processors,
)


def chain(size: int, *, hooked: list[str] | None = None) -> Agent[Any]:
    """a0 hands over to a1, ... to a{size}, which answers; ``hooked``: each handoff has an
    ``on_handoff`` hook that notes the reason it got."""

    def turn(req: Any) -> Any:
        i = int(req.agent[1:])
        return tool_call(f"transfer_to_a{i + 1}", {"reason": f"r{i}"}) if i < size \
            else text("done")

    def hook(ctx: RunContext[Any], reason: str) -> None:
        assert hooked is not None
        hooked.append(f"{ctx.agent.name}:{reason}")

    agent = Agent(f"a{size}", instructions="x", model=FunctionModel(turn))
    for i in range(size - 1, -1, -1):
        target: Any = agent if hooked is None else handoff(agent, on_handoff=hook)
        agent = Agent(f"a{i}", instructions="x", model=FunctionModel(turn), sub_agents=[target])
    return agent


async def test_a_confirmed_transfer_is_one_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transfer a call asks for is parsed, checked, and made once, with the call's
    result (its note) in it."""
    made: list[Transfer] = []

    class Counted(Transfer):
        __slots__ = ()

        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)

    monkeypatch.setattr(moves, "Transfer", Counted)
    result = await Runner.run(chain(3), "go")
    assert result.last_agent.name == "a3"
    assert [t.target.name for t in made] == ["a1", "a2", "a3"]
    assert all(t.note is not None and t.note.content.startswith("Transferred from ")
               for t in made)


@pytest.mark.parametrize("persistent", [False, True])
async def test_a_handoff_logs_and_traces_what_it_did(persistent: bool,
                                                     traces: InMemoryTraceProcessor) -> None:
    hooked: list[str] = []
    session = MemorySession()
    session.persistent = persistent  # type: ignore[misc]  # written as a durable log is
    result = await Runner.run(chain(2, hooked=hooked), "go", session=session)
    assert hooked == ["a0:r0", "a1:r1"]
    assert [(e.kind, e.agent) for e in session.events] == [
        ("run_started", "a0"), ("message", "a0"),
        ("message", "a0"), ("tool_result", "a0"), ("handoff", "a0"),
        ("message", "a1"), ("tool_result", "a1"), ("handoff", "a1"),
        ("message", "a2"), ("run_finished", "a2")]
    assert [r.message.content for r in result.tool_results] == [
        "Transferred from a0 to a1. Reason: r0", "Transferred from a1 to a2. Reason: r1"]
    assert [(e.to_agent, e.reason, e.tool_call_id) for e in result.handoffs] == [
        ("a1", "r0", "call_1"), ("a2", "r1", "call_1")]
    assert traces.outline(result.trace_id) == [
        "run:a0",
        "  agent:a0", "    model:function", "    handoff:a0 -> a1",
        "  agent:a1", "    model:function", "    handoff:a1 -> a2",
        "  agent:a2", "    model:function"]
    handoff = next(s for s in traces.spans if s.kind == "handoff")
    assert handoff.attributes == {"from_agent": "a0", "to_agent": "a1", "reason": "r0"}
    assert handoff.end_ns >= handoff.start_ns > 0 and handoff.error is None
    assert result.usage.total.requests == 3
    assert sorted(result.usage.per_agent) == ["a0", "a1", "a2"]


async def test_a_run_leaves_no_garbage_for_the_collector() -> None:
    """A run's state (its loop, session, events, usage) goes when the run does: nothing in it
    refers back to what holds it, so no garbage collection is needed to free it (in a
    handoff benchmark, those collections were a tenth of the time)."""

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    def turn(req: Any) -> Any:
        i, done = int(req.agent[1:]), sum(1 for m in req.messages if m.role == "tool")
        if i < 2:
            return tool_call(f"transfer_to_a{i + 1}", {"reason": "next"})
        return text("done") if done > 2 else tool_call("add", {"a": 1, "b": 2})

    agent = Agent("a2", instructions="x", model=FunctionModel(turn, record=False), tools=[add])
    for i in (1, 0):
        agent = Agent(f"a{i}", instructions="x", model=FunctionModel(turn, record=False),
                      sub_agents=[agent])
    await Runner.run(agent, "go")  # warm: first-time caches
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            result = await Runner.run(agent, "go")
            assert result.final_output == "done" and len(result.handoffs) == 2
        del result
        assert gc.collect() == 0
    finally:
        gc.enable()


async def test_a_run_with_no_trace_processor_makes_no_spans(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """Spans are made for the processors that record them: with none registered, a run's
    steps share one placeholder (`UNSEEN`), which a tool may write on without keeping
    anything; with one, every step has its own span again."""
    made: list[object] = []
    real_new = tracing._new

    def counted(cls: type) -> object:
        obj = real_new(cls)
        made.append(obj)
        return obj

    monkeypatch.setattr(tracing, "_new", counted)
    seen: list[tracing.Span | None] = []
    found: list[dict[str, Any]] = []

    @tool
    def note(ctx: RunContext[Any]) -> str:
        """Note the span the call runs in, and write on it every way a dict allows."""
        span = ctx.span
        assert span is not None
        seen.append(span)
        found.append(dict(span.attributes))
        span.attributes["server"] = "s"  # as an MCP tool writes on its span
        span.attributes |= {"user": f"u{len(seen)}"}
        span.attributes.update(more=1)
        span.attributes.setdefault("kept", 1)
        span.error, span.name = "mine", "renamed"
        return "noted"

    def turn(req: Any) -> Any:
        if req.agent == "a0":
            return tool_call("transfer_to_a1", {"reason": "r"})
        done = any(m.role == "tool" and m.name == "note" for m in req.messages)
        return text("done") if done else tool_call("note")

    target = Agent("a1", instructions="x", model=FunctionModel(turn), tools=[note])
    agent = Agent("a0", instructions="x", model=FunctionModel(turn), sub_agents=[target])
    saved = get_trace_processors()
    set_trace_processors([])
    try:
        for _ in range(2):  # nothing one run writes on the placeholder reaches the next
            result = await Runner.run(agent, "go")
            assert result.final_output == "done"
            assert [h.to_agent for h in result.handoffs] == ["a1"]
    finally:
        set_trace_processors(saved)
    assert made == [] and seen == [UNSEEN, UNSEEN] and found == [{}, {}]
    assert UNSEEN.attributes == {} and UNSEEN.end_ns == 0 and UNSEEN.error is None
    assert UNSEEN.name == "" and UNSEEN.span_id == 0

    processor = InMemoryTraceProcessor()
    set_trace_processors([processor])
    try:
        result = await Runner.run(agent, "go")
    finally:
        set_trace_processors(saved)
    assert processor.outline(result.trace_id) == [
        "run:a0", "  agent:a0", "    model:function", "    handoff:a0 -> a1",
        "  agent:a1", "    model:function", "    tool:renamed", "    model:function"]
    assert len(made) == 8 and seen[2] is not UNSEEN
    assert found[2] == {"call_id": seen[2].attributes["call_id"], "agent": "a1"}
    assert seen[2].kind == "tool" and seen[2].attributes["user"] == "u3"
