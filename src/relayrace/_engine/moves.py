"""The moves of control a turn's calls ask for, resolved: the first emitted wins.

A move is a transfer tool's call or a task's ``finish_task`` (both from the plan,
``plan.TransferAsked`` and ``plan.ReturnAsked``) or a tool's typed ``TransferTo``/``Finish``
(`RouteTo`, `End`, from its result). `first_move` picks the winner and says what each other
move is answered; `take_move` carries the winner out as far as the turn goes (a transfer is
checked, its target's view made) and returns the route the loop follows (``None``: control
stays).
"""

from __future__ import annotations

import inspect
import json
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.events import HandoffEvent
from ..core.exceptions import UserError
from ..core.templates import ContextTransformError
from .guarding import guard_text, input_block
from .plan import ReturnAsked, TransferAsked
from .turn import End, Return, Route, RouteTo, Transfer

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.handoffs import Handoff
    from ..core.events import ToolResultEvent
    from ..core.messages import Message
    from ..tracing import Span
    from .pieces import Pieces
    from .results import Batch

__all__ = ["Move", "first_move", "log_move", "take_move"]

Move = TransferAsked | ReturnAsked | RouteTo | End
"""A call's request to move control."""


def first_move(moves: Sequence[tuple[int, Move]]) -> tuple[int, Move, list[tuple[int, str]]]:
    """The first emitted of ``moves`` (by call index), and what each other one is answered."""
    index, chosen = min(moves, key=lambda m: m[0]) if len(moves) > 1 else moves[0]
    notes: list[tuple[int, str]] = []
    for i, other in moves:
        if i == index:
            continue
        note = (f"Not performed: only the first routing request of a turn is considered, and "
                f"this turn's first was: {_describe(chosen)}.")
        if type(other) in (RouteTo, End):  # the tool itself ran; only routing is void
            note = "The tool ran, but its routing was not applied. " + note
        notes.append((i, note))
    return index, chosen, sorted(notes)


async def take_move(batch: Batch, moves: Sequence[tuple[int, Move]],
                    parent: Span) -> Route | None:
    """Carry out the first of ``moves``, answering the others; push the batch's results."""
    index, chosen, notes = first_move(moves)
    for i, note in notes:
        batch.answer(i, note, is_error=True)
    match chosen:
        case TransferAsked(handoff=h, reason=reason, value=value):
            return await _transfer(batch, index, h.agent, reason, h, value, parent)
        case RouteTo(name=name, reason=reason) if not batch.pieces.scope.team_mode:
            # A typed TransferTo outside a team is a transfer by name, under the same limits.
            found = batch.agent.find_agent(name)
            if found is not None:
                return await _transfer(batch, index, found, reason, None, None, parent)
            batch.answer(index, f"The tool ran, but its TransferTo names no agent {name!r} "
                                "in this team; control stays here.", is_error=True)
            route: Route | None = None
        case ReturnAsked(call=call, target=target, summary=summary):
            batch.answer(index, f"Returned to {target.name} with the result.")
            route = Return(call, target, summary)
        case RouteTo(reason=reason):
            batch.answer(index, f"Routing to {chosen.name} after this turn." + (
                f" Reason: {reason}" if reason else ""))
            route = chosen
        case End(call=call, reason=reason, summary=summary, scope=scope):
            route = End(call, reason, guard_text(batch.pieces, batch.agent, summary), scope) \
                if summary else chosen
            ending = "Leaving the loop" if scope == "loop" else "Finishing the run"
            batch.answer(index, f"{ending}: {reason}")
    batch.push()
    return route


async def _transfer(batch: Batch, index: int, target: Agent[Any], reason: str,
                    h: Handoff[Any] | None, value: Any, parent: Span) -> Transfer | None:
    """A transfer to ``target`` that the call at ``index`` asked for (through ``h``, with
    ``reason`` and the validated input ``value``; no ``h``: a typed ``TransferTo``), checked:
    confirmed (its call answered, the target's view made; the one `Transfer` made for it), or
    refused (answered why; a limit that ends the run raises after)."""
    pieces, agent = batch.pieces, batch.agent
    refused, error = pieces.transfers.check(agent.name, target.name)
    context = None
    if refused is None and h is not None and h.context_transform is not None:
        try:
            context = h.context(reason, value)
        except ContextTransformError as exc:  # the model's arguments: it can retry
            refused = (f"{str(exc).rstrip('.')}. Call the transfer again with arguments its "
                       "context transform can use.")
    view = None
    note: ToolResultEvent | None = None
    if refused is None:
        # The target checks this turn's results, its transfer note included, in log order.
        note = batch.answer(index, _note(agent, target, reason, h, value, context))
        refused = _blocked(batch, target)
    if refused is None and h is not None:
        if h.input_filter is not None:
            assert note is not None
            view = await _filter_view(batch, index, target, h, note.message)
        failure = await _on_handoff(batch, index, h, target, reason, value, parent)
        if failure is not None:
            batch.answer(index, f"Not performed: the transfer to {target.name} failed "
                                f"({failure[0]}).", is_error=True, tb=failure[1])
            batch.push()
            return None
    if refused is not None:
        # A typed TransferTo (no handoff) ran: only its routing is refused.
        prefix = "The tool ran, but routing was refused" if h is None else "Not performed"
        batch.answer(index, f"{prefix}: {refused}", is_error=True)
        batch.push()
        if error is not None:
            await pieces.flush()
            raise error  # the session is complete and valid here
        return None
    assert note is not None
    pieces.transfers.made()
    batch.push()
    return Transfer(batch.calls[index], target, reason, h, value, view, note.message,
                    context)


def _note(agent: Agent[Any], target: Agent[Any], reason: str, h: Handoff[Any] | None,
          value: Any, context: dict[str, Any] | None) -> str:
    """The result of a confirmed transfer's call: what the target is told of it."""
    text = f"Transferred from {agent.name} to {target.name}."
    if context is not None:  # the handoff's context_transform replaces the reason
        return f"{text} Context: {json.dumps(context, ensure_ascii=False)}"
    if reason:
        text += f" Reason: {reason}"
    if h is not None and h.input_type is not None:
        text += f" Input: {json.dumps(h.input_data(value), ensure_ascii=False)}"
    return text


def _blocked(batch: Batch, target: Agent[Any]) -> str | None:
    """Why the transfer is refused if ``target``'s input guardrails block what it would see
    (the run then ends with the guardrail's answer); ``None`` if they pass."""
    pieces = batch.pieces
    if not (target.input_guardrails or pieces.scope.team_input):  # nothing to check
        return None
    blocked = input_block(pieces, target, batch.messages())
    if blocked is None:
        return None
    pieces.control.block(blocked)
    return f"{target.name}'s input guardrail blocked the request."


async def _filter_view(batch: Batch, index: int, target: Agent[Any], h: Handoff[Any],
                       note: Message) -> list[Message]:
    """The view ``target`` sees through the input filter of ``h``, the handoff taken.

    Made before the transfer is confirmed: a filter that fails ends the run with the call
    answered "not performed", so the session stays with the agent, valid, as before the call.
    """
    try:
        return await batch.pieces.filtered_view(target, h, note, batch.messages())
    except UserError as exc:
        batch.answer(index, f"Not performed: the transfer to {target.name} failed ({exc})",
                     is_error=True, tb="".join(traceback.format_exception(exc)))
        batch.push()
        raise


async def _on_handoff(batch: Batch, index: int, h: Handoff[Any], target: Agent[Any],
                      reason: str, value: Any, parent: Span) -> tuple[str, str] | None:
    """The transfer's span, with the handoff's hook run in it if it has one (given the
    validated input ``value`` if ``h`` has an ``input_type``, else the reason); a hook that
    raises stops the transfer like a crashing tool: (what it raised, its traceback)."""
    pieces, agent = batch.pieces, batch.agent
    trace = pieces.state.trace
    span = trace.start("handoff", f"{agent.name} -> {target.name}", parent,
                       from_agent=agent.name, to_agent=target.name, reason=reason)
    if h.on_handoff is not None:
        key = pieces.call_key(batch.calls[index])
        try:
            result = h.on_handoff(pieces.context_for(agent, key),
                                  reason if h.input_type is None else value)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            trace.end(span, exc)
            return f"{type(exc).__name__}: {exc}", traceback.format_exc()
        except BaseException as exc:
            trace.end(span, exc)
            raise
    trace.end(span)
    return None


def _describe(move: Move) -> str:
    match move:
        case End():
            return "finish the run"
        case ReturnAsked(target=target):
            return f"return to {target.name}"
        case RouteTo(name=name):
            return f"transfer to {name}"
        case TransferAsked(handoff=h):
            return f"transfer to {h.agent.name}"


def log_move(pieces: Pieces, agent: Agent[Any], route: Transfer | Return) -> Transfer | None:
    """Log a transfer or a task's return that ``agent``'s turn confirmed (the call's
    result is logged already); returns the transfer, if it is one."""
    match route:
        case Return(target=target, summary=summary):
            pieces.returned(agent, target, summary)
            return None
        case Transfer(target=target, handoff=h):
            # A task, single-turn or workflow target gives control back when it is done.
            returns_to = agent.name if target.mode in ("task", "single_turn") \
                or target.is_composite else None
            if returns_to:
                pieces.transfers.returns.append(returns_to)
            event = HandoffEvent(
                agent=agent.name, path=pieces.path(agent), to_agent=target.name,
                reason=route.reason or f"requested by {agent.name}",
                tool_call_id=route.call.id, returns_to=returns_to)
            if h is not None and h.input_type is not None:
                event.input = h.input_data(route.input)
            event.context = route.context
            pieces.log.add(event)
            return route
