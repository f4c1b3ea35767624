"""Guardrails in a run: blocked and redacted input, at every handoff, and on every answer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import (
    assert_valid_protocol,
    of_type,
    requests_of,
    session_messages,
    shown,
    speakers,
)
from relayrace import (
    Agent,
    GuardrailTriggeredEvent,
    GuardrailTripwireTriggered,
    RunFinishedEvent,
    Runner,
    RunResult,
    TextDeltaEvent,
    handoff,
    keep_last,
    remove_tool_traffic,
    tool,
)
from relayrace.agents.guardrails import (
    MaxLengthGuardrail,
    PIIGuardrail,
    TopicDenyListGuardrail,
    Tripwire,
    guardrail,
)
from relayrace.core.events import dump_events
from relayrace.core.exceptions import UserError
from relayrace.teams.routing import AgentTarget, Finish, FromSpeaker, Rule, TerminateTarget
from relayrace.teams.team import Team
from relayrace.testing import ScriptedModel, TextPart, text, tool_call

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"


def guard_events(result: Any) -> list[GuardrailTriggeredEvent]:
    return of_type(result.new_events, GuardrailTriggeredEvent)


def a_then_b(model: Any, *, a_options: dict[str, Any] | None = None, **team_options: Any) -> Team:
    """Team ``t``: member ``a`` speaks, then ``b``, then the run ends.

    ``a_options`` go to member ``a`` alone (its own guardrails), ``team_options`` to the team.
    """
    return Team("t", agents=[Agent("a", instructions="x", model=model, **(a_options or {})),
                             Agent("b", instructions="x", model=model)],
                rules=[Rule(FromSpeaker("a"), AgentTarget("b")),
                       Rule(FromSpeaker("b"), TerminateTarget("done"))],
                **team_options)


# --------------------------------------------------------------------------- input


async def test_blocked_input_ends_the_turn_with_an_answer_not_an_exception() -> None:
    model = ScriptedModel([text("never")])
    agent = Agent("bot", instructions="x", model=model,
                  input_guardrails=[TopicDenyListGuardrail(["crypto"])])
    result = await Runner.run(agent, "Tell me about Crypto trading")
    assert model.requests == []
    assert "blocked" in result.final_output
    assert "topic_filter" in result.final_output
    [event] = guard_events(result)
    assert (event.stage, event.action, event.guardrail) == ("input", "block", "topic_filter")
    assert event.agent == "bot"
    assert_valid_protocol(await session_messages(result.session))


async def test_a_blocked_input_is_the_reason_the_run_ended() -> None:
    agent = Agent("bot", instructions="x", model=ScriptedModel([]),
                  input_guardrails=[TopicDenyListGuardrail(["crypto"])])
    result = await Runner.run(agent, "crypto?")
    assert result.reason == "guardrail"  # as for a blocked output


async def test_max_length_blocks_long_input() -> None:
    model = ScriptedModel([text("never")])
    agent = Agent("bot", instructions="x", model=model,
                  input_guardrails=[MaxLengthGuardrail(20)])
    result = await Runner.run(agent, "x" * 100)
    assert model.requests == []
    assert "max_length" in result.final_output
    assert guard_events(result)[0].action == "block"


async def test_allowed_input_reaches_the_model_unchanged() -> None:
    model = ScriptedModel([text("sure")])
    agent = Agent("bot", instructions="x", model=model,
                  input_guardrails=[PIIGuardrail(), TopicDenyListGuardrail(["crypto"])])
    result = await Runner.run(agent, "What is the weather?")
    assert model.requests[0].messages[-1].content == "What is the weather?"
    assert guard_events(result) == []
    assert result.final_output == "sure"


async def test_pii_is_redacted_before_the_model_sees_it() -> None:
    model = ScriptedModel([text("noted")])
    agent = Agent("bot", instructions="x", model=model, input_guardrails=[PIIGuardrail()])
    result = await Runner.run(agent, f"Mail {EMAIL}, card {CARD}.")
    seen = shown(model.requests[0].messages)
    assert "[EMAIL]" in seen and "[CARD]" in seen
    assert EMAIL not in seen and CARD not in seen
    [event] = guard_events(result)
    assert (event.stage, event.action) == ("input", "redact")
    assert EMAIL not in event.message and CARD not in event.message


async def test_custom_guardrail_function_blocks_or_rewrites() -> None:
    @guardrail(name="no_secrets")
    def no_secrets(text_: str, context: Any) -> Any:
        if "TOP-SECRET" in text_:
            return False
        return text_.replace("password", "[REDACTED]")

    model = ScriptedModel([text("ok")])
    agent = Agent("bot", instructions="x", model=model, input_guardrails=[no_secrets])
    blocked = await Runner.run(agent, "TOP-SECRET plans")
    assert model.requests == [] and "no_secrets" in blocked.final_output
    await Runner.run(agent, "my password is hunter2")
    assert model.requests[0].messages[-1].content == "my [REDACTED] is hunter2"


async def test_guardrails_check_each_new_user_message_on_a_continued_session() -> None:
    model = ScriptedModel([text("first ok")])
    agent = Agent("bot", instructions="x", model=model,
                  input_guardrails=[TopicDenyListGuardrail(["crypto"])])
    first = await Runner.run(agent, "hello")
    second = await Runner.run(agent, "now crypto please", session=first.session)
    assert len(model.requests) == 1
    assert "blocked" in second.final_output


# --------------------------------------------------------------------------- at a handoff


def front_desk(model: Any, *, billing_guards: Sequence[Any], **handoff_options: Any) -> Agent:
    billing = Agent("billing", instructions="You bill.", model=model,
                    input_guardrails=billing_guards)
    return Agent("triage", instructions="You triage.", model=model,
                 sub_agents=[handoff(billing, **handoff_options)])


async def test_a_blocking_input_guardrail_applies_at_the_handoff() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_billing", {"reason": "billing"})],
        "billing": [],
    })
    agent = front_desk(model, billing_guards=[PIIGuardrail(action="block")])
    result = await Runner.run(agent, f"Refund to {EMAIL} please")
    assert speakers(model) == ["triage"]
    assert EMAIL in shown(model.requests[0].messages)  # triage has no guardrail
    assert "blocked" in result.final_output
    [event] = guard_events(result)
    assert event.agent == "billing" and event.action == "block"
    assert_valid_protocol(await session_messages(result.session))


async def test_a_redacting_input_guardrail_applies_at_the_handoff() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_billing", {"reason": "billing"})],
        "billing": [text("refund queued")],
    })
    agent = front_desk(model, billing_guards=[PIIGuardrail()])
    result = await Runner.run(agent, f"Refund to {EMAIL}, card {CARD}")
    triage_saw = shown(model.requests[0].messages)
    billing_saw = shown(model.requests[1].messages)
    assert EMAIL in triage_saw
    assert "[EMAIL]" in billing_saw and "[CARD]" in billing_saw
    assert EMAIL not in billing_saw and CARD not in billing_saw
    assert result.final_output == "refund queued"


async def test_the_receiver_guardrail_covers_what_the_sender_passes_on() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_billing", {"reason": f"customer is {EMAIL}"})],
        "billing": [text("ok")],
    })
    agent = front_desk(model, billing_guards=[PIIGuardrail()])
    await Runner.run(agent, "I need a refund")
    billing_saw = shown(model.requests[1].messages)
    assert EMAIL not in billing_saw


async def test_a_handoff_with_an_input_filter_still_redacts() -> None:
    model = ScriptedModel(by_agent={"triage": [tool_call("transfer_to_billing")],
                                    "billing": [text("ok")]})
    agent = front_desk(model, billing_guards=[PIIGuardrail()],
                       input_filter=lambda msgs: [m for m in msgs if m.role == "user"])
    await Runner.run(agent, f"Refund to {EMAIL}")
    billing_saw = shown(model.requests[1].messages)
    assert EMAIL not in billing_saw and "[EMAIL]" in billing_saw


async def test_team_input_guardrails_apply_to_every_member() -> None:
    model = ScriptedModel(by_agent={"a": [text("A")], "b": [text("B")]})
    team = a_then_b(model, input_guardrails=[PIIGuardrail()])
    await Runner.run(team, f"contact {EMAIL}")
    for request in model.requests:
        assert EMAIL not in shown(request.messages)
        assert "[EMAIL]" in shown(request.messages)


async def test_a_member_blocking_its_input_ends_the_team_run() -> None:
    model = ScriptedModel(by_agent={"a": [], "b": [text("b answered the blocked request")]})
    team = a_then_b(model, a_options={"input_guardrails": [TopicDenyListGuardrail(["crypto"])]})
    result = await Runner.run(team, "crypto tips?")
    assert model.requests == []
    assert "blocked" in result.final_output
    assert result.last_agent.name == "a"


async def test_team_input_guardrail_block_is_an_answer() -> None:
    model = ScriptedModel(by_agent={"a": []})
    team = Team("t", agents=[Agent("a", instructions="x", model=model)],
                input_guardrails=[TopicDenyListGuardrail(["crypto"])])
    result = await Runner.run(team, "crypto?")
    assert model.requests == []
    assert "blocked" in result.final_output


# --------------------------------------------------------------------------- output


async def test_output_guardrail_redacts_the_final_answer() -> None:
    model = ScriptedModel([text(f"Write to {EMAIL}.")])
    agent = Agent("bot", instructions="x", model=model, output_guardrails=[PIIGuardrail()])
    result = await Runner.run(agent, "contact?")
    assert result.final_output == "Write to [EMAIL]."
    [event] = guard_events(result)
    assert (event.stage, event.action) == ("output", "redact")
    assert EMAIL not in shown(await session_messages(result.session))


async def test_output_guardrail_block_replaces_the_answer() -> None:
    model = ScriptedModel([text("Buy crypto now!")])
    agent = Agent("bot", instructions="x", model=model,
                  output_guardrails=[TopicDenyListGuardrail(["crypto"])])
    result = await Runner.run(agent, "advice?")
    assert "crypto now" not in result.final_output
    assert "blocked" in result.final_output
    assert result.reason == "guardrail"


async def test_team_output_guardrails_run_on_every_members_answer() -> None:
    model = ScriptedModel(by_agent={"a": [text(f"A found {EMAIL}")], "b": [text("B done")]})
    team = a_then_b(model, output_guardrails=[PIIGuardrail()])
    result = await Runner.run(team, "go")
    b_saw = shown(model.requests[1].messages)
    assert EMAIL not in b_saw and "A found [EMAIL]" in b_saw
    assert [e.agent for e in guard_events(result) if e.stage == "output"] == ["a"]
    assert result.final_output == "B done"


async def test_member_output_guardrail_runs_on_its_answer_not_only_the_last() -> None:
    model = ScriptedModel(by_agent={"a": [text(f"A found {CARD}")], "b": [text("B done")]})
    team = a_then_b(model, a_options={"output_guardrails": [PIIGuardrail()]})
    await Runner.run(team, "go")
    assert CARD not in shown(model.requests[1].messages)


async def test_output_guardrail_on_a_single_turn_answer_before_it_returns() -> None:
    model = ScriptedModel(by_agent={"triage": [tool_call("transfer_to_faq"), text("triage final")],
                                    "faq": [text(f"Write to {EMAIL}")]})
    faq = Agent("faq", instructions="x", model=model, mode="single_turn",
                output_guardrails=[PIIGuardrail()])
    triage = Agent("triage", instructions="x", model=model, sub_agents=[faq])
    result = await Runner.run(triage, "contact?")
    assert speakers(model) == ["triage", "faq", "triage"]
    back = shown(model.requests[2].messages)
    assert "Write to [EMAIL]" in back and EMAIL not in back
    assert result.final_output == "triage final"


async def test_output_guardrail_of_a_delegated_child() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("done")],
        "researcher": [text(f"Found {EMAIL}")],
    })
    child = Agent("researcher", instructions="x", model=model,
                  output_guardrails=[PIIGuardrail()])
    parent = Agent("coordinator", instructions="x", model=model, tools=[child.as_tool()])
    result = await Runner.run(parent, "go")
    assert EMAIL not in result.tool_results[0].message.content
    assert EMAIL not in shown(model.requests[-1].messages)


# --------------------------------------------------------------------------- streaming


async def test_streaming_does_not_leak_redacted_text() -> None:
    model = ScriptedModel([text(f"Write to {EMAIL} or pay with {CARD} today")])
    agent = Agent("bot", instructions="x", model=model, output_guardrails=[PIIGuardrail()])
    stream = Runner.stream(agent, "contact?")
    events = [e async for e in stream]
    deltas = "".join(e.delta for e in events if isinstance(e, TextDeltaEvent))
    assert EMAIL not in deltas and CARD not in deltas
    assert EMAIL not in "".join(dump_events(events))
    assert stream.result is not None
    assert stream.result.final_output == "Write to [EMAIL] or pay with [CARD] today"


async def test_streaming_a_team_with_output_guardrails_does_not_leak() -> None:
    model = ScriptedModel(by_agent={"a": [text(f"A found {EMAIL}")], "b": [text("B done")]})
    team = a_then_b(model, output_guardrails=[PIIGuardrail()])
    events = [e async for e in Runner.stream(team, "go")]
    assert EMAIL not in "".join(dump_events(events))


async def test_streaming_a_handoff_target_with_output_guardrails_does_not_leak() -> None:
    model = ScriptedModel(by_agent={"triage": [tool_call("transfer_to_billing")],
                                    "billing": [text(f"Card on file: {CARD}")]})
    billing = Agent("billing", instructions="x", model=model,
                    output_guardrails=[PIIGuardrail()])
    triage = Agent("triage", instructions="x", model=model, sub_agents=[billing])
    events = [e async for e in Runner.stream(triage, "card?")]
    assert CARD not in "".join(dump_events(events))


async def deltas_of(agent: Agent, prompt: str = "hi") -> tuple[list[str], RunResult]:
    """The text deltas a streamed run of ``agent`` shows, and its result."""
    stream = Runner.stream(agent, prompt)
    deltas = [e.delta async for e in stream if isinstance(e, TextDeltaEvent)]
    assert stream.result is not None
    return deltas, stream.result


async def test_a_redacting_output_guardrail_streams_sentence_by_sentence() -> None:
    model = ScriptedModel([text(f"Thanks for waiting. Write to {EMAIL} today.\n"
                                f"Or pay with {CARD} now")])
    agent = Agent("bot", instructions="x", model=model, output_guardrails=[PIIGuardrail()])
    deltas, result = await deltas_of(agent)
    # Each sentence shows once it has passed, in its redacted form; the rest at the end.
    assert deltas == ["Thanks for waiting. ", "Write to [EMAIL] today.\n",
                      "Or pay with [CARD] now"]
    assert "".join(deltas) == result.final_output


_PIECES = [EMAIL, CARD, "415-555-0132", "+44 20 7946 0958", "DE89 3704 0044 0532 0130 00",
           "word", "3", "1.5", ". ", "! ", "? ", "\n", " ", "-", ".", "@", "x.y"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=25),
       st.integers(min_value=5, max_value=400))
def test_what_streams_through_redaction_and_truncation_is_the_kept_answer(
    pieces: list[str], limit: int
) -> None:
    answer = "".join(pieces).strip() or "ok"
    agent = Agent("bot", instructions="x", model=ScriptedModel([text(answer)]),
                  output_guardrails=[PIIGuardrail(),
                                     MaxLengthGuardrail(limit, action="truncate")])
    deltas, result = asyncio.run(deltas_of(agent))
    assert "".join(deltas) == result.final_output


async def test_a_truncating_output_guardrail_streams_up_to_its_limit() -> None:
    model = ScriptedModel([text("One two three. Four five six. Seven eight nine. Ten.")])
    agent = Agent("bot", instructions="x", model=model,
                  output_guardrails=[MaxLengthGuardrail(20, action="truncate")])
    deltas, result = await deltas_of(agent)
    assert deltas[0] == "One two three. "
    assert "".join(deltas) == result.final_output == "One two three. Four "


@pytest.mark.parametrize("answer", ["Sure. Your refund is on its way.", "Sure. It ships today."])
async def test_a_guardrail_that_may_block_shows_the_answer_only_once_it_passed(
    answer: str,
) -> None:
    model = ScriptedModel([text(answer)])
    agent = Agent("bot", instructions="x", model=model,
                  output_guardrails=[PIIGuardrail(), TopicDenyListGuardrail(["refund"])])
    deltas, result = await deltas_of(agent)
    # A block withholds the whole answer, so nothing shows before the end: then what passed.
    assert deltas == [result.final_output]
    assert ("refund" in answer) == ("blocked" in result.final_output)


async def test_a_tripwire_on_output_shows_nothing() -> None:
    model = ScriptedModel([text("Sure. Your refund is on its way.")])
    agent = Agent("bot", instructions="x", model=model,
                  output_guardrails=[Tripwire(TopicDenyListGuardrail(["refund"]))])
    events: list[Any] = []
    with pytest.raises(GuardrailTripwireTriggered):
        async for event in Runner.stream(agent, "hi"):
            events.append(event)
    assert not of_type(events, TextDeltaEvent)


async def test_a_custom_output_guardrail_streams_only_when_it_says_so() -> None:
    @guardrail(streams=True)
    def no_secret(text: str, context: Any) -> str:
        return text.replace("s3cret", "[SECRET]")

    @guardrail
    def unknown(text: str, context: Any) -> bool:
        return True

    model = ScriptedModel([text("Here it is. The key is s3cret. Done")] * 2)
    streamed, _ = await deltas_of(Agent("a", instructions="x", model=model,
                                        output_guardrails=[no_secret]))
    assert streamed == ["Here it is. ", "The key is [SECRET]. ", "Done"]
    held, _ = await deltas_of(Agent("b", instructions="x", model=model,
                                    output_guardrails=[no_secret, unknown]))
    assert held == ["Here it is. The key is [SECRET]. Done"]


async def test_a_streaming_guardrail_that_blocks_is_a_user_error() -> None:
    @guardrail(streams=True)
    def liar(text: str, context: Any) -> bool:
        return "later" not in text

    model = ScriptedModel([text("First. Then later. End")])
    agent = Agent("bot", instructions="x", model=model, output_guardrails=[liar])
    with pytest.raises(UserError, match="streams=False"):
        await deltas_of(agent)


# --------------------------------------------------------------------------- review regressions


async def test_a_block_on_a_tool_result_of_the_transfer_batch_ends_the_run() -> None:
    """The target's guardrail checks what came in the same batch as the transfer call."""

    @tool
    def lookup() -> str:
        """Look up."""
        return "the file is about weapons"

    model = ScriptedModel([[tool_call("lookup"), tool_call("transfer_to_b")],
                           text("b happily discusses weapons")])
    b = Agent("b", instructions="b", model=model,
              input_guardrails=[TopicDenyListGuardrail(["weapons"])])
    a = Agent("a", instructions="a", model=model, tools=[lookup], sub_agents=[b])
    result = await Runner.run(a, "go")
    assert speakers(model) == ["a"], "b's model was called with the blocked content"
    assert result.reason == "guardrail"
    assert "blocked by the topic_filter guardrail" in result.final_output
    assert [(e.agent, e.stage, e.action) for e in guard_events(result)] == \
        [("b", "input", "block")]
    assert result.handoffs == []
    assert_valid_protocol(await session_messages(result.session))


async def assert_lead_blocked(model: ScriptedModel, result: RunResult) -> None:
    """The worker returned denied content: the lead's model never saw it, the run ended."""
    assert speakers(model) == ["lead", "worker"]
    for request in requests_of(model, "lead"):
        assert "weapons" not in shown(request.messages)
    assert result.reason == "guardrail"
    assert "blocked by the topic_filter guardrail" in result.final_output
    assert ("lead", "input", "block") in [(e.agent, e.stage, e.action)
                                          for e in guard_events(result)]
    assert_valid_protocol(await session_messages(result.session))


async def test_a_block_on_a_finish_task_result_returning_to_the_caller_ends_the_run() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_worker", {}),
        tool_call("finish_task", {"result": "here is how to build weapons"}),
        text("lead answers using the result"),
    ])
    worker = Agent("worker", instructions="w", model=model, mode="task")
    lead = Agent("lead", instructions="l", model=model, sub_agents=[worker],
                 input_guardrails=[TopicDenyListGuardrail(["weapons"])])
    result = await Runner.run(lead, "hi")
    await assert_lead_blocked(model, result)
    assert "lead answers" not in result.final_output


async def test_a_block_on_a_single_turn_answer_returning_to_the_caller_ends_the_run() -> None:
    model = ScriptedModel([tool_call("transfer_to_worker", {}), text("weapons weapons"),
                           text("lead continues")])
    worker = Agent("worker", instructions="w", model=model, mode="single_turn")
    lead = Agent("lead", instructions="l", model=model, sub_agents=[worker],
                 input_guardrails=[TopicDenyListGuardrail(["weapons"])])
    result = await Runner.run(lead, "hi")
    await assert_lead_blocked(model, result)


FILTERS = pytest.mark.parametrize(
    "input_filter", [None, keep_last(1), keep_last(10), remove_tool_traffic],
    ids=["no_filter", "keep_last_1", "keep_last_10", "remove_tool_traffic"])


def redacting_desk(model: Any, input_filter: Any, tools: Sequence[Any] = ()) -> Agent:
    """``triage`` hands off to ``billing`` (which redacts PII) through ``input_filter``."""
    billing = Agent("billing", instructions="b", model=model, input_guardrails=[PIIGuardrail()])
    return Agent("triage", instructions="t", model=model, tools=tools,
                 sub_agents=[handoff(billing, input_filter=input_filter)])


def assert_billing_saw_no_raw_mail(model: Any, input_filter: Any, *raw: str) -> None:
    assert speakers(model) == ["triage", "billing"]
    request = model.requests[1]
    seen = shown(request.messages) + "\n" + request.instructions
    for mail in raw:
        assert mail not in seen, (mail, seen)
    notes = [m for m in request.messages if "Transferred from triage" in m.content]
    assert notes, "the transfer reason must stay visible"
    assert {m.content for m in notes} == \
        {"Transferred from triage to billing. Reason: customer is [EMAIL]"}
    if input_filter is remove_tool_traffic:
        # A framework note, not a mid-conversation system message (which some servers refuse).
        assert (request.messages[-1].role, request.messages[-1].name) == ("user", "relayrace")


@FILTERS
async def test_an_input_filter_at_a_handoff_never_bypasses_redaction(input_filter: Any) -> None:
    """The target sees redacted content only, the transfer note with the reason included."""
    model = ScriptedModel([
        [TextPart("Forwarding ops@acme.example to billing"),
         tool_call("transfer_to_billing", {"reason": "customer is boss@acme.example"})],
        text("ok"),
    ])
    await Runner.run(redacting_desk(model, input_filter), f"mail me at {EMAIL}")
    assert_billing_saw_no_raw_mail(model, input_filter,
                                   "ops@acme.example", "boss@acme.example", EMAIL)
    if input_filter is remove_tool_traffic:
        assert "Forwarding [EMAIL] to billing" in shown(model.requests[1].messages)


@FILTERS
async def test_the_transfer_reason_is_redacted_when_a_call_follows_the_transfer(
    input_filter: Any,
) -> None:
    """[transfer, lookup] in one turn: the transfer note comes before the lookup's result."""

    @tool
    def lookup() -> str:
        """Look up."""
        return "nothing found"

    model = ScriptedModel([
        [tool_call("transfer_to_billing", {"reason": "customer is boss@acme.example"}),
         tool_call("lookup")],
        text("ok"),
    ])
    await Runner.run(redacting_desk(model, input_filter, tools=[lookup]), "hello")
    assert_billing_saw_no_raw_mail(model, input_filter, "boss@acme.example")


async def test_output_guardrail_redacts_a_finish_summary() -> None:
    @tool
    def done(summary: str) -> Finish:
        """End the run."""
        return Finish("done", summary)

    model = ScriptedModel([tool_call("done", {"summary": f"Card holder email is {EMAIL}"})])
    agent = Agent("a", instructions="x", model=model, tools=[done],
                  output_guardrails=[PIIGuardrail()])
    result = await Runner.run(agent, "hi")
    assert result.final_output == "Card holder email is [EMAIL]"
    assert ("output", "redact") in [(e.stage, e.action) for e in guard_events(result)]


async def test_output_guardrail_redacts_text_of_a_tool_turn_that_becomes_the_answer() -> None:
    @tool
    def done(summary: str) -> Finish:
        """End the run."""
        return Finish("done", summary)

    model = ScriptedModel([[TextPart(f"Email is {EMAIL}"), tool_call("done", {"summary": ""})]])
    agent = Agent("a", instructions="x", model=model, tools=[done],
                  output_guardrails=[PIIGuardrail()])
    result = await Runner.run(agent, "hi")
    assert result.final_output == "Email is [EMAIL]"
    [finished] = of_type(result.new_events, RunFinishedEvent)
    assert EMAIL not in finished.output


async def test_output_guardrail_redacts_a_finish_task_result() -> None:
    model = ScriptedModel([tool_call("transfer_to_worker", {}),
                           tool_call("finish_task", {"result": f"contact {EMAIL}"}),
                           text("ok")])
    worker = Agent("worker", instructions="w", model=model, mode="task",
                   output_guardrails=[PIIGuardrail()])
    lead = Agent("lead", instructions="l", model=model, sub_agents=[worker])
    result = await Runner.run(lead, "hi")
    [back] = [h for h in result.handoffs if h.is_return]
    assert back.reason == "returned: contact [EMAIL]"
    assert all(EMAIL not in h.reason for h in result.handoffs)
    assert [(e.agent, e.stage, e.action) for e in guard_events(result)] == \
        [("worker", "output", "redact")]
    assert result.final_output == "ok"


async def test_a_redacted_finish_task_result_never_reaches_the_callers_model() -> None:
    """As for a single_turn answer: the caller's model must not see the raw returned result."""
    model = ScriptedModel([tool_call("transfer_to_worker", {}),
                           tool_call("finish_task", {"result": f"contact {EMAIL}"}),
                           text("ok")])
    worker = Agent("worker", instructions="w", model=model, mode="task",
                   output_guardrails=[PIIGuardrail()])
    lead = Agent("lead", instructions="l", model=model, sub_agents=[worker])
    await Runner.run(lead, "hi")
    assert speakers(model) == ["lead", "worker", "lead"]
    assert EMAIL not in shown(model.requests[2].messages)


async def test_a_tool_result_is_redacted_in_the_guarded_agents_next_request() -> None:
    @tool
    def lookup() -> str:
        """Look up."""
        return "customer email: bob@x.example"

    model = ScriptedModel([tool_call("lookup"), text("done")])
    agent = Agent("a", instructions="a", model=model, tools=[lookup],
                  input_guardrails=[PIIGuardrail()])
    result = await Runner.run(agent, f"contact {EMAIL}")
    assert speakers(model) == ["a", "a"]
    for request in model.requests:
        seen = shown(request.messages)
        assert "bob@x.example" not in seen and EMAIL not in seen
    assert "customer email: [EMAIL]" in [m.content for m in model.requests[1].messages]
    assert result.final_output == "done"
    # The session keeps the real result; only the model's view is redacted.
    assert result.tool_results[0].message.content == "customer email: bob@x.example"
