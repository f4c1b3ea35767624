"""Human approval: runs that stop for a decision, serialized pending state, and resumption."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import assert_valid_protocol, of_type, requests_of, session_messages, speakers
from relayrace import (
    Agent,
    ApprovalRequestedEvent,
    DelegationEvent,
    RunFinishedEvent,
    Runner,
    UserError,
    handoff,
    tool,
)
from relayrace.agents.approvals import PendingRun
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.teams.meta_tools import DelegationConfig
from relayrace.teams.workflows import ParallelAgent, SequentialAgent
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call

EXECUTED: list[str] = []


@tool(requires_approval=True)
def wire_money(amount: int, to: str) -> str:
    """Wire money (needs a human's approval)."""
    EXECUTED.append(f"{amount}->{to}")
    return f"wired {amount} to {to}"


@tool
def balance() -> str:
    """Read the balance."""
    EXECUTED.append("balance")
    return "balance 1000"


@pytest.fixture(autouse=True)
def _clear() -> None:
    EXECUTED.clear()


def banker(model: Any) -> Agent:
    return Agent("banker", instructions="You move money.", model=model,
                 tools=[wire_money, balance])


WIRE = tool_call("wire_money", {"amount": 50, "to": "bob"}, id="call_wire")


# --------------------------------------------------------------------------- stopping


async def test_a_tool_requiring_approval_stops_the_run() -> None:
    model = ScriptedModel(by_agent={"banker": [WIRE]})
    result = await Runner.run(banker(model), "pay bob 50")
    assert result.pending is not None
    [p] = result.pending.approvals
    assert (p.call_id, p.tool_name, p.agent, p.path) == ("call_wire", "wire_money", "banker",
                                                         "banker")
    assert json.loads(p.arguments) == {"amount": 50, "to": "bob"}
    assert EXECUTED == []
    assert result.final_output == ""
    [event] = of_type(result.new_events, ApprovalRequestedEvent)
    assert event.tool_call_id == "call_wire"
    finished = of_type(result.new_events, RunFinishedEvent)
    assert finished[-1].status == "interrupted"


async def test_other_calls_of_the_turn_still_run_and_nothing_is_lost() -> None:
    model = ScriptedModel(by_agent={"banker": [[tool_call("balance", id="call_bal"), WIRE]]})
    result = await Runner.run(banker(model), "check and pay")
    assert result.pending is not None
    assert [a.call_id for a in result.pending.approvals] == ["call_wire"]
    assert EXECUTED == ["balance"]


async def test_approved_call_runs_on_resume() -> None:
    model = ScriptedModel(by_agent={"banker": [WIRE, text("Paid bob 50.")]})
    first = await Runner.run(banker(model), "pay bob 50")
    assert first.pending is not None
    result = await Runner.resume(first.pending, approvals={"call_wire": True})
    assert result.pending is None
    assert EXECUTED == ["50->bob"]
    assert result.final_output == "Paid bob 50."
    assert [r.message.content for r in result.tool_results] == ["wired 50 to bob"]
    messages = await session_messages(result.session)
    assert_valid_protocol(messages)
    assert len([m for m in messages if m.role == "tool"]) == 1
    assert len(model.requests) == 2


async def test_a_rejection_is_told_to_the_model() -> None:
    model = ScriptedModel(by_agent={"banker": [WIRE, text("I did not pay.")]})
    first = await Runner.run(banker(model), "pay bob 50")
    assert first.pending is not None
    result = await Runner.resume(first.pending, approvals={"call_wire": False})
    assert EXECUTED == []
    [res] = result.tool_results
    assert res.is_error and res.message.tool_call_id == "call_wire"
    assert "reject" in res.message.content.lower() or "declin" in res.message.content.lower()
    assert res.message in model.requests[1].messages
    assert result.final_output == "I did not pay."
    assert_valid_protocol(await session_messages(result.session))


async def test_undecided_calls_stay_pending() -> None:
    model = ScriptedModel(by_agent={
        "banker": [[WIRE, tool_call("wire_money", {"amount": 5, "to": "eve"},
                                    id="call_two")],
                   text("done")],
    })
    first = await Runner.run(banker(model), "pay both")
    assert first.pending is not None
    assert [a.call_id for a in first.pending.approvals] == ["call_wire", "call_two"]
    second = await Runner.resume(first.pending, approvals={"call_wire": True})
    assert second.pending is not None
    assert [a.call_id for a in second.pending.approvals] == ["call_two"]
    assert EXECUTED == ["50->bob"]
    third = await Runner.resume(second.pending, approvals={"call_two": False})
    assert third.pending is None and third.final_output == "done"
    assert EXECUTED == ["50->bob"]
    assert_valid_protocol(await session_messages(third.session))


async def test_resume_with_an_unknown_call_id_is_a_user_error() -> None:
    model = ScriptedModel(by_agent={"banker": [WIRE]})
    first = await Runner.run(banker(model), "pay")
    assert first.pending is not None
    with pytest.raises(UserError, match="call_nope"):
        await Runner.resume(first.pending, approvals={"call_nope": True})


# --------------------------------------------------------------------------- serialization


async def test_pending_run_round_trips_through_json() -> None:
    model = ScriptedModel(by_agent={"banker": [WIRE, text("Paid.")]})
    agent = banker(model)
    session = MemorySession()
    first = await Runner.run(agent, "pay", session=session)
    assert first.pending is not None
    data = first.pending.to_json()
    assert isinstance(json.loads(data), dict)
    restored = PendingRun.from_json(data, entry=agent, session=session)
    assert restored.approvals == first.pending.approvals
    assert restored.session_id == session.session_id
    result = await Runner.resume(restored, approvals={"call_wire": True})
    assert result.final_output == "Paid." and EXECUTED == ["50->bob"]


async def test_from_json_checks_the_session_and_the_text() -> None:
    model = ScriptedModel(by_agent={"banker": [WIRE]})
    agent = banker(model)
    first = await Runner.run(agent, "pay")
    assert first.pending is not None
    with pytest.raises(UserError):
        PendingRun.from_json(first.pending.to_json(), entry=agent, session=MemorySession())
    with pytest.raises(UserError):
        PendingRun.from_json("not json", entry=agent, session=first.session)


async def test_an_unbound_pending_run_cannot_be_resumed() -> None:
    model = ScriptedModel(by_agent={"banker": [WIRE]})
    first = await Runner.run(banker(model), "pay")
    assert first.pending is not None
    unbound = PendingRun(session_id=first.pending.session_id, agent="banker",
                         approvals=first.pending.approvals)
    with pytest.raises(UserError):
        await Runner.resume(unbound, approvals={"call_wire": True})


async def test_from_session_rebuilds_the_pending_run_after_a_restart(tmp_path: Any) -> None:
    db = tmp_path / "approvals.db"
    model = ScriptedModel(by_agent={"banker": [WIRE, text("Paid after restart.")]})
    first = await Runner.run(banker(model), "pay", session=SQLiteSession("s-1", db))
    assert first.pending is not None
    # A new process: new agent and session objects, the same file.
    agent = banker(model)
    reopened = SQLiteSession("s-1", db)
    pending = await PendingRun.from_session(reopened, entry=agent)
    assert pending is not None
    assert [a.call_id for a in pending.approvals] == ["call_wire"]
    result = await Runner.resume(pending, approvals={"call_wire": True})
    assert result.final_output == "Paid after restart."
    assert EXECUTED == ["50->bob"]
    assert await PendingRun.from_session(SQLiteSession("s-1", db), entry=agent) is None
    assert_valid_protocol(await session_messages(reopened))


async def test_an_approval_is_used_once_for_the_request_it_answers(tmp_path: Any) -> None:
    """A new process numbers its model's calls afresh: the call after the approved one gets
    its id again, and must ask again rather than run on the old approval."""
    db = tmp_path / "approvals.db"
    wire = tool_call("wire_money", {"amount": 50, "to": "bob"})  # ids call_1, call_2, ...
    first = await Runner.run(banker(ScriptedModel([wire])), "pay",
                             session=SQLiteSession("s-1", db))
    assert first.pending is not None
    stored = first.pending.to_json()
    assert [a.call_id for a in first.pending.approvals] == ["call_1"]

    # A second process: a new model, agent and session object; the pending run from JSON.
    agent = banker(ScriptedModel([wire, text("Paid.")]))
    session = SQLiteSession("s-1", db)
    pending = PendingRun.from_json(stored, entry=agent, session=session)
    second = await Runner.resume(pending, approvals={"call_1": True})
    assert EXECUTED == ["50->bob"]  # the approved call ran; its namesake waits for a human
    assert second.pending is not None
    assert [a.call_id for a in second.pending.approvals] == ["call_1"]
    assert len(of_type(await session.get_events(), ApprovalRequestedEvent)) == 2

    # The first decision cannot answer the new request, however often it is replayed.
    with pytest.raises(UserError, match="no longer waits"):
        await Runner.resume(PendingRun.from_json(stored, entry=agent, session=session),
                            approvals={"call_1": True})
    assert EXECUTED == ["50->bob"]
    third = await Runner.resume(PendingRun.from_json(second.pending.to_json(), entry=agent,
                                                     session=session),
                                approvals={"call_1": True})
    assert third.final_output == "Paid."
    assert EXECUTED == ["50->bob", "50->bob"]


# --------------------------------------------------------------------------- handoffs


def desk(model: Any) -> Agent:
    billing = Agent("billing", instructions="You bill.", model=model)
    return Agent("triage", instructions="You triage.", model=model,
                 sub_agents=[handoff(billing, requires_approval=True)])


async def test_a_handoff_requiring_approval_stops_and_resumes() -> None:
    model = ScriptedModel(by_agent={"triage": [tool_call("transfer_to_billing", id="call_t")],
                                    "billing": [text("billing here")]})
    first = await Runner.run(desk(model), "refund")
    assert first.pending is not None
    [p] = first.pending.approvals
    assert (p.call_id, p.tool_name) == ("call_t", "transfer_to_billing")
    assert first.handoffs == []
    result = await Runner.resume(first.pending, approvals={"call_t": True})
    assert result.final_output == "billing here"
    assert result.last_agent.name == "billing"
    assert [(h.agent, h.to_agent) for h in result.handoffs] == [("triage", "billing")]
    assert_valid_protocol(await session_messages(result.session))


async def test_a_rejected_handoff_keeps_the_caller() -> None:
    model = ScriptedModel(by_agent={"triage": [tool_call("transfer_to_billing", id="call_t"),
                                               text("I'll handle it myself")],
                                    "billing": []})
    first = await Runner.run(desk(model), "refund")
    assert first.pending is not None
    result = await Runner.resume(first.pending, approvals={"call_t": False})
    assert result.final_output == "I'll handle it myself"
    assert result.last_agent.name == "triage"
    assert result.tool_results[0].is_error
    assert speakers(model) == ["triage", "triage"]


# --------------------------------------------------------------------------- delegated children


def delegating(model: Any) -> Agent:
    child = Agent("banker", instructions="You move money.", model=model, tools=[wire_money])
    return Agent("coordinator", instructions="You coordinate.", model=model,
                 tools=[child.as_tool()])


async def test_a_request_inside_a_delegated_child_surfaces_and_resumes_there() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("banker", {"query": "pay bob"}, id="call_agent"),
                        text("Bob is paid.")],
        "banker": [WIRE, text("SUMMARY: paid bob 50")],
    })
    session = MemorySession()
    first = await Runner.run(delegating(model), "pay bob", session=session)
    assert first.pending is not None
    [p] = first.pending.approvals
    assert p.call_id == "call_wire" and p.tool_name == "wire_money"
    assert p.path == "coordinator/banker"
    [child] = session.child_sessions
    assert p.session_id == child.session_id
    assert EXECUTED == []
    outer_events = of_type(session.events, ApprovalRequestedEvent)
    assert [e.tool_call_id for e in outer_events] == ["call_wire"]

    result = await Runner.resume(first.pending, approvals={"call_wire": True})
    assert EXECUTED == ["50->bob"]
    assert result.final_output == "Bob is paid."
    assert len(session.child_sessions) == 1  # the child continued in its own session
    child_msgs = await session_messages(child)
    assert "wired 50 to bob" in [m.content for m in child_msgs]
    assert_valid_protocol(child_msgs)
    assert_valid_protocol(await session_messages(session))
    [res] = result.tool_results
    assert res.message.tool_call_id == "call_agent" and "paid bob 50" in res.message.content
    # The banker's second request saw the wire result, not a fresh task.
    banker_requests = requests_of(model, "banker")
    assert len(banker_requests) == 2
    assert [m.content for m in banker_requests[1].messages if m.role == "user"] == ["pay bob"]


async def test_a_rejection_inside_a_delegated_child() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("banker", {"query": "pay bob"}, id="call_agent"),
                        text("Not paid.")],
        "banker": [WIRE, text("SUMMARY: the payment was rejected")],
    })
    first = await Runner.run(delegating(model), "pay bob")
    assert first.pending is not None
    result = await Runner.resume(first.pending, approvals={"call_wire": False})
    assert EXECUTED == []
    assert "rejected" in result.tool_results[0].message.content
    assert result.final_output == "Not paid."


async def test_a_child_request_survives_a_restart_with_sqlite(tmp_path: Any) -> None:
    db = tmp_path / "child.db"
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("banker", {"query": "pay bob"}, id="call_agent"),
                        text("Bob is paid.")],
        "banker": [WIRE, text("SUMMARY: paid")],
    })
    first = await Runner.run(delegating(model), "pay", session=SQLiteSession("p-1", db))
    assert first.pending is not None
    agent = delegating(model)
    pending = await PendingRun.from_session(SQLiteSession("p-1", db), entry=agent)
    assert pending is not None
    [p] = pending.approvals
    assert p.call_id == "call_wire" and p.path == "coordinator/banker"
    assert p.session_id != "p-1"
    result = await Runner.resume(pending, approvals={"call_wire": True})
    assert result.final_output == "Bob is paid."
    assert EXECUTED == ["50->bob"]
    assert len(await SQLiteSession("p-1", db).children()) == 1


async def test_a_request_inside_a_war_room_child_surfaces_on_the_outer_run() -> None:
    model = ScriptedModel(by_agent={
        "lead": [tool_call("war_room", {"agents": [{"type": "banker", "task": "pay bob"},
                                                   {"type": "clerk", "task": "file it"}]},
                           id="call_room"),
                 text("All done.")],
        "banker": [WIRE, text("SUMMARY: paid")],
        "clerk": [text("SUMMARY: filed")],
    })
    banker_agent = Agent("banker", instructions="x", description="pays", model=model,
                         tools=[wire_money])
    clerk = Agent("clerk", instructions="x", description="files", model=model)
    lead = Agent("lead", instructions="x", model=model, specialists=[banker_agent, clerk],
                 delegation=DelegationConfig())
    session = MemorySession()
    first = await Runner.run(lead, "go", session=session)
    assert first.pending is not None
    assert [a.call_id for a in first.pending.approvals] == ["call_wire"]
    assert first.pending.approvals[0].path == "lead/banker"
    result = await Runner.resume(first.pending, approvals={"call_wire": True})
    assert EXECUTED == ["50->bob"]
    assert result.final_output == "All done."
    # One delegation per child: the clerk's, logged before the pause, is not logged again.
    named = [e.child_session_id for e in await session.get_events()
             if isinstance(e, DelegationEvent)]
    assert sorted(named) == sorted(i.session_id for i in await session.children())
    assert_valid_protocol(await session_messages(session))


async def test_a_request_inside_a_workflow_step_resumes_that_step() -> None:
    model = ScriptedModel(by_agent={"intake": [text("noted")],
                                    "banker": [WIRE, text("Paid bob.")]})
    flow = SequentialAgent("flow", steps=[
        Agent("intake", instructions="x", model=model),
        Agent("banker", instructions="x", model=model, tools=[wire_money])])
    first = await Runner.run(flow, "pay bob")
    assert first.pending is not None
    assert [a.call_id for a in first.pending.approvals] == ["call_wire"]
    result = await Runner.resume(first.pending, approvals={"call_wire": True})
    assert EXECUTED == ["50->bob"]
    assert result.pending is None
    assert result.final_output == "Paid bob."
    assert speakers(model) == ["intake", "banker", "banker"]
    assert_valid_protocol(await session_messages(result.session))


async def _assert_children_complete(session: MemorySession) -> None:
    """Every child session answers each of its calls (none left open by a resume)."""
    infos = await session.children()
    assert infos
    for info in infos:
        assert_valid_protocol(await session_messages(session.open_child(info)))


async def test_war_room_children_of_one_specialist_each_resume_their_own_call() -> None:
    """Two children of the same specialist: each approved call runs exactly once, in its child."""
    model = ScriptedModel(by_agent={
        "lead": [tool_call("war_room", {"agents": [{"type": "banker", "task": "pay ann"},
                                                   {"type": "banker", "task": "pay bob"}]},
                           id="call_room"),
                 text("All done.")],
        "banker": [tool_call("wire_money", {"amount": 10, "to": "ann"}, id="c1"),
                   tool_call("wire_money", {"amount": 20, "to": "bob"}, id="c2"),
                   text("SUMMARY: paid"), text("SUMMARY: paid"),
                   # Spare turns, so a child wrongly run again fails on the assertions.
                   text("SUMMARY: extra"), text("SUMMARY: extra")],
    })
    banker_agent = Agent("banker", instructions="x", description="pays", model=model,
                         tools=[wire_money])
    lead = Agent("lead", instructions="x", model=model, specialists=[banker_agent],
                 meta_tools=["parallel"])
    session = MemorySession()
    first = await Runner.run(lead, "go", session=session)
    assert first.pending is not None
    assert sorted(p.call_id for p in first.pending.approvals) == ["c1", "c2"]
    assert len({p.session_id for p in first.pending.approvals}) == 2
    assert EXECUTED == []
    result = await Runner.resume(first.pending, approvals={"c1": True, "c2": True})
    assert result.pending is None
    assert sorted(EXECUTED) == ["10->ann", "20->bob"]
    assert result.final_output == "All done."
    [room] = [t for t in result.tool_results if t.tool_name == "war_room"]
    assert "2 succeeded, 0 failed" in room.message.content
    assert len(await session.children()) == 2
    await _assert_children_complete(session)
    assert_valid_protocol(await session_messages(session))


async def test_approvals_inside_a_debate_resume_once_and_the_debate_completes() -> None:
    def fn(request: Any) -> Any:
        answered = any(m.role == "tool" for m in request.messages)
        if request.agent == "lead":
            return text("lead done") if answered else tool_call(
                "debate_ensemble", {"question": "2+2?", "participants": ["a", "b"],
                                    "rounds": 1}, id="call_debate")
        if answered:
            return text("FINAL ANSWER: 4")
        amount = 1 if request.agent == "a" else 2
        return tool_call("wire_money", {"amount": amount, "to": request.agent},
                         id=f"wire_{request.agent}_{len(model.requests)}")

    model = FunctionModel(fn)
    a = Agent("a", instructions="a", model=model, tools=[wire_money])
    b = Agent("b", instructions="b", model=model, tools=[wire_money])
    lead = Agent("lead", instructions="l", model=model, specialists=[a, b],
                 meta_tools=["debate"])
    session = MemorySession()
    first = await Runner.run(lead, "go", session=session)
    assert first.pending is not None
    assert len(first.pending.approvals) == 2
    result = await Runner.resume(
        first.pending, approvals={p.call_id: True for p in first.pending.approvals})
    assert result.pending is None, "the resumed debate asked for new approvals"
    assert sorted(EXECUTED) == ["1->a", "2->b"]
    assert result.final_output == "lead done"
    [debate] = [t for t in result.tool_results if t.tool_name == "debate_ensemble"]
    assert "CONSENSUS" in debate.message.content
    assert "NO CONSENSUS" not in debate.message.content
    await _assert_children_complete(session)
    assert_valid_protocol(await session_messages(session))


async def test_a_task_agent_returns_after_resume_of_a_call_before_finish_task() -> None:
    """[call needing approval, finish_task] in one turn: on resume, finish_task still returns."""
    model = ScriptedModel([
        tool_call("transfer_to_worker", {}),
        [tool_call("wire_money", {"amount": 7, "to": "bob"}, id="w1"),
         tool_call("finish_task", {"result": "paid bob 7"}, id="f1")],
        text("lead: all done"),
        text("worker: an extra turn it should never get"),
    ])
    worker = Agent("worker", instructions="w", model=model, mode="task", tools=[wire_money])
    lead = Agent("lead", instructions="l", model=model, sub_agents=[worker])
    first = await Runner.run(lead, "pay bob")
    assert first.pending is not None
    assert "w1" in [p.call_id for p in first.pending.approvals]
    result = await Runner.resume(first.pending, approvals={"w1": True})
    assert result.pending is None
    assert EXECUTED == ["7->bob"]
    by_id = {t.message.tool_call_id: t for t in result.tool_results}
    assert by_id["w1"].message.content == "wired 7 to bob"
    assert not by_id["f1"].is_error, by_id["f1"].message.content
    assert by_id["f1"].message.content == "Returned to lead with the result."
    assert result.final_output == "lead: all done"
    assert result.last_agent.name == "lead"
    assert speakers(model) == ["lead", "worker", "lead"]
    [back] = [h for h in result.handoffs if h.is_return]
    assert (back.agent, back.to_agent) == ("worker", "lead")
    assert_valid_protocol(await session_messages(result.session))


async def test_resuming_a_parallel_branch_reruns_no_finished_step_or_branch() -> None:
    model = ScriptedModel(by_agent={
        "step1": [text("step1 answer"), text("step1 answer AGAIN")],
        "b1": [tool_call("wire_money", {"amount": 1, "to": "ann"}, id="c1"), text("b1 done")],
        "b2": [text("b2 done"), text("b2 done AGAIN")],
    })
    flow = SequentialAgent("flow", steps=[
        Agent("step1", instructions="s", model=model),
        ParallelAgent("par", branches=[
            Agent("b1", instructions="b", model=model, tools=[wire_money]),
            Agent("b2", instructions="b", model=model)])])
    first = await Runner.run(flow, "go", session=MemorySession())
    assert first.pending is not None
    assert [p.call_id for p in first.pending.approvals] == ["c1"]
    assert sorted(speakers(model)) == ["b1", "b2", "step1"]
    result = await Runner.resume(first.pending, approvals={"c1": True})
    assert result.pending is None
    assert EXECUTED == ["1->ann"]
    assert speakers(model)[3:] == ["b1"], speakers(model)
    assert "b1 done" in result.final_output and "b2 done" in result.final_output
    assert "AGAIN" not in result.final_output
