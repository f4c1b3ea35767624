"""Delegation: an agent called as a tool runs in a child session and reports back.

Covers ``Agent.as_tool``: parameters and their validation, context transforms, rate limits,
child sessions, history passing, the shared run (context, trace, cancellation), the handoff
report the parent receives, failures of the child, and streaming of children's events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from conftest import assert_valid_protocol, of_type, requests_of, session_messages, shown
from relayrace import (
    Agent,
    DelegationEvent,
    Message,
    MessageEvent,
    RateLimit,
    RunContext,
    RunFinishedEvent,
    Runner,
    TextDeltaEvent,
    ToolResultEvent,
    UserError,
    keep_last,
    tool,
)
from relayrace.core.reports import DelegationReport
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call
from relayrace.tracing import InMemoryTraceProcessor

# --------------------------------------------------------------------------- helpers


def tool_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


def coordinator(model: Any, child_tool: Any, *, tools: Sequence[Any] = ()) -> Agent:
    return Agent("coordinator", instructions="You coordinate research.", model=model,
                 tools=[child_tool, *tools])


def researcher(model: Any, *, instructions: str = "You research companies.",
               tools: Sequence[Any] = ()) -> Agent:
    return Agent("researcher", instructions=instructions, description="Finds facts.",
                 model=model, tools=tools)


REPORT = """Done.

<handoff>
SUMMARY: Acme grew 12% in 2023.
KEY_FINDINGS:
- Revenue rose to $1.2B
SOURCES:
- annual report
CONFIDENCE: high - audited figures
GAPS:
- none
</handoff>
"""


# --------------------------------------------------------------------------- parameters


async def test_default_parameters_take_one_required_query() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "Acme revenue"}),
                        text("final")],
        "researcher": [text("Acme made $1.2B")],
    })
    agent_tool = researcher(model).as_tool()
    schema = agent_tool.parameters
    assert schema["type"] == "object"
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["required"] == ["query"]
    result = await Runner.run(coordinator(model, agent_tool), "research Acme")
    assert "researcher" in model.requests[0].tools
    child = requests_of(model, "researcher")[0]
    # The child's task is the query, as its user message.
    assert child.messages[-1].role == "user"
    assert child.messages[-1].content == "Acme revenue"
    assert result.final_output == "final"


async def test_name_and_description_are_configurable() -> None:
    model = ScriptedModel()
    agent_tool = researcher(model).as_tool(name="ask researcher!", description="Ask it.")
    assert agent_tool.name == "ask_researcher_"
    assert agent_tool.description == "Ask it."
    assert researcher(model).as_tool().description == "Finds facts."


async def test_missing_query_is_a_tool_error_and_the_run_continues() -> None:
    model = ScriptedModel(by_agent={"coordinator": [tool_call("researcher", {"topic": "Acme"}),
                                                    text("recovered")],
                                    "researcher": []})
    result = await Runner.run(coordinator(model, researcher(model).as_tool()), "go")
    [res] = result.tool_results
    assert res.is_error
    assert "query" in res.message.content
    assert requests_of(model, "researcher") == []  # the child never ran
    assert result.final_output == "recovered"
    assert_valid_protocol(await session_messages(result.session))


async def test_malformed_json_arguments_are_a_tool_error() -> None:
    model = ScriptedModel(by_agent={"coordinator": [tool_call("researcher", '{"query": "Acme"'),
                                                    text("recovered")],
                                    "researcher": []})
    result = await Runner.run(coordinator(model, researcher(model).as_tool()), "go")
    [res] = result.tool_results
    assert res.is_error and "JSON" in res.message.content
    assert result.final_output == "recovered"


JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"company": {"type": "string"}, "year": {"type": "integer", "minimum": 2000}},
    "required": ["company", "year"],
}


async def test_json_schema_parameters_are_offered_and_validated() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"company": "Acme", "year": "last"}),
                        tool_call("researcher", {"company": "Acme", "year": 2023}),
                        text("final")],
        "researcher": [text("Acme 2023: fine")],
    })
    agent_tool = researcher(model).as_tool(parameters=JSON_SCHEMA)
    assert agent_tool.parameters == JSON_SCHEMA
    result = await Runner.run(coordinator(model, agent_tool), "go")
    bad, good = result.tool_results
    assert bad.is_error and "year" in bad.message.content
    assert not good.is_error
    # Without a query, the child's task carries the arguments.
    task = requests_of(model, "researcher")[0].messages[-1].content
    assert "Acme" in task and "2023" in task
    assert len(requests_of(model, "researcher")) == 1
    assert result.final_output == "final"


async def test_invalid_json_schema_is_refused_at_construction() -> None:
    with pytest.raises(UserError, match="schema"):
        researcher(ScriptedModel()).as_tool(parameters={"type": "no-such-type"})


class CompanyQuery(BaseModel):
    company: str
    year: int


async def test_pydantic_parameters_are_offered_and_validated() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"company": "Acme"}),
                        tool_call("researcher", {"company": "Acme", "year": 2021}),
                        text("final")],
        "researcher": [text("ok")],
    })
    agent_tool = researcher(model).as_tool(parameters=CompanyQuery)
    assert set(agent_tool.parameters["properties"]) == {"company", "year"}
    assert set(agent_tool.parameters["required"]) == {"company", "year"}
    result = await Runner.run(coordinator(model, agent_tool), "go")
    bad, good = result.tool_results
    assert bad.is_error and "year" in bad.message.content
    assert not good.is_error
    assert len(requests_of(model, "researcher")) == 1


async def test_parameters_of_another_type_are_a_user_error() -> None:
    with pytest.raises(UserError):
        researcher(ScriptedModel()).as_tool(parameters=[("query", str)])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- context transform

TRANSFORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"company": {"type": "string"}, "notes": {"type": "string"},
                   "vip": {"type": "boolean"}, "query": {"type": "string"}},
}


async def run_transform(transform: str, args: dict[str, Any],
                        instructions: str) -> tuple[Any, FunctionModel]:
    model = ScriptedModel(by_agent={"coordinator": [tool_call("researcher", args), text("final")],
                                    "researcher": [text("child answer")]})
    child = researcher(model, instructions=instructions)
    agent_tool = child.as_tool(parameters=TRANSFORM_SCHEMA, context_transform=transform)
    result = await Runner.run(coordinator(model, agent_tool), "go")
    return result, model


@pytest.mark.parametrize("company", [
    "Acme",
    'Acme "Rockets", Inc.: the {best} one',
    "Line one\nLine two: with a colon, and a comma",
    "back\\slash and 'single' quotes",
])
async def test_json_transform_values_arrive_intact(company: str) -> None:
    result, model = await run_transform('{"company": "{{ data.company }}"}',
                                        {"company": company, "query": "q"},
                                        "Research <<{{ company }}>> now.")
    [child] = requests_of(model, "researcher")
    assert f"Research <<{company}>> now." in child.instructions
    assert not result.tool_results[0].is_error


async def test_the_transforms_object_is_the_childs_context_too() -> None:
    # Astromesh passes the object as the child's `context`; a run without a context of its
    # own reads the keys there as well as bare.
    _, model = await run_transform('{"company": "{{ data.company }}"}',
                                   {"company": "Acme", "query": "q"},
                                   "For {{ context.company }} ({{ company }}).")
    [child] = requests_of(model, "researcher")
    assert child.instructions.startswith("For Acme (Acme).")


async def test_transform_with_default_truncate_and_if() -> None:
    notes = "word " * 60
    transform = ('{"company": "{{ data.company | default(\'an unnamed company\') }}", '
                 '"notes": "{{ data.notes | truncate(30) }}", '
                 '"tier": "{% if data.vip %}gold{% else %}basic{% endif %}"}')
    instructions = "About {{ company }}. Tier {{ tier }}. Notes: [{{ notes }}]"
    _, model = await run_transform(transform, {"notes": notes, "vip": True}, instructions)
    [child] = requests_of(model, "researcher")
    assert "About an unnamed company." in child.instructions
    assert "Tier gold." in child.instructions
    shown = child.instructions.split("Notes: [", 1)[1].split("]", 1)[0]
    assert shown.startswith("word word")
    assert len(shown) <= 40 and shown != notes.strip()
    assert "{{" not in child.instructions and "{%" not in child.instructions

    _, model = await run_transform(transform, {"company": "Beta", "notes": "short",
                                               "vip": False}, instructions)
    [child] = requests_of(model, "researcher")
    assert "About Beta. Tier basic. Notes: [short]" in child.instructions


async def test_transform_missing_key_without_default_is_an_error_naming_the_key() -> None:
    result, model = await run_transform('{"company": "{{ data.company }}"}', {"query": "q"},
                                        "Research {{ company }}.")
    [res] = result.tool_results
    assert res.is_error
    assert "company" in res.message.content
    assert requests_of(model, "researcher") == []  # the child never ran with a literal {{
    assert result.final_output == "final"  # the parent went on


async def test_transform_cannot_reach_python_internals() -> None:
    result, model = await run_transform('{"x": "{{ data.__class__.__mro__ }}"}',
                                        {"query": "q"}, "Look at {{ x }}.")
    [res] = result.tool_results
    assert res.is_error
    assert "<class" not in res.message.content
    assert requests_of(model, "researcher") == []
    assert result.final_output == "final"


async def test_transform_values_are_not_rendered_again_as_templates() -> None:
    _, model = await run_transform('{"company": "{{ data.company }}"}',
                                   {"company": "{{ 7 * 7 }}", "query": "q"},
                                   "Research {{ company }}.")
    [child] = requests_of(model, "researcher")
    assert "Research {{ 7 * 7 }}." in child.instructions
    assert "49" not in child.instructions


# --------------------------------------------------------------------------- rate limit


async def test_rate_limit_tells_the_model_when_to_call_again() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "a"}),
                        tool_call("researcher", {"query": "b"}), text("final")],
        "researcher": [text("first"), text("second")],
    })
    agent_tool = researcher(model).as_tool(rate_limit=RateLimit(1, 60))
    result = await Runner.run(coordinator(model, agent_tool), "go")
    first, second = result.tool_results
    assert not first.is_error
    assert second.is_error
    assert "again" in second.message.content
    assert any(ch.isdigit() for ch in second.message.content)
    assert len(requests_of(model, "researcher")) == 1
    assert len(result.delegations) == 1
    assert result.final_output == "final"


async def test_rate_limit_applies_to_calls_in_the_same_turn() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [[tool_call("researcher", {"query": "a"}),
                         tool_call("researcher", {"query": "b"})], text("final")],
        "researcher": [text("one"), text("two")],
    })
    agent_tool = researcher(model).as_tool(rate_limit=RateLimit(1, 60))
    result = await Runner.run(coordinator(model, agent_tool), "go")
    assert sorted(r.is_error for r in result.tool_results) == [False, True]
    assert len(requests_of(model, "researcher")) == 1
    assert_valid_protocol(await session_messages(result.session))


# --------------------------------------------------------------------------- child sessions


async def test_child_runs_in_a_linked_memory_session() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}, id="call_r"),
                        text("final")],
        "researcher": [text("child answer")],
    })
    session = MemorySession()
    result = await Runner.run(coordinator(model, researcher(model).as_tool()), "go",
                              session=session)
    assert result.session is session
    [child] = session.child_sessions
    assert child.session_id != session.session_id
    assert child.info.parent_id == session.session_id
    assert child.info.parent_tool_call_id == "call_r"
    assert child.info.path == "coordinator/researcher"
    child_msgs = await session_messages(child)
    assert [m.content for m in child_msgs] == ["q", "child answer"]
    # The child's conversation is not in the parent's log.
    assert "q" not in [m.content for m in await session_messages(session)]
    [event] = result.delegations
    assert event.child_session_id == child.session_id
    assert event.tool_call_id == "call_r"


async def test_child_runs_in_a_linked_sqlite_session(tmp_path: Any) -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}, id="call_s"),
                        text("final")],
        "researcher": [text("child answer")],
    })
    session = SQLiteSession("parent-1", tmp_path / "s.db")
    await Runner.run(coordinator(model, researcher(model).as_tool()), "go", session=session)
    [info] = await session.children()
    assert info.parent_id == "parent-1"
    assert info.parent_tool_call_id == "call_s"
    assert info.path == "coordinator/researcher"
    child = session.open_child(info)
    assert [m.content for m in await session_messages(child)] == ["q", "child answer"]
    # Top-level listing does not show the child.
    tops = SQLiteSession.list_sessions(tmp_path / "s.db")
    assert [s.session_id for s in tops] == ["parent-1"]


def long_history() -> list[Message]:
    msgs: list[Message] = []
    for i in range(10):
        msgs.append(Message.user(f"user-marker-{i}"))
        msgs.append(Message.assistant(f"assistant-marker-{i}", name="coordinator"))
    msgs.append(Message.user("final user request"))
    return msgs


async def test_child_does_not_see_the_parent_history_by_default() -> None:
    model = ScriptedModel(by_agent={"coordinator": [tool_call("researcher", {"query": "the task"}),
                                                    text("final")],
                                    "researcher": [text("child answer")]})
    await Runner.run(coordinator(model, researcher(model).as_tool()), long_history())
    [child] = requests_of(model, "researcher")
    assert [(m.role, m.content) for m in child.messages] == [("user", "the task")]


async def test_include_history_passes_a_bounded_recent_part() -> None:
    model = ScriptedModel(by_agent={"coordinator": [tool_call("researcher", {"query": "the task"}),
                                                    text("final")],
                                    "researcher": [text("child answer")]})
    agent_tool = researcher(model).as_tool(include_history=True)
    history = long_history()
    await Runner.run(coordinator(model, agent_tool), history)
    [child] = requests_of(model, "researcher")
    seen = child.messages
    assert seen[-1].role == "user" and seen[-1].content == "the task"
    assert seen[0].role == "user"
    contents = shown(seen)
    assert "final user request" in contents  # the most recent part
    assert "user-marker-0" not in contents  # bounded: the oldest part is left out
    assert 2 <= len(seen) < len(history)
    assert not any(m.role == "tool" or m.tool_calls for m in seen)
    assert_valid_protocol(seen)


async def test_include_history_is_bounded_in_characters() -> None:
    model = ScriptedModel(by_agent={"coordinator": [tool_call("researcher", {"query": "the task"}),
                                                    text("final")],
                                    "researcher": [text("child answer")]})
    big = [Message.user("x" * 30_000), Message.assistant("y" * 30_000, name="coordinator"),
           Message.user("short question")]
    await Runner.run(coordinator(model, researcher(model).as_tool(include_history=True)), big)
    [child] = requests_of(model, "researcher")
    assert sum(len(m.content) for m in child.messages) < 20_000
    assert "short question" in shown(child.messages)


async def test_include_history_filter_function() -> None:
    model = ScriptedModel(by_agent={"coordinator": [tool_call("researcher", {"query": "the task"}),
                                                    text("final")],
                                    "researcher": [text("child answer")]})
    seen_by_filter: list[list[Message]] = []

    def keep_markers(messages: list[Message]) -> list[Message]:
        seen_by_filter.append(list(messages))
        return [m for m in messages if m.content.endswith("-3")]

    agent_tool = researcher(model).as_tool(include_history=keep_markers)
    await Runner.run(coordinator(model, agent_tool), long_history())
    [child] = requests_of(model, "researcher")
    assert [m.content for m in child.messages] == ["user-marker-3", "assistant-marker-3",
                                                   "the task"]
    assert seen_by_filter and "user-marker-0" in shown(seen_by_filter[0])


async def test_a_history_filter_never_gives_the_child_a_call_without_its_result() -> None:
    # keep_last sees the parent's conversation as it stands, the open call to this very tool
    # included, and a call earlier in the turn is answered only after the turn: the child
    # must still receive a conversation every provider accepts.
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return "found"

    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("lookup", {"q": "a"}),
                        [text("Asking."), tool_call("lookup", {"q": "b"}),
                         tool_call("researcher", {"query": "the task"})],
                        text("final")],
        "researcher": [text("child answer")]})
    agent_tool = researcher(model).as_tool(include_history=keep_last(4))
    result = await Runner.run(coordinator(model, agent_tool, tools=[lookup]), "question")
    assert result.final_output == "final"
    [child] = requests_of(model, "researcher")
    assert_valid_protocol(child.messages)
    assert child.messages[-1].content == "the task"
    calls = {c.id for m in child.messages for c in m.tool_calls}
    answered = {m.tool_call_id for m in child.messages if m.role == "tool"}
    assert calls == answered and calls  # the answered earlier call stays, with its result
    assert any(m.content == "Asking." for m in child.messages)  # text kept, open calls gone


# --------------------------------------------------------------------------- the shared run


@tool
def remember(ctx: RunContext[dict[str, Any]], key: str, value: str) -> str:
    """Store a value in the run context."""
    ctx.context[key] = value
    return "stored"


@tool
def recall(ctx: RunContext[dict[str, Any]], key: str) -> str:
    """Read a value from the run context."""
    return str(ctx.context.get(key, "MISSING"))


async def test_child_shares_the_run_context() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}),
                        tool_call("recall", {"key": "finding"}), text("final")],
        "researcher": [tool_call("remember", {"key": "finding", "value": "V-123"}),
                       text("stored it")],
    })
    shared: dict[str, Any] = {}
    child = researcher(model, tools=[remember])
    result = await Runner.run(coordinator(model, child.as_tool(), tools=[recall]), "go",
                              context=shared)
    assert shared == {"finding": "V-123"}
    recalled = [r for r in result.tool_results if r.tool_name == "recall"]
    assert [r.message.content for r in recalled] == ["V-123"]


async def test_child_spans_nest_under_the_parent_tool_call(
        traces: InMemoryTraceProcessor) -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("final")],
        "researcher": [tool_call("lookup", {"q": "x"}), text("found")],
    })

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return "data"

    result = await Runner.run(coordinator(model, researcher(model, tools=[lookup]).as_tool()),
                              "go")
    spans = traces.trace(result.trace_id)
    assert spans, "the run produced no spans"
    assert {s.trace_id for s in spans} == {result.trace_id}
    by_id = {s.span_id: s for s in spans}
    [call_span] = [s for s in spans if s.kind == "tool" and s.name == "researcher"]
    [child_agent] = [s for s in spans if s.kind == "agent" and s.name == "researcher"]
    [child_tool] = [s for s in spans if s.kind == "tool" and s.name == "lookup"]

    def ancestors(span: Any) -> list[int]:
        out = []
        while span.parent_id is not None and span.parent_id in by_id:
            out.append(span.parent_id)
            span = by_id[span.parent_id]
        return out

    assert call_span.span_id in ancestors(child_agent)
    assert call_span.span_id in ancestors(child_tool)
    child_models = [s for s in spans if s.kind == "model" and s.attributes.get("agent")
                    == "researcher"]
    assert len(child_models) == 2
    assert all(call_span.span_id in ancestors(s) for s in child_models)
    # One trace, one root.
    assert len([s for s in spans if s.parent_id is None]) == 1


async def test_cancelling_the_outer_run_cancels_the_child() -> None:
    started = asyncio.Event()
    child_cancelled = asyncio.Event()

    async def fn(request: Any) -> Any:
        if request.agent == "coordinator":
            return tool_call("researcher", {"query": "slow"})
        started.set()
        try:
            await asyncio.sleep(30)  # still running when the outer run is cancelled
        except asyncio.CancelledError:
            child_cancelled.set()
            raise
        return text("never")

    model = FunctionModel(fn)
    session = MemorySession()
    task = asyncio.create_task(
        Runner.run(coordinator(model, researcher(model).as_tool()), "go", session=session))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert child_cancelled.is_set()
    [child] = session.child_sessions
    finished = of_type(child.events, RunFinishedEvent)
    assert finished and finished[-1].status == "failed"
    parent_finished = of_type(session.events, RunFinishedEvent)
    assert parent_finished and parent_finished[-1].status == "failed"
    assert_valid_protocol(await session_messages(session))
    assert_valid_protocol(await session_messages(child))


# --------------------------------------------------------------------------- the report


@pytest.mark.parametrize("supports_tools", [True, False])
async def test_report_request_is_appended_to_the_child_instructions(
        supports_tools: bool) -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("f")],
        "researcher": [text(REPORT)],
    }, supports_tools=supports_tools)
    await Runner.run(coordinator(model, researcher(model).as_tool()), "go")
    [child] = requests_of(model, "researcher")
    assert child.instructions.startswith("You research companies.")
    tail = child.instructions[len("You research companies."):]
    if supports_tools:  # it reports by calling a tool, offered to it alone
        assert "call the submit_report tool" in tail and "<handoff>" not in tail
        assert child.tools == ["submit_report"]
    else:  # a model without tool calls reports in a text block
        assert "<handoff>" in tail and "SUMMARY" in tail
        assert child.tools == []
    # The parent's own instructions carry no report request.
    coordinator_request = requests_of(model, "coordinator")[0]
    assert "<handoff>" not in coordinator_request.instructions
    assert "submit_report" not in coordinator_request.instructions + str(coordinator_request.tools)


async def test_no_report_request_without_report() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("f")],
        "researcher": [text("plain answer")],
    })
    result = await Runner.run(coordinator(model, researcher(model).as_tool(report=False)), "go")
    [child] = requests_of(model, "researcher")
    assert "<handoff>" not in child.instructions
    assert result.tool_results[0].message.content == "plain answer"
    assert result.reports == []


async def test_report_is_parsed_into_the_result_and_the_delegation_event() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("f")],
        "researcher": [text(REPORT)],
    })
    result = await Runner.run(coordinator(model, researcher(model).as_tool()), "go")
    [report] = result.reports
    assert report.summary == "Acme grew 12% in 2023."
    assert report.key_findings == ["Revenue rose to $1.2B"]
    assert report.sources == ["annual report"]
    assert report.confidence == "high"
    assert report.gaps == []
    [event] = result.delegations
    assert isinstance(event, DelegationEvent)
    assert event.ok and event.child_agent == "researcher" and event.agent == "coordinator"
    assert event.report is not None
    assert DelegationReport.from_dict(event.report) == report
    assert event.report["raw"] == REPORT


async def test_report_parser_is_tolerant() -> None:
    messy = ("I looked into it.\n\n<Handoff>\n**Summary:** Acme is growing fast.\n"
             "## Key-Findings\n• Revenue up 12%\n1) Margins flat\n"
             "Sources: annual report, press release\n"
             "Confidence: Medium-high — two sources agree\n")  # no closing tag
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("f")],
        "researcher": [text(messy)],
    })
    result = await Runner.run(coordinator(model, researcher(model).as_tool()), "go")
    [report] = result.reports
    assert report.summary == "Acme is growing fast."
    assert report.key_findings == ["Revenue up 12%", "Margins flat"]
    assert report.sources == ["annual report", "press release"]
    assert report.confidence == "medium"


async def test_without_a_block_the_summary_is_the_final_text() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("f")],
        "researcher": [text("  Acme made $1.2B last year.  ")],
    })
    result = await Runner.run(coordinator(model, researcher(model).as_tool()), "go")
    [report] = result.reports
    assert report.summary == "Acme made $1.2B last year."
    assert report.confidence == "unknown"
    assert result.tool_results[0].message.content == "Acme made $1.2B last year."


@pytest.mark.parametrize("answer", ["", "   "])
async def test_an_empty_answer_is_reported_as_empty(answer: str) -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("f")],
        "researcher": [text(answer)],
    })
    result = await Runner.run(coordinator(model, researcher(model).as_tool()), "go")
    [res] = result.tool_results
    assert not res.is_error
    assert "empty" in res.message.content.lower()
    [report] = result.reports
    assert report.summary == ""
    assert report.is_empty


async def test_sources_are_completed_with_tools_the_child_used() -> None:
    @tool
    def web_search(query: str) -> str:
        """Search the web."""
        return "results"

    @tool
    def never_used(x: str) -> str:
        """Not used."""
        return x

    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("f")],
        "researcher": [tool_call("web_search", {"query": "acme revenue"}), text(REPORT)],
    })
    child = researcher(model, tools=[web_search, never_used])
    result = await Runner.run(coordinator(model, child.as_tool()), "go")
    [report] = result.reports
    assert report.sources[0] == "annual report"  # the child's own citation first
    assert any("web_search" in s for s in report.sources[1:])
    assert any("acme revenue" in s for s in report.sources)
    assert not any("never_used" in s for s in report.sources)


async def test_a_used_document_address_is_kept_whole_in_the_sources() -> None:
    @tool
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        return "page"

    url = ("https://www.example-regulator.europa.eu/documents/2027/battery-passport/"
           "annex-iv-technical-specification.pdf")
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("f")],
        "researcher": [tool_call("fetch_url", {"url": url}), text("It starts in 2027.")],
    })
    child = researcher(model, tools=[fetch_url])
    result = await Runner.run(coordinator(model, child.as_tool()), "go")
    [report] = result.reports
    assert any(url in source for source in report.sources)
    assert url in result.tool_results[0].message.content


async def test_parent_gets_one_compact_result_never_the_child_transcript() -> None:
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return "RAW-LOOKUP-OUTPUT-7731 " * 20

    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}, id="call_x"), text("final")],
        "researcher": [tool_call("lookup", {"q": "acme"}), text(REPORT)],
    })
    result = await Runner.run(coordinator(model, researcher(model, tools=[lookup]).as_tool()),
                              "go")
    parent_msgs = await session_messages(result.session)
    results = tool_messages(parent_msgs)
    assert [m.tool_call_id for m in results] == ["call_x"]
    [report] = result.reports
    assert results[0].content == report.render()
    assert "Acme grew 12% in 2023." in results[0].content
    for request in requests_of(model, "coordinator"):
        assert "RAW-LOOKUP-OUTPUT-7731" not in shown(request.messages)
    assert "RAW-LOOKUP-OUTPUT-7731" not in shown(parent_msgs)
    # The child's own session does hold it.
    child_msgs = await session_messages(result.session.child_sessions[0])  # type: ignore[attr-defined]
    assert "RAW-LOOKUP-OUTPUT-7731" in shown(child_msgs)


# --------------------------------------------------------------------------- failures


async def child_failure(child_model: Any, **as_tool: Any) -> Any:
    parent = ScriptedModel([tool_call("researcher", {"query": "q"}), text("carried on")])
    child = researcher(child_model)
    result = await Runner.run(coordinator(parent, child.as_tool(**as_tool)), "go")
    [res] = result.tool_results
    assert res.is_error
    assert result.final_output == "carried on"
    [event] = result.delegations
    assert not event.ok and event.error
    assert_valid_protocol(await session_messages(result.session))
    # The parent's model was told, in its next request.
    assert res.message in parent.requests[1].messages
    return res


async def test_a_child_that_raises_is_an_error_result() -> None:
    res = await child_failure(ScriptedModel([RuntimeError("model exploded")]))
    assert "researcher" in res.message.content
    assert "model exploded" in res.message.content


async def test_a_child_hitting_max_turns_is_an_error_result() -> None:
    @tool
    def spin() -> str:
        """Spin."""
        return "again"

    model = FunctionModel(lambda req: tool_call("spin"))
    parent = ScriptedModel([tool_call("researcher", {"query": "q"}), text("carried on")])
    child = researcher(model, tools=[spin])
    result = await Runner.run(coordinator(parent, child.as_tool(max_turns=2)), "go")
    [res] = result.tool_results
    assert res.is_error
    assert "MaxTurnsExceeded" in res.message.content or "turn" in res.message.content
    assert len(model.requests) == 2
    assert result.final_output == "carried on"


async def test_a_child_that_times_out_is_an_error_result() -> None:
    slow = FunctionModel(lambda req: text("too late"), delay=5)
    res = await child_failure(slow, timeout=0.05)
    assert "timed out" in res.message.content


async def test_a_child_raising_its_own_timeout_error_is_reported_as_that_error() -> None:
    """No as_tool timeout: a TimeoutError from inside the child is a failure, not a time-out."""
    parent = ScriptedModel([tool_call("researcher", {"query": "q"}), text("carried on")])
    child = researcher(ScriptedModel([TimeoutError("socket read timed out")]))
    result = await Runner.run(coordinator(parent, child.as_tool()), "go")
    [res] = result.tool_results
    assert res.is_error
    assert "TimeoutError: socket read timed out" in res.message.content
    assert "timed out after" not in res.message.content
    assert "TypeError" not in res.message.content
    [event] = result.delegations
    assert event.child_agent == "researcher" and not event.ok
    assert event.error is not None and "socket read timed out" in event.error
    assert "timed out after" not in event.error
    assert result.final_output == "carried on"
    assert_valid_protocol(await session_messages(result.session))


# --------------------------------------------------------------------------- streaming


async def test_stream_yields_child_events_tagged_with_their_path() -> None:
    model = ScriptedModel(by_agent={"coordinator": [tool_call("researcher", {"query": "q"}),
                                                    text("final answer")],
                                    "researcher": [text("child words here")]})
    stream = Runner.stream(coordinator(model, researcher(model).as_tool()), "go")
    events = [e async for e in stream]
    child_events = [e for e in events if "/" in e.path]
    assert child_events
    assert {e.path for e in child_events} == {"coordinator/researcher"}
    assert any(isinstance(e, TextDeltaEvent) for e in child_events)
    assert "".join(e.delta for e in child_events if isinstance(e, TextDeltaEvent)) == \
        "child words here"
    assert any(isinstance(e, MessageEvent) and e.message.content == "child words here"
               for e in child_events)
    assert any(isinstance(e, DelegationEvent) and e.path == "coordinator" for e in events)
    # Parent events stay untagged by a child path.
    assert any(isinstance(e, ToolResultEvent) and e.path == "coordinator" for e in events)
    assert stream.result is not None and stream.result.final_output == "final answer"


async def test_nested_delegation_paths() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("final")],
        "researcher": [tool_call("analyst", {"query": "numbers"}), text("researched")],
        "analyst": [text("analysed")],
    })
    analyst = Agent("analyst", instructions="You analyse.", model=model)
    child = researcher(model, tools=[analyst.as_tool()])
    session = MemorySession()
    result = await Runner.run(coordinator(model, child.as_tool()), "go", session=session)
    [child_session] = session.child_sessions
    [grandchild] = child_session.child_sessions
    assert grandchild.info.path == "coordinator/researcher/analyst"
    assert grandchild.info.parent_id == child_session.session_id
    assert "coordinator/researcher/analyst" in result.usage.per_agent
