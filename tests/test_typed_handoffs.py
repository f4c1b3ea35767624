"""Typed handoffs (``input_type``), the nested-history filter, and agent tools with
``is_enabled`` and an ``output_extractor``: the peer scenarios, through the public API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from relayrace import (
    Agent,
    HandoffEvent,
    RunContext,
    Runner,
    UserError,
    handoff,
    nest_history,
    tool,
)
from relayrace.agents.delegation import ChildResult
from relayrace.core.exceptions import ConfigError
from relayrace.core.messages import NOTE, Message, ToolCall
from relayrace.sessions import SQLiteSession
from relayrace.testing import ScriptedModel, final_output, text, tool_call


class Escalation(BaseModel):
    order_id: str = Field(pattern=r"^ORD-\d+$")
    priority: int = Field(ge=1, le=3)


def _team(model: ScriptedModel, seen: list[Any], *, on_handoff: Any = None) -> Agent[Any]:
    async def record(ctx: RunContext[Any], value: Escalation) -> None:
        seen.append(value)

    refunds = Agent("refunds", instructions="Refunds.", model=model)
    return Agent("triage", instructions="Route.", model=model, sub_agents=[
        handoff(refunds, input_type=Escalation, on_handoff=on_handoff or record)])


async def test_the_transfer_tool_takes_the_input_types_fields_and_the_reason() -> None:
    model = ScriptedModel([text("Hello.")])
    await Runner.run(_team(model, []), "hi")
    (definition,) = model.requests[0].definitions
    assert definition.name == "transfer_to_refunds"
    assert set(definition.parameters["properties"]) == {"order_id", "priority", "reason"}
    assert definition.parameters["required"] == ["order_id", "priority"]


async def test_a_valid_input_is_given_to_on_handoff_recorded_and_shown_to_the_target(
        tmp_path: Path) -> None:
    model = ScriptedModel([
        tool_call("transfer_to_refunds", {"order_id": "ORD-7", "priority": 2,
                                          "reason": "double charge"}),
        text("Refund started for ORD-7."),
    ])
    seen: list[Any] = []
    session = SQLiteSession("typed", tmp_path / "s.db")
    result = await Runner.run(_team(model, seen), "I was charged twice", session=session)
    assert seen == [Escalation(order_id="ORD-7", priority=2)]
    (event,) = result.handoffs
    assert event.input == {"order_id": "ORD-7", "priority": 2}
    assert event.reason == "double charge"
    # The target sees the input in the transfer's note.
    note = model.requests[1].messages[-1].content
    assert 'Input: {"order_id": "ORD-7", "priority": 2}' in note
    # The record survives a reload in a fresh session object.
    stored = [e for e in await SQLiteSession("typed", tmp_path / "s.db").get_events()
              if isinstance(e, HandoffEvent)]
    assert stored[0].input == {"order_id": "ORD-7", "priority": 2}


async def test_an_invalid_input_goes_back_to_the_model_and_no_transfer_happens() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_refunds", {"order_id": "7", "priority": 9}),
        tool_call("transfer_to_refunds", {"order_id": "ORD-7", "priority": 1}),
        text("Done."),
    ])
    seen: list[Any] = []
    result = await Runner.run(_team(model, seen), "refund")
    told = model.requests[1].messages[-1]
    assert told.role == "tool"
    assert "Invalid arguments for the transfer to refunds" in told.content
    assert "order_id" in told.content and "priority" in told.content
    assert model.requests[1].agent == "triage"          # still triage: not transferred
    assert seen == [Escalation(order_id="ORD-7", priority=1)]
    assert [h.to_agent for h in result.handoffs] == ["refunds"]


async def test_a_sync_on_handoff_gets_the_value_too() -> None:
    got: list[Any] = []
    model = ScriptedModel([tool_call("transfer_to_refunds", {"order_id": "ORD-1", "priority": 3}),
                           text("ok")])
    await Runner.run(_team(model, [], on_handoff=lambda ctx, v: got.append(v)), "x")
    assert got == [Escalation(order_id="ORD-1", priority=3)]


def test_bad_input_types_are_refused_where_they_are_written() -> None:
    target = Agent("t", instructions="-")
    with pytest.raises(UserError, match="must have fields"):
        handoff(target, input_type=int)

    class Clash(BaseModel):
        reason: str

    with pytest.raises(UserError, match="named 'reason'"):
        handoff(target, input_type=Clash)
    with pytest.raises(ConfigError, match="handoff_tools='per_agent'"):
        Agent("a", instructions="-", handoff_tools="single",
              sub_agents=[handoff(target, input_type=Escalation)]).handoff_set()


# --------------------------------------------------------------------------- nested history


def _long_conversation() -> list[Message]:
    messages: list[Message] = []
    for i in range(40):
        messages += [Message.user(f"question {i}"), Message.assistant(f"answer {i}", name="a")]
    return messages


def test_nest_history_folds_earlier_turns_into_one_bounded_note() -> None:
    history = _long_conversation()
    current = [Message.user("now refund ORD-7"),
               Message.assistant("", (), name="triage")]
    nested = nest_history(max_chars=400)([*history, *current])
    note, *rest = nested
    assert note.role == "user" and note.name == NOTE
    assert rest == current                              # the current turn as it was
    assert len(note.content) <= 400 + 120               # bounded (plus its heading)
    assert "earlier message(s) left out" in note.content
    assert "answer 39" in note.content and "question 0" not in note.content


def test_nest_history_keeps_tool_calls_with_their_results() -> None:

    call = ToolCall("c1", "lookup", '{"id": 7}')
    messages = [Message.user("first"), Message.assistant("", (call,), name="a"),
                Message("tool", "found 7", tool_call_id="c1", name="lookup"),
                Message.assistant("It is 7.", name="a"), Message.user("second")]
    note, current = nest_history()(messages)
    assert current == messages[-1]
    assert 'a: [called lookup({"id": 7})]' in note.content
    assert "-> lookup result: found 7" in note.content
    with pytest.raises(UserError):
        nest_history(max_chars=10)


async def test_a_target_behind_nest_history_sees_one_note_and_the_transfer() -> None:
    model = ScriptedModel([text("a1"), text("a2"),
                           tool_call("transfer_to_billing", {"reason": "invoice"}),
                           text("billing here"), text("billing again")])
    billing = Agent("billing", instructions="Billing.", model=model, sticky=True)
    triage = Agent("triage", instructions="Route.", model=model,
                   sub_agents=[handoff(billing, input_filter=nest_history())])
    first = await Runner.run(triage, "q1")
    await Runner.run(triage, "q2", session=first.session)
    await Runner.run(triage, "q3 about an invoice", session=first.session)
    seen = model.requests[-1].messages
    assert seen[0].name == NOTE and "q1" in seen[0].content and "a2" in seen[0].content
    assert seen[0].content.endswith("\nuser: q3 about an invoice")   # the request, whole
    assert [m.role for m in seen[1:]] == ["assistant", "tool"]   # the transfer and its note
    # The (sticky) target's next user turn: all before it folded, the new request as it is.
    await Runner.run(triage, "q4", session=first.session)
    seen = model.requests[-1].messages
    assert [(m.role, m.name) for m in seen] == [("user", NOTE), ("user", None)]
    assert "billing here" in seen[0].content and seen[1].content == "q4"


async def test_nest_history_accumulates_within_a_turn_of_several_handoffs() -> None:
    # One user turn: triage -> billing (which looks something up) -> refunds, each transfer
    # behind nest_history. The last target gets one note of everything before it.
    model = ScriptedModel([
        text("Hello!"),
        tool_call("transfer_to_billing", {"reason": "invoice"}),
        tool_call("lookup", {"invoice": "INV-7"}),
        tool_call("transfer_to_refunds", {"reason": "paid twice"}),
        text("Refund on its way."),
    ])

    @tool
    def lookup(invoice: str) -> str:
        """Look an invoice up."""
        return f"{invoice}: paid twice"

    refunds = Agent("refunds", instructions="Refunds.", model=model)
    billing = Agent("billing", instructions="Billing.", model=model, tools=[lookup],
                    sub_agents=[handoff(refunds, input_filter=nest_history())])
    triage = Agent("triage", instructions="Route.", model=model,
                   sub_agents=[handoff(billing, input_filter=nest_history())])
    first = await Runner.run(triage, "hi")
    result = await Runner.run(triage, "INV-7 was charged twice", session=first.session)
    assert result.final_output == "Refund on its way."
    seen = model.requests[-1].messages
    assert [(m.role, m.name) for m in seen] == [("user", NOTE), ("assistant", "billing"),
                                                ("tool", "transfer_to_refunds")]
    note = seen[0].content
    assert note.count("nested for you") == 1
    assert note.splitlines()[1:] == [
        "user: hi",
        "triage: Hello!",
        "user: INV-7 was charged twice",
        'triage: [called transfer_to_billing({"reason": "invoice"})]',
        "-> transfer_to_billing result: Transferred from triage to billing. Reason: invoice",
        'billing: [called lookup({"invoice": "INV-7"})]',
        "-> lookup result: INV-7: paid twice",
    ]
    assert seen[1].tool_calls[0].name == "transfer_to_refunds"


def test_nest_history_takes_an_earlier_note_apart_instead_of_nesting_it() -> None:
    nest = nest_history()
    call = ToolCall("c1", "transfer_to_b", '{"reason": "more"}')
    first = nest([Message.user("Hello"), Message.assistant("First reply", name="a"),
                  Message.user("Another question")])
    again = nest([*first, Message.assistant("Second reply", (call,), name="a"),
                  Message("tool", "Transferred from a to b.", tool_call_id="c1",
                          name="transfer_to_b")])
    note = again[0].content
    assert note.count("nested for you") == 1 and len(again) == 3
    assert note.splitlines()[1:] == ["user: Hello", "a: First reply", "user: Another question"]
    assert again[1].content == "Second reply"   # the transferring turn, as it was


def test_nest_history_keeps_the_current_request_whole() -> None:
    request = "refund " + "x" * 900
    call = ToolCall("c1", "transfer_to_b", "{}")
    nested = nest_history(max_chars=300, line_chars=40)(
        [*_long_conversation(), Message.user(request), Message.assistant("", (call,), name="a"),
         Message("tool", "Transferred.", tool_call_id="c1", name="transfer_to_b")])
    lines = nested[0].content.splitlines()
    assert lines[-1] == f"user: {request}"   # neither cut nor left out
    assert "(80 earlier message(s) left out)" in lines[0]


# --------------------------------------------------------------------------- agent tools


class Verdict(BaseModel):
    approved: bool
    note: str


async def test_as_tool_output_extractor_turns_the_child_result_into_the_tool_result() -> None:
    model = ScriptedModel([tool_call("reviewer", {"query": "check PR 12"}),
                           final_output(Verdict(approved=True, note="clean")),
                           text("Approved.")])
    seen: list[ChildResult] = []

    async def extract(result: ChildResult) -> str:
        seen.append(result)
        return "APPROVED" if result.value.approved else "REJECTED"

    reviewer = Agent("reviewer", instructions="Review.", model=model, output_type=Verdict)
    lead = Agent("lead", instructions="Lead.", model=model,
                 tools=[reviewer.as_tool(output_extractor=extract)])
    await Runner.run(lead, "Review PR 12")
    assert model.requests[2].messages[-1].content == "APPROVED"
    assert seen[0].value == Verdict(approved=True, note="clean")


async def test_as_tool_output_extractor_that_raises_is_a_tool_error() -> None:
    model = ScriptedModel([tool_call("helper", {"query": "x"}), text("child says hi"),
                           text("recovered")])

    def broken(result: ChildResult) -> str:
        raise KeyError("nope")

    helper = Agent("helper", instructions="Help.", model=model)
    lead = Agent("lead", instructions="Lead.", model=model,
                 tools=[helper.as_tool(output_extractor=broken, report=False)])
    result = await Runner.run(lead, "go")
    told = model.requests[2].messages[-1]
    assert told.role == "tool" and "output_extractor" in told.content
    assert result.final_output == "recovered"


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_as_tool_is_enabled_decides_each_turn_whether_it_is_offered(
        asynchronous: bool) -> None:
    model = ScriptedModel([text("one"), tool_call("helper", {"query": "x"}), text("two")])

    def flag(ctx: RunContext[Any]) -> bool:
        return bool(ctx.context.get("premium"))

    async def async_flag(ctx: RunContext[Any]) -> bool:
        return flag(ctx)

    helper = Agent("helper", instructions="Help.", model=model)
    lead = Agent("lead", instructions="Lead.", model=model, tools=[helper.as_tool(
        is_enabled=async_flag if asynchronous else flag)])
    await Runner.run(lead, "hi", context={"premium": True})
    assert model.requests[0].tools == ["helper"]
    # Not offered, and a call made anyway is refused with a tool error, not run.
    result = await Runner.run(lead, "hi", context={"premium": False})
    assert model.requests[1].tools == []
    told = model.requests[2].messages[-1]
    assert told.role == "tool" and "not available right now" in told.content
    assert result.delegations == []


def test_as_tool_options_are_checked() -> None:
    helper = Agent("helper", instructions="-")
    with pytest.raises(UserError, match="output_extractor"):
        helper.as_tool(output_extractor="first")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="is_enabled"):
        helper.as_tool(is_enabled="yes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- strict tools


def test_a_tool_marked_strict_says_so_in_its_definition_and_an_unfit_one_is_refused() -> None:
    @tool(strict=True)
    def book(origin: str, stops: int | None = None) -> str:
        """Book a flight."""
        return origin

    assert book.definition.strict is True
    with pytest.raises(UserError, match="strict mode"):
        @tool(strict=True)
        def tag(labels: dict[str, str]) -> str:
            """Tag."""
            return json.dumps(labels)
