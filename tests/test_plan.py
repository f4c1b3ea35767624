"""A turn's calls classified without a loop: `plan_calls` over the offer, the calls and the
decisions so far, and `first_move`, which picks the move of control that wins.

Each test states an agent's offer and a turn's calls, and checks the plan's entries (one per
call, in call order) and the decisions it uses up: nothing runs, awaits or is written.
"""

from __future__ import annotations

import json
from typing import Any

from relayrace import Agent, ToolCall, handoff, tool
from relayrace._engine.moves import first_move
from relayrace._engine.offer import Offer
from relayrace._engine.plan import (
    REJECTED,
    AskPerson,
    CallPlan,
    Known,
    Refuse,
    ReturnAsked,
    Run,
    TransferAsked,
    plan_calls,
)
from relayrace._engine.state import toolset_of
from relayrace._engine.turn import End, RouteTo
from relayrace.core.events import ToolStartedEvent
from relayrace.testing import ScriptedModel


@tool
def lookup(key: str) -> str:
    """Look something up.

    Args:
        key: What to look up.
    """
    return key


@tool(requires_approval=True)
def refund(amount: int) -> str:
    """Refund an amount.

    Args:
        amount: How much.
    """
    return str(amount)


def desk(*, approve_billing: bool = False) -> tuple[Agent[Any], Agent[Any], Agent[Any]]:
    model = ScriptedModel()
    billing = Agent("billing", instructions="b", model=model)
    account = Agent("account", instructions="a", model=model)
    triage = Agent("triage", instructions="t", model=model, tools=[lookup, refund],
                   sub_agents=[handoff(billing, requires_approval=approve_billing), account])
    return triage, billing, account


def calls(*made: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(f"c{i}", name, json.dumps(args)) for i, (name, args) in enumerate(made)]


def offer(agent: Agent[Any], **changes: Any) -> Offer:
    """What ``agent`` has, offered as it is (with ``changes``)."""
    ts = toolset_of(agent)
    fields = {"toolset": ts, "definitions": ts.definitions, "off": frozenset(),
              "handoffs": ts.enabled, "finish_task": False, "refuse_handoffs": False, **changes}
    return Offer(**fields)


def request(call: ToolCall) -> tuple[str, str, str, str]:
    return "s", call.id, call.name, call.arguments


def test_every_call_gets_one_entry_in_call_order() -> None:
    triage, billing, account = desk()
    made = calls(("lookup", {"key": "a"}), ("transfer_to_billing", {"reason": "invoice"}),
                 ("transfer_to_account", {"reason": "password"}), ("nope", {}))
    plan = plan_calls(triage, offer(triage), made, Known("s"))
    assert [type(e) for e in plan.entries] == [Run, TransferAsked, TransferAsked, Refuse]
    assert [e.call for e in plan.entries] == made
    first, second = plan.entries[1], plan.entries[2]
    assert isinstance(first, TransferAsked) and first.handoff.agent is billing
    assert first.reason == "invoice"
    assert isinstance(second, TransferAsked) and second.handoff.agent is account
    assert plan.used == ()


def test_the_first_emitted_move_wins_and_each_other_is_told_which_won() -> None:
    triage, billing, _ = desk()
    made = calls(("transfer_to_account", {"reason": "r"}), ("transfer_to_billing", {}))
    plan = plan_calls(triage, offer(triage), made, Known("s"))
    moves = [(2, End(ToolCall("c2", "wrap_up", "{}"), "done")),
             (1, plan.entries[1]), (0, plan.entries[0])]  # type: ignore[list-item]
    index, chosen, notes = first_move(moves)  # type: ignore[arg-type]
    assert index == 0 and chosen is plan.entries[0]
    assert [i for i, _ in notes] == [1, 2]
    assert notes[0][1] == ("Not performed: only the first routing request of a turn is "
                           "considered, and this turn's first was: transfer to account.")
    # A tool that returned its route ran: only its routing is void.
    assert notes[1][1].startswith("The tool ran, but its routing was not applied.")
    # A tool's typed TransferTo emitted first wins over a later transfer call.
    routed = RouteTo(ToolCall("c0", "pass_on", "{}"), "billing")
    index, chosen, notes = first_move([(1, plan.entries[1]), (0, routed)])  # type: ignore[list-item]
    assert (index, chosen) == (0, routed) and billing.name in notes[0][1]


def test_refusals_name_what_was_wrong_and_what_is_allowed() -> None:
    triage, billing, _ = desk()
    made = calls(("nope", {}), ("transfer_to_account", {}))
    plan = plan_calls(billing, offer(billing), made, Known("s"))
    assert all(type(e) is Refuse for e in plan.entries)
    texts = [e.text for e in plan.entries]  # type: ignore[union-attr]
    assert texts[0].startswith("Unknown tool 'nope'.")
    assert "not allowed from 'billing'" in texts[1]
    # A tool its gate turned off this turn, and a transfer after a swarm's hops are spent.
    plan = plan_calls(triage, offer(triage, off=frozenset({"lookup"}), refuse_handoffs=True),
                      calls(("lookup", {"key": "a"}), ("transfer_to_billing", {})), Known("s"))
    off, spent = plan.entries
    assert type(off) is Refuse and "'lookup' is not available right now" in off.text
    assert type(spent) is Refuse and "this run has used its handoffs" in spent.text


def test_a_transfer_that_needs_approval_asks_a_person_until_one_decides() -> None:
    triage, billing, _ = desk(approve_billing=True)
    [call] = calls(("transfer_to_billing", {"reason": "invoice"}))
    assert plan_calls(triage, offer(triage), [call], Known("s")) == \
        CallPlan((AskPerson(call),))
    approved = plan_calls(triage, offer(triage), [call],
                          Known("s", decided={request(call): True}))
    [entry] = approved.entries
    assert type(entry) is TransferAsked and entry.handoff.agent is billing
    assert approved.used == (request(call),)  # the executor uses the decision up
    declined = plan_calls(triage, offer(triage), [call],
                          Known("s", decided={request(call): False}))
    assert declined == CallPlan((Refuse(call, REJECTED),), (request(call),))
    # A decision binds to its session: another session's call asks again.
    other = plan_calls(triage, offer(triage), [call], Known("t", decided={request(call): True}))
    assert other.entries == (AskPerson(call),) and other.used == ()


def test_a_decision_holds_for_one_call_once() -> None:
    triage, _, _ = desk()
    call = ToolCall("c0", "refund", '{"amount": 5}')
    decided = Known("s", decided={request(call): True})
    plan = plan_calls(triage, offer(triage), [call, call], decided)
    assert plan.entries == (Run(call, refund), AskPerson(call))
    assert plan.used == (request(call),)
    assert dict(decided.decided) == {request(call): True}  # the plan changed nothing


def test_a_call_an_earlier_process_started_is_unknown_unless_recorded() -> None:
    triage, _, _ = desk()
    look, pay = calls(("lookup", {"key": "a"}), ("refund", {"amount": 1}))
    started = {c.id: ToolStartedEvent(agent="triage", tool_call_id=c.id, tool_name=c.name,
                                      time=0.0) for c in (look, pay)}
    plan = plan_calls(triage, offer(triage), [look, pay], Known("s", started=started))
    unknown, ask = plan.entries
    assert type(unknown) is Refuse and unknown.text.startswith(
        "Outcome unknown: this call started at 1970-01-01 00:00:00 UTC (agent triage)")
    assert type(ask) is AskPerson and ask.note.startswith("Outcome unknown")
    # A durable step recorded the first's outcome; a person was asked about the second again.
    plan = plan_calls(triage, offer(triage), [look, pay],
                      Known("s", started=started, recorded=frozenset({"c0"}),
                            asked=frozenset({"c1"})))
    assert plan.entries == (Run(look, lookup), AskPerson(pay))


def test_finish_task_returns_to_the_caller_with_its_result() -> None:
    triage, billing, _ = desk()
    [call] = calls(("finish_task", {"result": "paid"}))
    plan = plan_calls(billing, offer(billing, finish_task=True), [call],
                      Known("s", caller=triage))
    assert plan.entries == (ReturnAsked(call, triage, "paid"),)
    # Not offered (no return owed): an unknown tool.
    [entry] = plan_calls(billing, offer(billing), [call], Known("s")).entries
    assert type(entry) is Refuse and entry.text.startswith("Unknown tool 'finish_task'")
