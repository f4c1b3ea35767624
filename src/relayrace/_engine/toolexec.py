"""Tool execution for the run loop: one result per call, routing decisions, approvals.

Every tool call of a model turn gets exactly one result, in emission order: ordinary tools run
concurrently (``sequential`` ones alone, in order); handoffs and typed ``TransferTo``/``Finish``
returns compete, and the first emitted wins; calls awaiting approval, and tools that ask the
user a question (``RunContext.ask_user``), stop the run.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import time
import traceback
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agents.approvals import Interrupted, Pending, PendingApproval, PendingQuestion, UserQuestion
from ..agents.handoffs import FINISH_TASK
from ..agents.tools import Tool
from ..core.events import ToolResultEvent, ToolStartedEvent
from ..core.exceptions import UsageLimitExceeded, UserError
from ..core.messages import Message, ToolCall
from ..core.templates import ContextTransformError
from ..core.usage import CHARS_PER_TOKEN
from .callcheck import argument, parse_handoff, refusal
from .callkey import CallKey, request_of
from .context import cut_long
from .guarding import guard_text, input_block
from .pieces import Pieces, outcome_unknown
from .steps import Crashed, Finishing, Redirected, Retry, Returned, attempt_tool, recorded_call
from .turn import End, Return, Route, RouteTo, Transfer

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.handoffs import Handoff
    from ..tracing import Span
    from .offer import Offer

_Asked = tuple["Handoff[Any]", str, Any]
"""A transfer call, parsed: its handoff, reason and input. Its `Transfer` is made once, when
the transfer is confirmed (``_transfer``)."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """A call that stopped for a person: a question it asked, or what a delegated child
    waits for."""

    pending: list[Pending]


async def run_tools(
    pieces: Pieces, agent: Agent[Any], calls: Sequence[ToolCall], parent: Span,
    offer: Offer | None = None,
) -> Route | None:
    """Answer every call, checked against the turn's ``offer`` (by default, what the loop
    offers ``agent`` now); return the winning route, if any. Raise ``Interrupted``.

    Results are kept as each call completes, and logged however the turn ends: a timeout,
    a cancellation or an error never turns a call that ran into one marked "not executed".
    (One coroutine, the guard around the work: it runs at every tool turn and handoff.)
    """
    if offer is None:
        offer = await pieces.offer(agent)
    results: list[ToolResultEvent | None] = [None] * len(calls)
    try:
        ts = offer.toolset
        decisions = pieces.state.approvals
        unknown, asked = pieces.calls.begin_batch(pieces.views.transcript)
        waiting: dict[int, str] = {}  # calls awaiting a decision: what the person must know
        child_waiting: list[Pending] = []  # questions, and what delegated children wait for
        ordinary: list[tuple[int, Tool, ToolCall]] = []
        routes: list[tuple[int, Return | RouteTo | End | _Asked]] = []
        parsed: _Asked | None = None
        off = offer.off
        for i, call in enumerate(calls):
            tool = ts.tools.get(call.name)
            needs_approval = False
            if tool is not None and call.name in off:
                results[i] = pieces.tool_result(
                    agent, call, f"Not performed: the tool {call.name!r} is not available right "
                    "now; continue without it.", is_error=True)
                continue
            if tool is not None:
                needs_approval = tool.requires_approval
                started = unknown.get(call.id) if unknown else None
                if started is not None and recorded_call(pieces.state.steps, pieces.call_key(call)):
                    # A durable run's earlier attempt finished it: its recorded outcome is taken.
                    ordinary.append((i, tool, call))
                    continue
                # A call that stopped for a person after it last started (``asked``) did not end.
                if started is not None and not tool.idempotent and call.id not in asked:
                    if not needs_approval:
                        results[i] = pieces.tool_result(agent, call, outcome_unknown(
                            started, "the run stopped"), is_error=True)
                        continue
                    waiting[i] = outcome_unknown(started, "the run stopped")  # a person decides
                    continue
                if decisions is not None and decisions.answered(
                        request_of(pieces.log.session.session_id, call)):
                    # It runs again with the answers: it was approved (if it had to be) before it
                    # asked. Cut short after an answer, it is unknown above: an answer runs once.
                    ordinary.append((i, tool, call))
                    continue
            elif call.name == FINISH_TASK and offer.finish_task:
                summary = argument(call, "result")  # already guarded when the call was logged
                caller = pieces.caller()
                assert caller is not None  # finish_task is offered while a return is owed
                routes.append((i, Return(call, caller, summary)))
                continue
            elif call.name in ts.handoffs.by_tool and not offer.refuse_handoffs:
                h, reason, error, value = parse_handoff(agent, call, offer)
                if error is not None or h is None:
                    results[i] = pieces.tool_result(agent, call, error or "", is_error=True)
                    continue
                needs_approval = h.requires_approval
                parsed = (h, reason, value)
            else:
                results[i] = pieces.tool_result(
                    agent, call, refusal(agent, call.name, offer), is_error=True)
                continue
            if needs_approval:
                decision = decisions.take(request_of(pieces.log.session.session_id, call)) \
                    if decisions else None
                if decision is None:
                    waiting[i] = ""
                    continue
                if not decision:
                    results[i] = pieces.tool_result(
                        agent, call, "Rejected: a human reviewer declined this call, so it was "
                        "not executed. Continue without it or ask the user.", is_error=True)
                    continue
            if tool is not None:
                ordinary.append((i, tool, call))
            else:
                assert parsed is not None  # a transfer call, parsed above
                routes.append((i, parsed))
        if ordinary:
            admitted, over_limit = _admit(pieces, agent, ordinary, results)
            signals = await _execute(pieces, agent, admitted, parent, results, child_waiting)
            if signals:
                routes.extend(signals)
            if len(signals) < len(admitted):
                pieces.transfers.worked()
            if over_limit is not None:  # what ran is logged; the run's end answers the rest
                raise over_limit
        if waiting or child_waiting:
            # Routes stay unanswered too, and are decided when the run resumes; they are not
            # approval requests, so they are not listed as pending.
            push_results(pieces, results)
            pending = [_pending(pieces, agent, calls[i], waiting[i]) for i in sorted(waiting)]
            for p in pending:
                pieces.log.add(p.event(here=True))
            raise Interrupted([*pending, *child_waiting])
        if not routes:
            push_results(pieces, results)
            return None
        if len(routes) > 1:
            routes.sort(key=lambda r: r[0])
        index, chosen = routes[0]
        for i, other in routes[1:]:
            note = (f"Not performed: only the first routing request of a turn is considered, "
                    f"and this turn's first was: {_describe(chosen)}.")
            if type(other) in (RouteTo, End):  # the tool itself ran; only routing is void
                note = "The tool ran, but its routing was not applied. " + note
            results[i] = pieces.tool_result(agent, calls[i], note, is_error=True)
        if isinstance(chosen, tuple):  # the usual route: a transfer tool's call
            h, reason, value = chosen
            return await _transfer(pieces, agent, calls[index], h.agent, reason, h, value, results,
                                   index, parent)
        return await _take_route(pieces, agent, chosen, results, index, parent)
    except Interrupted:  # the calls awaiting a person stay open
        push_results(pieces, results)
        raise
    except BaseException:  # the run ends: its end logs these in their calls' places
        pieces.hold(results)
        raise


def _admit(
    pieces: Pieces, agent: Agent[Any], items: list[tuple[int, Tool, ToolCall]],
    results: list[ToolResultEvent | None],
) -> tuple[list[tuple[int, Tool, ToolCall]], UsageLimitExceeded | None]:
    """Apply rate limits, and reserve ``max_tool_calls`` for the whole batch before any runs.

    Reserving up front keeps the count exact when calls (and the children they start) run
    concurrently; calls past the budget are not started, and the run ends after the others.
    """
    admitted: list[tuple[int, Tool, ToolCall]] = []
    for i, tool, call in items:
        wait = tool.acquire_rate() if tool.rate_limit is not None else 0.0
        if wait:
            limit = tool.rate_limit
            assert limit is not None
            results[i] = pieces.tool_result(
                agent, call, f"Rate limit: {tool.name} allows {limit.max_calls} call(s) per "
                f"{limit.window_s:g} s; it can be called again in {wait:.1f} s.", is_error=True)
        else:
            admitted.append((i, tool, call))
    n, over = pieces.state.budget.admit_tools(len(admitted), pieces.path(agent), pieces.place.local)
    return admitted[:n], over


async def _take_route(
    pieces: Pieces, agent: Agent[Any], route: Return | RouteTo | End,
    results: list[ToolResultEvent | None], index: int, parent: Span,
) -> Route | None:
    """Carry out the turn's winning route (other than a transfer tool's, ``_transfer``) as far
    as the turn goes: answer its call; a typed ``TransferTo`` outside a team is checked as a
    transfer. The route returned is what the loop carries out (``None``: control stays)."""
    call = route.call
    match route:
        case RouteTo(name=name, reason=reason) if not pieces.scope.team_mode:
            # A typed TransferTo outside a team is a transfer by name, under the same limits.
            found = agent.find_agent(name)
            if found is None:
                results[index] = pieces.tool_result(
                    agent, call, f"The tool ran, but its TransferTo names no agent {name!r} "
                    "in this team; control stays here.", is_error=True)
                push_results(pieces, results)
                return None
            return await _transfer(pieces, agent, call, found, reason, None, None, results,
                                   index, parent)
        case Return(target=target):
            results[index] = pieces.tool_result(
                agent, call, f"Returned to {target.name} with the result.")
        case RouteTo(name=name, reason=reason):
            text = f"Routing to {name} after this turn."
            results[index] = pieces.tool_result(agent, call, text + (
                f" Reason: {reason}" if reason else ""))
        case End(reason=reason, summary=summary, scope=scope):
            if summary:
                route = End(call, reason, guard_text(pieces, agent, summary), scope)
            ending = "Leaving the loop" if scope == "loop" else "Finishing the run"
            results[index] = pieces.tool_result(agent, call, f"{ending}: {reason}")
    push_results(pieces, results)
    return route


async def _transfer(
    pieces: Pieces, agent: Agent[Any], call: ToolCall, target: Agent[Any], reason: str,
    h: Handoff[Any] | None, value: Any, results: list[ToolResultEvent | None], index: int,
    parent: Span,
) -> Transfer | None:
    """A transfer to ``target`` that ``call`` asked for (through ``h``, with ``reason`` and the
    validated input ``value``; no ``h``: a typed ``TransferTo``), checked: confirmed (its call
    answered, the target's view made; the one `Transfer` made for it), or refused (answered
    why; a limit that ends the run raises after)."""
    refusal, error = pieces.transfers.check(agent.name, target.name)
    context = None
    if refusal is None and h is not None and h.context_transform is not None:
        try:
            context = h.context(reason, value)
        except ContextTransformError as exc:  # the model's arguments: it can retry
            refusal = (f"{str(exc).rstrip('.')}. Call the transfer again with "
                       "arguments its context transform can use.")
    view = None
    if refusal is None:
        text = f"Transferred from {agent.name} to {target.name}."
        if context is not None:  # the handoff's context_transform replaces the reason
            text += f" Context: {json.dumps(context, ensure_ascii=False)}"
        else:
            if reason:
                text += f" Reason: {reason}"
            if h is not None and h.input_type is not None:
                data = h.input_data(value)
                text += f" Input: {json.dumps(data, ensure_ascii=False)}"
        # The target checks this turn's results, its transfer note included, in log order.
        results[index] = pieces.tool_result(agent, call, text)
        if target.input_guardrails or pieces.scope.team_input:  # else nothing to check
            blocked = input_block(pieces, target,
                                  [ev.message for ev in results if ev is not None])
            if blocked is not None:  # the run ends with the guardrail's answer
                pieces.control.block(blocked)
                refusal = f"{target.name}'s input guardrail blocked the request."
    if refusal is None and h is not None:
        if h.input_filter is not None:
            view = await _filter_view(pieces, agent, call, target, h, results, index)
        if h.on_handoff is None:  # no hook to run: its span alone, if spans are recorded
            trace = pieces.state.trace
            if trace.processors:
                trace.end(_handoff_span(pieces, agent, target, reason, parent))
        else:
            failure = await _on_handoff(pieces, agent, call, h, reason, value, parent)
            if failure is not None:
                results[index] = pieces.tool_result(
                    agent, call, f"Not performed: the transfer to {target.name} failed "
                    f"({failure[0]}).", is_error=True, tb=failure[1])
                push_results(pieces, results)
                return None
    if refusal is not None:
        # A typed TransferTo (no handoff) ran: only its routing is refused.
        prefix = "The tool ran, but routing was refused" if h is None else "Not performed"
        results[index] = pieces.tool_result(agent, call, f"{prefix}: {refusal}",
                                            is_error=True)
        push_results(pieces, results)
        if error is not None:
            await pieces.flush()
            raise error  # the session is complete and valid here
        return None
    pieces.transfers.made()
    note = results[index].message  # type: ignore[union-attr]
    push_results(pieces, results)
    return Transfer(call, target, reason, h, value, view, note, context)


def push_results(pieces: Pieces, results: list[ToolResultEvent | None]) -> None:
    """Add the results gathered so far to the conversation, in call order; each once.

    A result recorded when its call finished (persistent logs) is not recorded again.
    """
    push, add, logged = pieces.views.push, pieces.log.add, pieces.log.logged
    for i, ev in enumerate(results):
        if ev is not None:
            push(ev.message)
            if logged and id(ev) in logged:
                logged.discard(id(ev))
            else:
                add(ev)
            results[i] = None


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


async def _filter_view(pieces: Pieces, agent: Agent[Any], call: ToolCall, target: Agent[Any],
                       h: Handoff[Any], results: list[ToolResultEvent | None],
                       index: int) -> list[Message]:
    """The view ``target`` sees through the input filter of ``h``, the handoff ``call`` takes.

    Made before the transfer is confirmed: a filter that fails ends the run with the call
    answered "not performed", so the session stays with ``agent``, valid, as before the call.
    """
    note = results[index].message  # type: ignore[union-attr]
    try:
        return await pieces.filtered_view(
            target, h, note, [ev.message for ev in results if ev is not None])
    except UserError as exc:
        results[index] = pieces.tool_result(
            agent, call, f"Not performed: the transfer to {target.name} failed "
            f"({exc})", is_error=True, tb="".join(traceback.format_exception(exc)))
        push_results(pieces, results)
        raise


def _handoff_span(pieces: Pieces, agent: Agent[Any], target: Agent[Any], reason: str,
                  parent: Span) -> Span:
    """The span of a transfer's handoff (its hook runs in it, if it has one)."""
    return pieces.state.trace.start("handoff", f"{agent.name} -> {target.name}", parent,
                                    from_agent=agent.name, to_agent=target.name, reason=reason)


async def _on_handoff(
    pieces: Pieces, agent: Agent[Any], call: ToolCall, h: Handoff[Any], reason: str, value: Any,
    parent: Span,
) -> tuple[str, str] | None:
    """Run the handoff's hook in its span (given the validated input ``value`` if ``h`` has
    an ``input_type``, else the reason); a hook that raises stops the transfer like a
    crashing tool."""
    assert h.on_handoff is not None
    span = _handoff_span(pieces, agent, h.agent, reason, parent)
    try:
        result = h.on_handoff(pieces.context_for(agent, pieces.call_key(call)),
                              reason if h.input_type is None else value)
        if inspect.isawaitable(result):
            await result
    except Exception as exc:
        pieces.state.trace.end(span, exc)
        return f"{type(exc).__name__}: {exc}", traceback.format_exc()
    except BaseException as exc:
        pieces.state.trace.end(span, exc)
        raise
    pieces.state.trace.end(span)
    return None


async def _execute(
    pieces: Pieces, agent: Agent[Any], calls: list[tuple[int, Tool, ToolCall]],
    parent: Span, results: list[ToolResultEvent | None], child_waiting: list[Pending],
) -> list[tuple[int, RouteTo | End]]:
    """Run ordinary tools: concurrently, except ``sequential`` ones, alone, in order.

    Each result lands in ``results`` as soon as its call completes; the routes tools asked
    for (a typed ``TransferTo`` or ``Finish``) are returned, by call index.
    """
    signals: list[tuple[int, RouteTo | End]] = []
    persistent = pieces.log.session.persistent
    if not persistent:
        # A memory log is written once a tool may read it (``read_result``, a delegation),
        # not at each turn's end or move: every event before the calls is in it when they run.
        await pieces.flush()

    async def one(i: int, tool: Tool, call: ToolCall) -> None:
        pieces.calls.running.add(call.id)
        out = await _call_tool(pieces, agent, tool, call, parent)
        pieces.calls.running.discard(call.id)
        match out:
            case ToolResultEvent():
                results[i] = out
                if persistent:  # on record the moment the call finishes
                    pieces.log.add(out)
                    pieces.log.logged.add(id(out))
                    # A delegating tool's result is no step's record: it cannot wait.
                    await asyncio.shield(pieces.log.flush(now=tool.delegates))
            case Waiting(pending=pending):
                child_waiting.extend(pending)
            case _:
                signals.append((i, out))

    async def start(items: list[tuple[int, Tool, ToolCall]]) -> None:
        """Record that these calls start: a resume must not take them for never run."""
        path = pieces.path(agent)
        for _, tool, call in items:
            pieces.log.add(ToolStartedEvent(agent=agent.name, path=path, tool_call_id=call.id,
                                          tool_name=tool.name))
        await pieces.flush()

    if len(calls) == 1:  # the common case
        if persistent:
            await start(calls)
        await one(*calls[0])
        return signals
    group: list[tuple[int, Tool, ToolCall]] = []
    for item in [*calls, None]:
        if item is None or item[1].sequential:
            if group and persistent:
                await start(group)
            if len(group) == 1:
                await one(*group[0])
            elif group:
                await _together([one(*g) for g in group])
            group = []
            if item is not None:
                if persistent:
                    await start([item])
                await one(*item)
        else:
            group.append(item)
    return signals


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


def _describe(route: Return | RouteTo | End | _Asked) -> str:
    match route:
        case End():
            return "finish the run"
        case Return(target=target):
            return f"return to {target.name}"
        case RouteTo(name=name):
            return f"transfer to {name}"
        case (h, _, _):
            return f"transfer to {h.agent.name}"


__all__ = ["Route", "Waiting", "push_results", "run_tools"]
