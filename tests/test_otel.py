"""Tests for relayrace.tracing.otel: relayrace spans exported to OpenTelemetry (GenAI semconv)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import relayrace.tracing as tracing
from relayrace import Agent, Runner, tool
from relayrace.core.exceptions import UserError
from relayrace.testing import ScriptedModel, text, tool_call
from relayrace.tracing import InMemoryTraceProcessor, Trace
from relayrace.tracing.otel import OpenTelemetryProcessor


@dataclass
class Setup:
    exporter: InMemorySpanExporter
    provider: TracerProvider
    memory: InMemoryTraceProcessor

    def use(self, **options: Any) -> OpenTelemetryProcessor:
        """Register an exporting processor (the fixture unregisters it)."""
        proc = OpenTelemetryProcessor(tracer_provider=self.provider, **options)
        tracing.add_trace_processor(proc)
        return proc

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def by_name(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.by_name(name)
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]


@pytest.fixture
def otel() -> Iterator[Setup]:
    previous = tracing.get_trace_processors()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    memory = InMemoryTraceProcessor()
    tracing.add_trace_processor(memory)
    try:
        yield Setup(exporter, provider, memory)
    finally:
        tracing.set_trace_processors(list(previous))
        provider.shutdown()


@tool
def lookup(x: int) -> str:
    """Look something up.

    Args:
        x: What to look up.
    """
    return f"found {x}"


@tool
def explode() -> str:
    """Always fails."""
    raise ValueError("boom")


def team(model: ScriptedModel) -> Agent[Any]:
    billing: Agent[Any] = Agent(
        "billing", instructions="Handle billing.", model=model, tools=[lookup, explode]
    )
    return Agent("triage", instructions="Route.", model=model, sub_agents=[billing])


def handoff_script() -> ScriptedModel:
    return ScriptedModel(
        [
            tool_call("transfer_to_billing", {"reason": "refund"}),
            tool_call("lookup", {"x": 1}),
            text("done"),
        ]
    )


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_handoff_run_exports_one_trace_mirroring_relayrace(otel: Setup) -> None:
    proc = otel.use(capture_content=True)
    model = handoff_script()
    result = await Runner.run(team(model), "I want my money back")
    assert result.final_output == "done"

    spans = otel.spans()
    ours = otel.memory.trace(result.trace_id)
    assert len(spans) == len(ours) == 8
    assert len({s.context.trace_id for s in spans}) == 1
    assert sorted(s.name for s in spans) == sorted(
        [
            "relayrace.run triage",
            "invoke_agent triage",
            "chat scripted",
            "handoff triage -> billing",
            "invoke_agent billing",
            "chat scripted",
            "execute_tool lookup",
            "chat scripted",
        ]
    )

    # Same tree: each OTel span's parent is the OTel span of the relayrace parent.
    by_rr_id = {attrs(s)["relayrace.span_id"]: s for s in spans}
    for rr in ours:
        o = by_rr_id[rr.span_id]
        assert (o.start_time, o.end_time) == (rr.start_ns, rr.end_ns)
        assert attrs(o)["relayrace.span.kind"] == rr.kind
        assert attrs(o)["relayrace.trace_id"] == result.trace_id
        if rr.parent_id is None:
            assert o.parent is None
        else:
            assert o.parent is not None
            assert o.parent.span_id == by_rr_id[rr.parent_id].context.span_id
    parent_kind = {
        rr.kind: {
            next(p.kind for p in ours if p.span_id == s.parent_id)
            for s in ours
            if s.kind == rr.kind
        }
        for rr in ours
        if rr.parent_id is not None
    }
    assert parent_kind == {
        "agent": {"run"},
        "model": {"agent"},
        "tool": {"agent"},
        "handoff": {"agent"},
    }

    run = otel.one("relayrace.run triage")
    assert attrs(run)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(run)["gen_ai.agent.name"] == "triage"
    # The session id becomes the conversation id of every span of the run.
    assert {attrs(s)["gen_ai.conversation.id"] for s in spans} == {result.session.session_id}
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    assert proc._open == {} and proc._roots == {}  # nothing kept once the spans ended


async def test_genai_attributes_of_model_tool_and_handoff_spans(otel: Setup) -> None:
    otel.use(capture_content=True)
    result = await Runner.run(team(handoff_script()), "refund please")
    ours = {s.span_id: s for s in otel.memory.trace(result.trace_id)}

    chats = otel.by_name("chat scripted")
    assert [attrs(c)["gen_ai.agent.name"] for c in chats] == ["triage", "billing", "billing"]
    for chat in chats:
        a = attrs(chat)
        rr = ours[a["relayrace.span_id"]]
        assert chat.kind is SpanKind.CLIENT
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "relayrace.test"
        assert a["gen_ai.request.model"] == "scripted"
        assert a["gen_ai.response.model"] == "scripted"
        assert a["gen_ai.usage.input_tokens"] == rr.attributes["input_tokens"] > 0
        assert a["gen_ai.usage.output_tokens"] == rr.attributes["output_tokens"]
    assert sum(attrs(c)["gen_ai.usage.input_tokens"] for c in chats) == (
        result.usage.total.input_tokens
    )

    lookup_span = otel.one("execute_tool lookup")
    a = attrs(lookup_span)
    assert lookup_span.kind is SpanKind.INTERNAL
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.tool.name"] == "lookup"
    assert a["gen_ai.tool.call.id"] == ours[a["relayrace.span_id"]].attributes["call_id"]
    assert a["gen_ai.tool.call.id"] == result.tool_results[-1].message.tool_call_id
    assert a["gen_ai.agent.name"] == "billing"

    h = attrs(otel.one("handoff triage -> billing"))
    assert h["relayrace.handoff.from"] == "triage"
    assert h["relayrace.handoff.to"] == "billing"
    assert h["relayrace.handoff.reason"] == "refund"
    assert h["relayrace.span.kind"] == "handoff"
    assert all(not k.startswith("relayrace.from_agent") for k in h)

    agent = attrs(otel.one("invoke_agent billing"))
    assert agent["gen_ai.operation.name"] == "invoke_agent"
    assert agent["gen_ai.agent.name"] == "billing"


async def test_content_is_opt_in(otel: Setup) -> None:
    otel.use()
    await Runner.run(team(handoff_script()), "refund please")
    h = attrs(otel.one("handoff triage -> billing"))
    assert "relayrace.handoff.reason" not in h
    assert (h["relayrace.handoff.from"], h["relayrace.handoff.to"]) == ("triage", "billing")


async def test_crashing_tool_marks_its_span_as_error(otel: Setup) -> None:
    otel.use()
    model = ScriptedModel(
        [
            tool_call("transfer_to_billing", {"reason": "r"}),
            tool_call("explode"),
            text("sorry"),
        ]
    )
    result = await Runner.run(team(model), "go")
    assert result.final_output == "sorry"  # the crash went to the model, not the caller
    span = otel.one("execute_tool explode")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ValueError: boom"
    assert attrs(span)["error.type"] == "ValueError"
    others = [s for s in otel.spans() if s is not span]
    assert all(s.status.status_code is StatusCode.UNSET for s in others)
    assert all("error.type" not in attrs(s) for s in others)


async def test_failed_run_marks_the_failing_spans(otel: Setup) -> None:
    proc = otel.use()
    model = ScriptedModel([RuntimeError("provider down")])
    with pytest.raises(RuntimeError):
        await Runner.run(team(model), "hi")
    for name in ("relayrace.run triage", "invoke_agent triage", "chat scripted"):
        span = otel.one(name)
        assert span.status.status_code is StatusCode.ERROR, name
        assert attrs(span)["error.type"] == "RuntimeError"
    assert proc._open == {} and proc._roots == {}


async def test_runs_inside_an_active_span_join_its_trace_and_tool_spans_nest_below(
        otel: Setup) -> None:
    otel.use()
    app = otel.provider.get_tracer("app")

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        with app.start_as_current_span("database query"):  # opened by the tool's own code
            return f"{order}: shipped"

    def agent(model: ScriptedModel) -> Agent[Any]:
        return Agent("triage", instructions="x", model=model, tools=[lookup])

    with app.start_as_current_span("request handler") as outer:
        first = await Runner.run(agent(ScriptedModel([text("a")])), "one")
        second = await Runner.run(agent(ScriptedModel(
            [tool_call("lookup", {"order": "A1"}), text("b")])), "two")
    assert first.trace_id != second.trace_id  # relayrace's own traces stay apart
    runs = otel.by_name("relayrace.run triage")
    assert len(runs) == 2
    outer_context = outer.get_span_context()
    assert all(r.parent is not None and r.parent.span_id == outer_context.span_id
               for r in runs)
    assert {r.context.trace_id for r in runs} == {outer_context.trace_id}
    query = otel.one("database query")
    tool_span = otel.one("execute_tool lookup")
    assert query.parent is not None and query.parent.span_id == tool_span.context.span_id
    # Outside any span, a run is a trace of its own, and nothing stays current after it.
    third = await Runner.run(agent(ScriptedModel([text("c")])), "three")
    [alone] = [r for r in otel.by_name("relayrace.run triage")
               if attrs(r)["relayrace.trace_id"] == third.trace_id]
    assert alone.parent is None and alone.context.trace_id != outer_context.trace_id
    assert not otel_trace.get_current_span().get_span_context().is_valid


def test_model_names_split_into_provider_and_model(otel: Setup) -> None:
    otel.use()
    trace = Trace()
    run = trace.start("run", "a", None, session_id="s1")
    model = trace.start("model", "openai:gpt-4o-mini", run, agent="a")
    model.attributes.update(input_tokens=7, output_tokens=3, response_model="gpt-4o-mini-2024")
    trace.end(model)
    claude = trace.start("model", "anthropic:claude-x", run, agent="a")
    trace.end(claude)
    trace.end(run)
    chat = attrs(otel.one("chat gpt-4o-mini"))
    assert chat["gen_ai.provider.name"] == "openai"
    assert chat["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat["gen_ai.response.model"] == "gpt-4o-mini-2024"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (7, 3)
    assert attrs(otel.one("chat claude-x"))["gen_ai.provider.name"] == "anthropic"


def test_delegation_and_guardrail_spans_and_extra_attributes(otel: Setup) -> None:
    otel.use()
    trace = Trace()
    run = trace.start("run", "lead", None, session_id="parent-session")
    agent = trace.start("agent", "lead", run)
    call = trace.start("tool", "research", agent, call_id="c1", agent="lead")
    delegation = trace.start(
        "delegation", "researcher", call, path="lead/researcher", tags=["x"], depth=1
    )
    child = trace.start("agent", "researcher", delegation, session_id="child-session")
    guard = trace.start("guardrail", "pii", child, stage="output")
    trace.end(guard, "GuardrailTripwireTriggered: pii found")
    for span in (child, delegation, call, agent, run):
        trace.end(span)

    delegation_o, child_o = sorted(
        otel.by_name("invoke_agent researcher"), key=lambda s: attrs(s)["relayrace.span_id"]
    )
    assert attrs(delegation_o)["relayrace.span.kind"] == "delegation"
    a = attrs(delegation_o)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["relayrace.path"] == "lead/researcher" and a["relayrace.depth"] == 1
    assert "relayrace.tags" not in a  # only primitive values are exported
    assert a["gen_ai.conversation.id"] == "parent-session"
    assert attrs(child_o)["gen_ai.conversation.id"] == "child-session"
    g = otel.one("guardrail pii")
    assert attrs(g)["gen_ai.conversation.id"] == "child-session"
    assert attrs(g)["relayrace.stage"] == "output"
    assert "gen_ai.operation.name" not in attrs(g)
    assert g.status.status_code is StatusCode.ERROR
    assert attrs(g)["error.type"] == "GuardrailTripwireTriggered"
    assert len({s.context.trace_id for s in otel.spans()}) == 1


def test_span_started_before_registration_is_ignored(otel: Setup) -> None:
    trace = Trace()  # captures the processors registered now: none of ours
    run = trace.start("run", "a", None)
    proc = otel.use()
    proc.on_span_end(run)  # ending a span it never saw is harmless
    trace.end(run)
    assert otel.spans() == []


def test_uses_the_global_provider_by_default(otel: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel_trace, "get_tracer_provider", lambda: otel.provider)
    proc = OpenTelemetryProcessor()
    trace = Trace("t" * 32, processors=[proc])
    trace.end(trace.start("run", "a", None))
    span = otel.one("relayrace.run a")
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "relayrace"


def test_missing_opentelemetry_raises_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "relayrace.tracing.otel")
    with pytest.raises(UserError, match=r"pip install 'relayrace\[otel\]'"):
        import relayrace.tracing.otel  # noqa: F401
