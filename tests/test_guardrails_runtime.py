"""Guardrails in a run: blocked and redacted input, at every handoff, and on every answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conftest import assert_valid_protocol, of_type, session_messages, shown, speakers
from relayrace import (
    Agent,
    GuardrailTriggeredEvent,
    Runner,
    TextDeltaEvent,
    handoff,
)
from relayrace.events import dump_events
from relayrace.guardrails import (
    MaxLengthGuardrail,
    PIIGuardrail,
    TopicDenyListGuardrail,
    guardrail,
)
from relayrace.routing import AgentTarget, FromSpeaker, Rule, TerminateTarget
from relayrace.team import Team
from relayrace.testing import ScriptedModel, text, tool_call

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
