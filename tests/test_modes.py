"""Agent modes at a handoff: ``task`` (finish_task returns), ``single_turn`` and ``chat``."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import assert_valid_protocol, session_messages, shown, speakers
from relayrace import Agent, Runner, UserError, handoff, keep_last, tool
from relayrace.sessions import MemorySession
from relayrace.testing import ScriptedModel, text, tool_call


def desk(model: Any, mode: str, *, sticky: bool = False) -> Agent:
    worker = Agent("worker", instructions="You do one task.", description="Does tasks.",
                   model=model, mode=mode, sticky=sticky)  # type: ignore[arg-type]
    return Agent("triage", instructions="You triage.", model=model, sub_agents=[worker])


# --------------------------------------------------------------------------- task


async def test_task_agent_returns_control_and_its_result_with_finish_task() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_worker", {"reason": "look up order"}),
                   text("Your order ships Monday.")],
        "worker": [tool_call("finish_task", {"result": "ORDER-RESULT: ships Monday"})],
    })
    result = await Runner.run(desk(model, "task"), "Where is my order?")
    assert speakers(model) == ["triage", "worker", "triage"]
    assert "finish_task" in model.requests[1].tools
    # Back with the caller, in the same run, which sees the result.
    assert "ORDER-RESULT: ships Monday" in shown(model.requests[2].messages)
    assert result.final_output == "Your order ships Monday."
    assert result.last_agent.name == "triage"
    hops = [(h.agent, h.to_agent, h.is_return) for h in result.handoffs]
    assert hops == [("triage", "worker", False), ("worker", "triage", True)]
    assert result.handoffs[0].returns_to == "triage"
    assert_valid_protocol(await session_messages(result.session))


async def test_finish_task_is_only_offered_when_there_is_a_caller() -> None:
    model = ScriptedModel(by_agent={"worker": [text("alone")]})
    worker = Agent("worker", instructions="x", model=model, mode="task")
    result = await Runner.run(worker, "go")
    assert "finish_task" not in model.requests[0].tools
    assert result.final_output == "alone"


async def test_task_agent_may_use_tools_before_finishing() -> None:
    @tool
    def lookup(order: str) -> str:
        """Look up an order."""
        return f"{order}: in transit"

    worker = Agent("worker", instructions="x", mode="task", tools=[lookup])
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_worker"), text("It is in transit.")],
        "worker": [tool_call("lookup", {"order": "A1"}),
                   tool_call("finish_task", {"result": "A1 in transit"})],
    })
    worker.model = model
    triage = Agent("triage", instructions="x", model=model, sub_agents=[worker])
    result = await Runner.run(triage, "order A1?")
    assert speakers(model) == ["triage", "worker", "worker", "triage"]
    assert result.final_output == "It is in transit."


async def test_task_agent_asking_the_user_ends_the_run_and_resumes_later() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_worker"), text("All set: refund issued.")],
        "worker": [text("Which account should I refund?"),
                   tool_call("finish_task", {"result": "refunded account ACC-7"})],
    })
    agent = desk(model, "task")
    session = MemorySession()
    first = await Runner.run(agent, "I want a refund", session=session)
    assert first.final_output == "Which account should I refund?"
    assert first.last_agent.name == "worker"
    assert speakers(model) == ["triage", "worker"]

    second = await Runner.run(agent, "ACC-7", session=session)
    assert speakers(model) == ["triage", "worker", "worker", "triage"]
    # Still working on the task, the worker is offered finish_task again.
    assert "finish_task" in model.requests[2].tools
    assert "ACC-7" in shown(model.requests[2].messages)
    assert "refunded account ACC-7" in shown(model.requests[3].messages)
    assert second.final_output == "All set: refund issued."
    assert second.last_agent.name == "triage"
    assert_valid_protocol(await session_messages(session))


async def test_nested_task_agents_return_to_their_own_callers() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_lead"), text("triage final")],
        "lead": [tool_call("transfer_to_helper"),
                 tool_call("finish_task", {"result": "lead result"})],
        "helper": [tool_call("finish_task", {"result": "helper result"})],
    })
    helper = Agent("helper", instructions="x", model=model, mode="task")
    lead = Agent("lead", instructions="x", model=model, mode="task", sub_agents=[helper])
    triage = Agent("triage", instructions="x", model=model, sub_agents=[lead])
    result = await Runner.run(triage, "go")
    assert speakers(model) == ["triage", "lead", "helper", "lead", "triage"]
    assert "helper result" in shown(model.requests[3].messages)
    assert result.final_output == "triage final"


# --------------------------------------------------------------------------- single turn


async def test_single_turn_agent_answers_once_and_returns() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_worker", {"reason": "faq"}),
                   text("As our FAQ says: 30 days.")],
        "worker": [text("FAQ: returns within 30 days")],
    })
    result = await Runner.run(desk(model, "single_turn"), "Return policy?")
    assert speakers(model) == ["triage", "worker", "triage"]
    # It answers once: no transfers and no finish_task offered.
    assert not [t for t in model.requests[1].tools
                if t.startswith("transfer_to") or t == "finish_task"]
    assert "FAQ: returns within 30 days" in shown(model.requests[2].messages)
    assert result.final_output == "As our FAQ says: 30 days."
    assert result.last_agent.name == "triage"
    assert [h.is_return for h in result.handoffs] == [False, True]
    assert_valid_protocol(await session_messages(result.session))


async def test_single_turn_agent_is_not_active_on_the_next_run() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_worker"), text("first"), text("second")],
        "worker": [text("faq answer")],
    })
    agent = desk(model, "single_turn")
    session = MemorySession()
    await Runner.run(agent, "q1", session=session)
    result = await Runner.run(agent, "q2", session=session)
    assert speakers(model)[-1] == "triage"
    assert result.final_output == "second"


# --------------------------------------------------------------------------- chat


async def test_a_sticky_chat_agent_keeps_the_conversation() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_worker")],
        "worker": [text("worker here"), text("still worker")],
    })
    agent = desk(model, "chat", sticky=True)
    session = MemorySession()
    first = await Runner.run(agent, "hello", session=session)
    assert first.final_output == "worker here" and first.last_agent.name == "worker"
    assert "finish_task" not in model.requests[1].tools
    second = await Runner.run(agent, "more", session=session)
    assert second.final_output == "still worker"
    assert speakers(model) == ["triage", "worker", "worker"]
    assert [h.returns_to for h in first.handoffs] == [None]
    assert second.handoffs == []


def test_unknown_mode_is_a_user_error() -> None:
    with pytest.raises(UserError, match="mode"):
        Agent("x", instructions="x", mode="sometimes")  # type: ignore[arg-type]


async def test_after_a_filtered_single_turn_target_returns_the_caller_sees_everything() -> None:
    """The target's input filter (keep_last(1)) applies to the target only, not after it."""
    model = ScriptedModel([text("lead turn 1"), tool_call("transfer_to_expert", {"reason": "q"}),
                           text("expert answer"), text("lead final")])
    expert = Agent("expert", instructions="e", model=model, mode="single_turn")
    lead = Agent("lead", instructions="l", model=model,
                 sub_agents=[handoff(expert, input_filter=keep_last(1))])
    session = MemorySession()
    await Runner.run(lead, "first question", session=session)
    result = await Runner.run(lead, "second question", session=session)
    assert speakers(model) == ["lead", "lead", "expert", "lead"]
    assert result.final_output == "lead final"
    expert_saw = [m.content for m in model.requests[2].messages]
    assert "first question" not in expert_saw  # the filter did apply to the expert
    lead_saw = [m.content for m in model.requests[3].messages]
    for content in ("first question", "lead turn 1", "second question", "expert answer"):
        assert content in lead_saw, (content, lead_saw)
    assert lead_saw[:3] == ["first question", "lead turn 1", "second question"]
    assert_valid_protocol(model.requests[3].messages)
