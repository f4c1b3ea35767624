"""Where the conversation goes after a handoff: an agent that can transfer nowhere hands the
next user turn back to its parent (unless sticky), and a workflow can be a handoff target that
runs its steps and gives control back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import assert_valid_protocol, session_messages
from relayrace import Agent, HandoffEvent, ModelProviderError, Runner, TransferPolicy, tool
from relayrace.sessions import MemorySession, Session, SQLiteSession
from relayrace.teams.routing import Finish
from relayrace.teams.workflows import LoopAgent, ParallelAgent, SequentialAgent
from relayrace.testing import ScriptedModel, text, tool_call


def desk(model: ScriptedModel, **billing: Any) -> Agent[Any]:
    refunds = Agent("refunds", instructions="Refunds.", model=model, **billing)
    return Agent("triage", instructions="Route.", model=model, sub_agents=[refunds])


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_an_agent_that_can_transfer_nowhere_hands_the_next_turn_to_its_parent(
        store: str, tmp_path: Path) -> None:
    model = ScriptedModel(by_agent={"triage": [tool_call("transfer_to_refunds"),
                                               text("Anything else?")],
                                    "refunds": [text("Refund sent.")]})

    def session() -> Session:  # a fresh object each time, as a new process would have
        if store == "sqlite":
            return SQLiteSession("s", tmp_path / "s.db")
        return shared

    shared = MemorySession()
    first = await Runner.run(desk(model), "refund ORD-7", session=session())
    assert first.last_agent.name == "refunds"
    second = await Runner.run(desk(model), "thanks, what else?", session=session())
    assert second.last_agent.name == "triage" and second.final_output == "Anything else?"
    (back,) = second.handoffs
    assert (back.agent, back.to_agent) == ("refunds", "triage")
    assert "can transfer to no agent" in back.reason
    assert_valid_protocol(await session_messages(session()))


async def test_a_sticky_agent_keeps_the_conversation() -> None:
    model = ScriptedModel(by_agent={"triage": [tool_call("transfer_to_refunds")],
                                    "refunds": [text("Refund sent."), text("Yes, today.")]})
    session = MemorySession()
    team = desk(model, sticky=True)
    await Runner.run(team, "refund", session=session)
    second = await Runner.run(team, "will it arrive today?", session=session)
    assert second.last_agent.name == "refunds" and second.handoffs == []


async def test_an_agent_that_may_go_back_keeps_the_conversation_too() -> None:
    # It can transfer to its parent itself, so nothing is decided for it.
    model = ScriptedModel(by_agent={"triage": [tool_call("transfer_to_refunds")],
                                    "refunds": [text("Sent."), text("Still me.")]})
    session = MemorySession()
    team = desk(model, transfer_policy=TransferPolicy(to_parent=True))
    await Runner.run(team, "refund", session=session)
    assert (await Runner.run(team, "and?", session=session)).last_agent.name == "refunds"


async def test_an_agent_that_failed_mid_turn_is_not_handed_back() -> None:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_refunds")],
        "refunds": [ModelProviderError("down", status_code=503), text("Recovered.")]})
    session = MemorySession()
    with pytest.raises(ModelProviderError):
        await Runner.run(desk(model), "refund", session=session)
    again = await Runner.run(desk(model), "retry", session=session)
    assert again.last_agent.name == "refunds" and again.final_output == "Recovered."


# --------------------------------------------------------------------------- workflows


def with_workflow(model: ScriptedModel, kind: str = "sequential") -> Agent[Any]:
    steps = [Agent("draft", instructions="Draft.", model=model),
             Agent("polish", instructions="Polish.", model=model)]
    flow: Agent[Any] = (
        SequentialAgent("writing", steps=steps) if kind == "sequential"
        else ParallelAgent("writing", branches=steps) if kind == "parallel"
        else LoopAgent("writing", steps=steps, max_iterations=1))
    return Agent("lead", instructions="Lead.", model=model, sub_agents=[flow])


@pytest.mark.parametrize("kind", ["sequential", "parallel", "loop"])
async def test_a_workflow_target_runs_its_steps_then_gives_control_back(kind: str) -> None:
    model = ScriptedModel(by_agent={
        "lead": [tool_call("transfer_to_writing", {"reason": "write it"}),
                 text("Here is the note.")],
        "draft": [text("a draft")], "polish": [text("a polished note")]})
    session = MemorySession()
    result = await Runner.run(with_workflow(model, kind), "write a note", session=session)
    assert result.final_output == "Here is the note." and result.last_agent.name == "lead"
    moves = [(h.agent, h.to_agent, h.is_return) for h in result.handoffs]
    assert moves == [("lead", "writing", False), ("writing", "lead", True)]
    assert result.handoffs[0].returns_to == "lead"
    # The lead answers having seen what the steps wrote.
    seen = [m.content for m in model.requests[-1].messages]
    assert any("a polished note" in c for c in seen)
    assert_valid_protocol(await session_messages(session))


async def test_a_run_that_failed_inside_a_workflow_target_resumes_there_then_returns(
        tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    model = ScriptedModel(by_agent={
        "lead": [tool_call("transfer_to_writing"), text("Done: the note is ready.")],
        "draft": [text("a draft"), text("a draft again")],
        "polish": [ModelProviderError("down", status_code=503), text("a polished note")]})
    with pytest.raises(ModelProviderError):
        await Runner.run(with_workflow(model), "write", session=SQLiteSession("s", db))
    result = await Runner.run(with_workflow(model), None, session=SQLiteSession("s", db))
    assert result.final_output == "Done: the note is ready."
    events = await SQLiteSession("s", db).get_events()
    returns = [e for e in events if isinstance(e, HandoffEvent) and e.is_return]
    assert [(e.agent, e.to_agent) for e in returns] == [("writing", "lead")]
    assert_valid_protocol(await session_messages(SQLiteSession("s", db)))


def test_sticky_in_yaml(tmp_path: Path) -> None:
    from relayrace.config import load_team

    doc = ("apiVersion: relayrace/v1\nkind: Agent\nmetadata: {{name: {n}}}\n"
           "spec:\n  prompts: {{system: hi}}\n{extra}")
    (tmp_path / "a.yaml").write_text(doc.format(n="lead", extra="  sub_agents: [desk]\n"))
    (tmp_path / "b.yaml").write_text(doc.format(n="desk", extra="  sticky: true\n"))
    lead = load_team(tmp_path)["lead"]
    desk_agent = lead.find_agent("desk")
    assert desk_agent is not None and desk_agent.sticky


# --------------------------------------------------------------------------- the hand-back
# does not depend on how the target answered: in text, or through a tool's Finish.

@tool
def wrap_up(summary: str) -> Finish:
    """Give the final answer and end the turn."""
    return Finish("wrapped up", summary)


def _target(kind: str, model: ScriptedModel) -> Agent[Any]:
    last = Agent("polish", instructions="Polish.", model=model, tools=[wrap_up])
    if kind == "chat":
        return last
    if kind == "single_turn":
        return Agent("polish", instructions="Polish.", model=model, tools=[wrap_up],
                     mode="single_turn")
    steps = [Agent("draft", instructions="Draft.", model=model), last]
    if kind == "sequential":
        return SequentialAgent("writing", steps=steps)
    return LoopAgent("writing", steps=steps, max_iterations=1)


@pytest.mark.parametrize("ending", ["text", "finish"])
@pytest.mark.parametrize("kind", ["chat", "single_turn", "sequential", "loop"])
async def test_the_next_turn_goes_back_to_the_agent_that_transferred_however_it_answered(
        kind: str, ending: str) -> None:
    target = _target(kind, ScriptedModel([]))
    answer = (text("the note") if ending == "text"
              else tool_call("wrap_up", {"summary": "the note"}))
    lead_script = [tool_call(f"transfer_to_{target.name}")]
    if ending == "text" and kind != "chat":  # a workflow or single-turn target returns now
        lead_script.append(text("Here it is."))
    lead_script.append(text("Anything else?"))
    model = ScriptedModel(by_agent={"lead": lead_script, "draft": [text("a draft")],
                                    "polish": [answer]})
    for a in target.walk():
        a.model = model
    lead = Agent("lead", instructions="Lead.", model=model, sub_agents=[target])
    session = MemorySession()
    await Runner.run(lead, "write a note", session=session)
    second = await Runner.run(lead, "thanks", session=session)
    assert second.last_agent.name == "lead" and second.final_output == "Anything else?"
    assert [r.agent for r in model.requests][-1] == "lead"
    assert_valid_protocol(await session_messages(session))
