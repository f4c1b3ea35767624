"""Classify a turn's tool calls before any runs: `plan_calls` makes a `CallPlan`.

Every call of a model turn gets one entry, in call order, decided from the turn's offer, the
calls themselves and what is known so far (`Known`: a person's decisions, calls an earlier
process started): run the tool (`Run`), answer it without running anything (`Refuse`), wait
for a person (`AskPerson`), or compete as a move of control (`TransferAsked`, `ReturnAsked`).
Nothing here runs, awaits or writes: ``toolexec`` executes the plan.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..agents.handoffs import FINISH_TASK
from .callcheck import argument, parse_handoff, refusal
from .callkey import Request, request_of

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.handoffs import Handoff
    from ..agents.tools import Tool
    from ..core.events import ToolStartedEvent
    from ..core.messages import ToolCall
    from .offer import Offer

__all__ = ["AskPerson", "CallPlan", "Entry", "Known", "Refuse", "ReturnAsked", "Run",
           "TransferAsked", "outcome_unknown", "plan_calls"]

REJECTED = ("Rejected: a human reviewer declined this call, so it was not executed. Continue "
            "without it or ask the user.")


@dataclass(frozen=True, slots=True)
class Run:
    """Run ``tool`` for ``call``."""

    call: ToolCall
    tool: Tool


@dataclass(frozen=True, slots=True)
class Refuse:
    """Answer ``call`` with the error ``text``; nothing runs."""

    call: ToolCall
    text: str


@dataclass(frozen=True, slots=True)
class AskPerson:
    """``call`` waits for a person's decision (``note``: what they must know first)."""

    call: ToolCall
    note: str = ""


@dataclass(frozen=True, slots=True)
class TransferAsked:
    """A transfer tool's ``call``, parsed: through ``handoff``, with its reason and input
    (validated when the handoff has an ``input_type``)."""

    call: ToolCall
    handoff: Handoff[Any]
    reason: str
    value: Any = None


@dataclass(frozen=True, slots=True)
class ReturnAsked:
    """A task agent's ``finish_task``: control and ``summary`` go back to ``target``."""

    call: ToolCall
    target: Agent[Any]
    summary: str


Entry = Run | Refuse | AskPerson | TransferAsked | ReturnAsked
"""What becomes of one call."""


@dataclass(frozen=True, slots=True)
class Known:
    """What a turn's plan depends on besides the offer and the calls: the decisions so far."""

    session_id: str
    """The session the calls were made in (a decision binds to it)."""
    caller: Agent[Any] | None = None
    """The agent a ``finish_task`` returns to (``None``: no return is owed)."""
    decided: Mapping[Request, bool] = field(default_factory=dict)
    """A person's approval decisions, by the request each answers."""
    answered: frozenset[Request] = frozenset()
    """Calls whose questions a person answered: they run again with the answers."""
    started: Mapping[str, ToolStartedEvent] = field(default_factory=dict)
    """Calls an earlier process started and left without a result, by call id."""
    asked: frozenset[str] = frozenset()
    """Of those, the ones that stopped for a person after they last started."""
    recorded: frozenset[str] = frozenset()
    """Of those, the ones a durable run's step recorded the outcome of (they finished)."""


@dataclass(frozen=True, slots=True)
class CallPlan:
    """One entry per call of a turn, in call order, and the decisions the plan uses up."""

    entries: tuple[Entry, ...]
    used: tuple[Request, ...] = ()
    """The approval decisions taken by this plan's calls: each holds for one call, once."""


def plan_calls(agent: Agent[Any], offer: Offer, calls: Sequence[ToolCall],
               known: Known) -> CallPlan:
    """What becomes of each of ``agent``'s ``calls``, checked against the turn's ``offer``
    and what is ``known``. Pure: the same inputs make the same plan."""
    used: list[Request] = []
    entries = tuple(_entry(agent, offer, call, known, used) for call in calls)
    return CallPlan(entries, tuple(used))


def _entry(agent: Agent[Any], offer: Offer, call: ToolCall, known: Known,
           used: list[Request]) -> Entry:
    """One call's entry; a decision it takes is added to ``used``."""
    ts = offer.toolset
    tool = ts.tools.get(call.name)
    chosen: Run | TransferAsked
    if tool is not None:
        if call.name in offer.off:
            return Refuse(call, f"Not performed: the tool {call.name!r} is not available "
                                "right now; continue without it.")
        started = known.started.get(call.id)
        if started is not None and call.id in known.recorded:
            return Run(call, tool)  # a durable run's earlier attempt finished it
        # A call that stopped for a person after it last started (``asked``) did not end.
        if started is not None and not tool.idempotent and call.id not in known.asked:
            unknown = outcome_unknown(started, "the run stopped")
            return AskPerson(call, unknown) if tool.requires_approval else Refuse(call, unknown)
        if request_of(known.session_id, call) in known.answered:
            # It runs again with the answers: approved (if it had to be) before it asked.
            return Run(call, tool)
        if not tool.requires_approval:
            return Run(call, tool)
        chosen = Run(call, tool)
    elif call.name == FINISH_TASK and offer.finish_task:
        assert known.caller is not None  # finish_task is offered while a return is owed
        # Its result was guarded when the call was logged.
        return ReturnAsked(call, known.caller, argument(call, "result"))
    elif call.name in ts.handoffs.by_tool and not offer.refuse_handoffs:
        h, reason, error, value = parse_handoff(agent, call, offer)
        if error is not None or h is None:
            return Refuse(call, error or "")
        chosen = TransferAsked(call, h, reason, value)
        if not h.requires_approval:
            return chosen
    else:
        return Refuse(call, refusal(agent, call.name, offer))
    return _approved(chosen, known, used)


def _approved(chosen: Run | TransferAsked, known: Known, used: list[Request]) -> Entry:
    """``chosen`` if a person approved its call, refused if they declined, else asked."""
    request = request_of(known.session_id, chosen.call)
    decision = known.decided.get(request)
    if decision is None or request in used:  # a decision holds for one call
        return AskPerson(chosen.call)
    used.append(request)
    return chosen if decision else Refuse(chosen.call, REJECTED)


def outcome_unknown(started: ToolStartedEvent, why: str) -> str:
    """What the model is told of a call that started but whose result was never recorded."""
    at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started.time))
    return (f"Outcome unknown: this call started at {at} (agent {started.agent}), and its "
            f"result was never recorded ({why}). It may or may not have taken effect: check "
            "before calling it again.")
