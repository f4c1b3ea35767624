"""Tracing (one trace per run: run > agent > model/tool/handoff) and usage accounting."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import add
from relayrace import (
    Agent,
    MaxTurnsExceeded,
    MessageEvent,
    Runner,
    Usage,
    tool,
)
from relayrace.sessions import MemorySession
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call
from relayrace.tracing import InMemoryTraceProcessor, Span, get_trace_processors


def team(model: Any) -> Agent:
    billing = Agent("billing", instructions="You are billing. " * 5, model=model, tools=[add])
    return Agent("triage", instructions="You are triage.", model=model, tools=[add],
                 sub_agents=[billing])


SCRIPT = [
    [tool_call("add", {"a": 1, "b": 2}), tool_call("add", {"a": 3, "b": 4})],
    tool_call("transfer_to_billing", {"reason": "invoice question"}),
    tool_call("add", {"a": 10, "b": 20}),
    text("Your invoice total is 30."),
]


def by_id(spans: list[Span]) -> dict[int, Span]:
    return {s.span_id: s for s in spans}


def test_fixture_restores_processors(traces: InMemoryTraceProcessor) -> None:
    assert get_trace_processors() == (traces,)


async def test_one_trace_per_run(traces: InMemoryTraceProcessor) -> None:
    model = ScriptedModel(SCRIPT + [text("again")])
    session = MemorySession()
    r1 = await Runner.run(team(model), "invoice?", session=session)
    r2 = await Runner.run(team(model), "more", session=session)
    assert r1.trace_id != r2.trace_id
    assert {s.trace_id for s in traces.spans} == {r1.trace_id, r2.trace_id}
    for r in (r1, r2):
        spans = traces.trace(r.trace_id)
        roots = [s for s in spans if s.parent_id is None]
        assert [(s.kind) for s in roots] == ["run"]
        ids = by_id(spans)
        for s in spans:
            assert s.parent_id is None or s.parent_id in ids  # all inside this trace
            assert s.end_ns >= s.start_ns > 0  # every span was closed


async def test_span_tree_run_agent_model_tool_handoff(traces: InMemoryTraceProcessor) -> None:
    model = ScriptedModel(SCRIPT)
    result = await Runner.run(team(model), "invoice?")
    spans = traces.trace(result.trace_id)
    ids = by_id(spans)
    (run,) = [s for s in spans if s.kind == "run"]
    agents = [s for s in spans if s.kind == "agent"]
    assert [a.name for a in agents] == ["triage", "billing"]
    assert all(a.parent_id == run.span_id for a in agents)
    for kind in ("model", "tool", "handoff"):
        for s in (s for s in spans if s.kind == kind):
            assert s.parent_id is not None and ids[s.parent_id].kind == "agent", s

    def under(agent_name: str, kind: str) -> list[Span]:
        (agent,) = [a for a in agents if a.name == agent_name]
        return [s for s in spans if s.kind == kind and s.parent_id == agent.span_id]

    assert len(under("triage", "model")) == 2
    assert len(under("billing", "model")) == 2
    assert [s.name for s in under("triage", "tool")] == ["add", "add"]
    assert [s.name for s in under("billing", "tool")] == ["add"]
    assert len(under("triage", "handoff")) == 1
    assert under("billing", "handoff") == []
    # The tree helper sees the same nesting.
    outline = traces.outline(result.trace_id)
    assert outline[0].startswith("run:")
    assert outline[1] == "  agent:triage"
    assert sum(1 for line in outline if line.startswith("    model:")) == 4
    # Spans are ordered in time within their parent.
    triage_children = sorted(under("triage", "model") + under("triage", "tool"),
                             key=lambda s: s.start_ns)
    assert [s.kind for s in triage_children] == ["model", "tool", "tool", "model"]


async def test_failed_run_closes_spans_with_an_error(traces: InMemoryTraceProcessor) -> None:
    model = FunctionModel(lambda req: tool_call("add", {"a": 1, "b": 1}))
    with pytest.raises(MaxTurnsExceeded) as info:
        await Runner.run(Agent("a", instructions="x", model=model, tools=[add]), "go",
                         max_turns=2)
    trace_ids = {s.trace_id for s in traces.spans}
    assert len(trace_ids) == 1
    (run,) = [s for s in traces.spans if s.kind == "run"]
    assert run.error is not None and "MaxTurnsExceeded" in run.error
    assert all(s.end_ns for s in traces.spans)
    assert info.value.max_turns == 2


async def test_tool_failure_is_recorded_on_its_span(traces: InMemoryTraceProcessor) -> None:
    @tool
    def broken() -> str:
        """Broken."""
        raise OSError("disk gone")

    model = ScriptedModel([tool_call("broken"), text("ok")])
    result = await Runner.run(Agent("a", instructions="x", model=model, tools=[broken]), "go")
    (span,) = [s for s in traces.trace(result.trace_id) if s.kind == "tool"]
    assert span.error is not None and "disk gone" in span.error


# --- usage --------------------------------------------------------------------------------


def _sum(usages: list[Usage]) -> tuple[int, int, int]:
    return (sum(u.requests for u in usages), sum(u.input_tokens for u in usages),
            sum(u.output_tokens for u in usages))


async def test_usage_is_summed_per_agent_and_per_run() -> None:
    model = ScriptedModel(SCRIPT)
    result = await Runner.run(team(model), "invoice?")
    usage = result.usage
    responses = [e for e in result.new_events
                 if isinstance(e, MessageEvent) and e.message.role == "assistant"]
    assert all(e.usage is not None for e in responses)
    total = _sum([e.usage for e in responses])
    assert (usage.total.requests, usage.total.input_tokens, usage.total.output_tokens) == total
    assert usage.total.requests == len(model.requests) == 4
    assert usage.total.input_tokens > 0 and usage.total.output_tokens > 0
    assert set(usage.per_agent) == {"triage", "billing"}
    for name in ("triage", "billing"):
        mine = [e.usage for e in responses if e.agent == name]
        per = usage.per_agent[name]
        assert (per.requests, per.input_tokens, per.output_tokens) == _sum(mine)
    assert usage.per_agent["triage"].requests == 2
    assert usage.per_agent["billing"].input_tokens > 0
    # Per-agent figures add up to the total.
    agents = list(usage.per_agent.values())
    assert _sum(agents) == total
    assert usage.total.total_tokens == usage.total.input_tokens + usage.total.output_tokens


async def test_usage_counts_tool_calls() -> None:
    model = ScriptedModel(SCRIPT)
    result = await Runner.run(team(model), "invoice?")
    assert result.usage.per_agent["billing"].tool_calls >= 1
    assert result.usage.total.tool_calls >= 3


async def test_usage_is_per_run_not_per_session() -> None:
    model = ScriptedModel([text("one"), text("two")])
    agent = Agent("solo", instructions="x", model=model)
    session = MemorySession()
    r1 = await Runner.run(agent, "a", session=session)
    r2 = await Runner.run(agent, "b", session=session)
    assert r1.usage.total.requests == 1
    assert r2.usage.total.requests == 1
    assert r2.usage.total.input_tokens > r1.usage.total.input_tokens  # longer history


async def test_model_span_tokens_match_usage(traces: InMemoryTraceProcessor) -> None:
    result = await Runner.run(team(ScriptedModel(SCRIPT)), "invoice?")
    model_spans = [s for s in traces.trace(result.trace_id) if s.kind == "model"]
    assert sum(s.attributes.get("input_tokens", 0) for s in model_spans) == (
        result.usage.total.input_tokens)
    assert sum(s.attributes.get("output_tokens", 0) for s in model_spans) == (
        result.usage.total.output_tokens)


async def test_trace_ids_do_not_repeat_when_the_application_seeds_random() -> None:
    import random

    from relayrace import Agent, Runner
    from relayrace.testing import ScriptedModel

    agent = Agent("a", instructions="x", model=ScriptedModel(["one", "two"]))
    random.seed(7)
    first = await Runner.run(agent, "hi")
    random.seed(7)
    second = await Runner.run(agent, "hi")
    assert first.trace_id != second.trace_id
