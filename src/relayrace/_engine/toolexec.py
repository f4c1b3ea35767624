"""Tool execution for the run loop: a turn's calls classified, then the plan carried out.

`plan_calls` (``plan``) decides what becomes of each call; `run_tools` executes that plan:
the refused calls answered, the tools run (concurrently; ``sequential`` ones alone, in order),
the run stopped for calls awaiting a person (approvals, and tools that ask the user a
question, ``RunContext.ask_user``), and the moves of control resolved (``moves``: the first
emitted wins). Every call gets exactly one result, in emission order, kept by the turn's
`Batch` (``results``).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agents.approvals import Interrupted, Pending, PendingApproval, PendingQuestion, UserQuestion
from ..agents.tools import Tool
from ..core.events import ToolResultEvent, ToolStartedEvent
from ..core.exceptions import UsageLimitExceeded
from ..core.usage import CHARS_PER_TOKEN
from .callkey import CallKey
from .context import cut_long
from .moves import Move, take_move
from .plan import AskPerson, CallPlan, Known, Refuse, ReturnAsked, Run, TransferAsked, plan_calls
from .results import Batch
from .steps import Crashed, Finishing, Redirected, Retry, Returned, attempt_tool, recorded_call
from .turn import End, Route, RouteTo

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..core.messages import ToolCall
    from ..tracing import Span
    from .offer import Offer
    from .pieces import Pieces

__all__ = ["Waiting", "run_tools"]


@dataclass(frozen=True, slots=True)
class Waiting:
    """A call that stopped for a person: a question it asked, or what a delegated child
    waits for."""

    pending: list[Pending]


async def run_tools(pieces: Pieces, agent: Agent[Any], calls: Sequence[ToolCall], parent: Span,
                    offer: Offer) -> Route | None:
    """Answer every one of ``agent``'s ``calls``, checked against the turn's ``offer``;
    return the winning route, if any. Raise ``Interrupted`` for the calls awaiting a person.

    However the turn ends (a timeout, a cancellation, an error), the results kept are logged
    in their calls' places (``Batch``).
    """
    batch = Batch(pieces, agent, calls)
    try:
        plan = plan_calls(agent, offer, calls, _known(pieces, offer, calls))
        return await _execute(batch, plan, parent)
    except Interrupted:  # the calls awaiting a person stay open
        batch.push()
        raise
    except BaseException:  # the run ends: its end logs these in their calls' places
        batch.hold()
        raise


def _known(pieces: Pieces, offer: Offer, calls: Sequence[ToolCall]) -> Known:
    """What the plan of this batch depends on besides the offer and the calls."""
    started, asked = pieces.calls.begin_batch(pieces.views.transcript)
    session_id = pieces.log.session.session_id
    caller = pieces.caller() if offer.finish_task else None
    decisions = pieces.state.approvals
    if not started and decisions is None:  # the usual batch
        return Known(session_id, caller)
    steps = pieces.state.steps
    recorded = frozenset(c.id for c in calls
                         if c.id in started and recorded_call(steps, pieces.call_key(c)))
    if decisions is None:
        return Known(session_id, caller, started=started, asked=frozenset(asked),
                     recorded=recorded)
    return Known(session_id, caller, decisions.decided(), decisions.answered_requests(),
                 started, frozenset(asked), recorded)


async def _execute(batch: Batch, plan: CallPlan, parent: Span) -> Route | None:
    """Carry out ``plan``: refusals answered, tools run, a person asked, the first move
    taken."""
    pieces = batch.pieces
    if plan.used:  # a decision holds for one call, once
        decisions = pieces.state.approvals
        assert decisions is not None
        for request in plan.used:
            decisions.take(request)
    runs: list[tuple[int, Run]] = []
    asks: list[AskPerson] = []
    moves: list[tuple[int, Move]] = []
    for i, entry in enumerate(plan.entries):
        match entry:
            case Refuse(text=text):
                batch.answer(i, text, is_error=True)
            case Run():
                runs.append((i, entry))
            case AskPerson():
                asks.append(entry)
            case TransferAsked() | ReturnAsked():
                moves.append((i, entry))
    waiting: list[Pending] = []
    if runs:
        admitted, over_limit = _admit(batch, runs)
        signals, waiting = await _run(batch, admitted, parent)
        moves.extend(signals)
        if len(signals) < len(admitted):
            pieces.transfers.worked()
        if over_limit is not None:  # what ran is logged; the run's end answers the rest
            raise over_limit
    if asks or waiting:
        # Moves stay unanswered too, and are decided when the run resumes; they are not
        # approval requests, so they are not listed as pending.
        batch.push()
        pending = [_pending(pieces, batch.agent, a.call, a.note) for a in asks]
        for p in pending:
            pieces.log.add(p.event(here=True))
        raise Interrupted([*pending, *waiting])
    if not moves:
        batch.push()
        return None
    return await take_move(batch, moves, parent)


def _admit(batch: Batch, runs: list[tuple[int, Run]]
           ) -> tuple[list[tuple[int, Run]], UsageLimitExceeded | None]:
    """Apply rate limits, and reserve ``max_tool_calls`` for the whole batch before any runs.

    Reserving up front keeps the count exact when calls (and the children they start) run
    concurrently; calls past the budget are not started, and the run ends after the others.
    """
    admitted: list[tuple[int, Run]] = []
    for i, run in runs:
        tool = run.tool
        wait = tool.acquire_rate() if tool.rate_limit is not None else 0.0
        if wait:
            limit = tool.rate_limit
            assert limit is not None
            batch.answer(i, f"Rate limit: {tool.name} allows {limit.max_calls} call(s) per "
                            f"{limit.window_s:g} s; it can be called again in {wait:.1f} s.",
                         is_error=True)
        else:
            admitted.append((i, run))
    pieces = batch.pieces
    n, over = pieces.state.budget.admit_tools(len(admitted), pieces.path(batch.agent),
                                              pieces.place.local)
    return admitted[:n], over


async def _run(batch: Batch, runs: list[tuple[int, Run]], parent: Span
               ) -> tuple[list[tuple[int, RouteTo | End]], list[Pending]]:
    """Run the tools of ``runs``: concurrently, except ``sequential`` ones, alone, in order.

    Each result is kept as soon as its call completes; returns the routes tools asked for (a
    typed ``TransferTo`` or ``Finish``), by call index, and what the calls wait for.
    """
    pieces, agent = batch.pieces, batch.agent
    signals: list[tuple[int, RouteTo | End]] = []
    waiting: list[Pending] = []
    persistent = pieces.log.session.persistent
    if not persistent:
        # A memory log is written once a tool may read it (``read_result``, a delegation),
        # not at each turn's end or move: every event before the calls is in it when they run.
        await pieces.flush()

    async def one(i: int, run: Run) -> None:
        call, tool = run.call, run.tool
        pieces.calls.running.add(call.id)
        out = await _call_tool(pieces, agent, tool, call, parent)
        pieces.calls.running.discard(call.id)
        match out:
            case ToolResultEvent():
                batch.keep(i, out)
                if persistent:  # on record the moment the call finishes
                    pieces.log.add(out)
                    pieces.log.logged.add(id(out))
                    # A delegating tool's result is no step's record: it cannot wait.
                    await asyncio.shield(pieces.log.flush(now=tool.delegates))
            case Waiting(pending=pending):
                waiting.extend(pending)
            case _:
                signals.append((i, out))

    for group in _groups(runs):
        if persistent:
            await _started(pieces, agent, group)
        if len(group) == 1:  # the common case
            await one(*group[0])
        else:
            await _together([one(*g) for g in group])
    return signals, waiting


def _groups(runs: list[tuple[int, Run]]) -> list[list[tuple[int, Run]]]:
    """``runs`` in the groups that run at once: a ``sequential`` tool's call alone, the
    calls between two of them together, in call order."""
    groups: list[list[tuple[int, Run]]] = []
    group: list[tuple[int, Run]] = []
    for item in runs:
        if item[1].tool.sequential:
            if group:
                groups.append(group)
            groups.append([item])
            group = []
        else:
            group.append(item)
    if group:
        groups.append(group)
    return groups


async def _started(pieces: Pieces, agent: Agent[Any], group: list[tuple[int, Run]]) -> None:
    """Record that these calls start: a resume must not take them for never run."""
    path = pieces.path(agent)
    for _, run in group:
        pieces.log.add(ToolStartedEvent(agent=agent.name, path=path, tool_call_id=run.call.id,
                                        tool_name=run.tool.name))
    await pieces.flush()


def _pending(pieces: Pieces, agent: Agent[Any], call: ToolCall, note: str) -> PendingApproval:
    return PendingApproval(call_id=call.id, tool_name=call.name, arguments=call.arguments,
                           agent=agent.name, path=pieces.path(agent),
                           session_id=pieces.log.session.session_id, requested_at=time.time(),
                           note=note)


def _question(pieces: Pieces, agent: Agent[Any], key: CallKey,
              asked: UserQuestion) -> PendingQuestion:
    # An id short enough to type (``--answer ID=TEXT``), the same whenever this call asks
    # this question, in any process, and different for every other call in the run tree.
    digest = hashlib.sha256(f"{key.context_key}#{asked.number}".encode()).hexdigest()
    call = key.call
    return PendingQuestion(
        id=f"q_{digest[:10]}", question=asked.question, choices=asked.choices,
        call_id=call.id, tool_name=call.name, arguments=call.arguments, agent=agent.name,
        path=pieces.path(agent), session_id=pieces.log.session.session_id, asked_at=time.time(),
        answered=asked.answered)


async def _together(calls: list[Coroutine[Any, Any, None]]) -> None:
    """Run ``calls`` concurrently until all are done.

    Unlike ``asyncio.gather``, a call that fails leaves no sibling running on its own: the
    others finish (their results are logged) before the first failure is raised, and what is
    still running when this is cancelled is cancelled with it. It is lighter per call, too.
    """
    tasks = [asyncio.ensure_future(c) for c in calls]
    error: Exception | None = None
    try:
        for task in tasks:
            try:
                await task
            except Exception as exc:
                if error is None:
                    error = exc
    finally:
        for task in tasks:
            task.cancel()  # a no-op for the finished ones
    if error is not None:
        raise error


async def _call_tool(
    pieces: Pieces, agent: Agent[Any], tool: Tool, call: ToolCall, parent: Span
) -> ToolResultEvent | RouteTo | End | Waiting:
    """One call of ``tool``: its result, the route it asked for, or what it waits for."""
    state = pieces.state
    span = state.trace.start("tool", tool.name, parent, call_id=call.id, agent=agent.name)
    key = pieces.call_key(call)
    ctx = pieces.context_for(agent, key, span)
    if state.approvals is not None:
        ctx.answers = state.approvals.take_answers(key.request)
    try:
        done = await attempt_tool(state.steps, tool, ctx, key)
    except UserQuestion as asked:  # the call waits for the user's answer
        state.trace.end(span)
        question = _question(pieces, agent, key, asked)
        pieces.log.add(question.event(here=True))
        return Waiting([question])
    except Interrupted as exc:  # a delegated child stopped for a person
        state.trace.end(span)
        return Waiting(exc.pending)
    except UsageLimitExceeded as exc:  # a budget ends this loop; a parent sees an error
        state.trace.end(span, exc)
        raise
    match done:
        case Returned(text=text):
            state.trace.end(span)
            limit = tool.max_result_tokens or agent.max_result_tokens
            if limit is not None and len(text) > limit * CHARS_PER_TOKEN:
                return cut_long(pieces, agent, call, text, limit)
            return pieces.tool_result(agent, call, text)
        case Retry(text=text):
            state.trace.end(span, f"ToolRetry: {text}")
            return pieces.tool_result(agent, call, text, is_error=True)
        case Crashed(text=text, tb=tb):  # reported to the model, not to the caller
            state.trace.end(span, text)
            return pieces.tool_result(agent, call, f"Error: tool {tool.name} failed: {text}",
                                      is_error=True, tb=tb)
        case Redirected(text=target, reason=reason):
            state.trace.end(span)
            return RouteTo(call, target, reason)
        case Finishing(reason=reason, summary=summary, scope=scope):
            state.trace.end(span)
            return End(call, reason, summary, scope)
    raise AssertionError(f"an attempt replayed as {done!r}")  # Again: attempt_tool calls again
