"""The model call of one turn: what the agent is offered, its instructions, the request under
the run's budget, streaming through output guardrails, and the answer logged."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from ..core.events import MessageEvent, StatusEvent, TextDeltaEvent
from ..core.exceptions import ModelBehaviorError
from ..core.messages import Message, ToolCall
from ..models.interface import (
    Model,
    ModelRequest,
    ModelResponse,
    OutputDelta,
    StatusUpdate,
)
from .context import request_messages
from .guarding import GuardedStream, cost_block, guard_finish, guard_text
from .state import model_of
from .steps import model_step
from .structured import Partials, prompted
from .textcalls import HeldText, Written, held_text, written_calls

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..tracing import Span
    from .offer import Offer
    from .pieces import Pieces

__all__ = ["model_turn"]


async def model_turn(pieces: Pieces, agent: Agent[Any], offer: Offer, parent: Span
                     ) -> Message | None:
    """One model request of ``agent``: this turn's ``offer`` and its instructions, the budget,
    the call (streamed through its output guardrails), the answer logged. ``None`` when the
    answer was tool calls written as text and the model was told to call them instead
    (``textcalls``): the turn asks again."""
    scope = pieces.scope
    if agent.input_guardrails or agent.output_guardrails or scope.team_output or \
            scope.team_input:
        stop = cost_block(pieces, agent)
        if stop is not None:  # the agent answers with the block, no request is made
            path = pieces.path(agent)
            message = Message.assistant(stop, name=agent.name)
            pieces.push(message)
            pieces.log.add(MessageEvent(agent=agent.name, path=path, message=message))
            if pieces.state.emit is not None:
                _emit_text(pieces, agent, path, stop)
            return message
    model = model_of(agent, pieces.state.model_override)
    request = await _request(pieces, agent, offer, parent)
    guarded = bool(agent.output_guardrails or scope.team_output)
    streamed = _streamed(pieces, agent, model, offer, guarded)
    answer = await _answer(pieces, agent, model, offer, request, streamed, parent)
    return await _record(pieces, agent, offer, answer, guarded, streamed)


@dataclass(frozen=True, slots=True)
class _Streamed:
    """What a streamed turn shows of its answer as it comes."""

    shown: GuardedStream | None
    """The text, as its output guardrails pass it."""
    held: HeldText | None
    """The text held back while it may be tool calls written as text."""
    partials: Partials | None
    """A structured answer's value so far."""


_NOT_STREAMED = _Streamed(None, None, None)


def _streamed(pieces: Pieces, agent: Agent[Any], model: Model, offer: Offer,
              guarded: bool) -> _Streamed:
    """What ``agent``'s turn shows as the model streams (nothing unless the run streams)."""
    emit = pieces.state.emit
    if emit is None:
        return _NOT_STREAMED
    spec, mode = agent.output, offer.output_mode
    return _Streamed(GuardedStream(pieces, agent) if guarded else None,
                     held_text(agent, model, offer),
                     Partials(emit, agent, pieces.path(agent), spec, mode)
                     if spec is not None and mode is not None else None)


async def _request(pieces: Pieces, agent: Agent[Any], offer: Offer, parent: Span
                   ) -> ModelRequest:
    """The request of ``agent``'s turn: its instructions (rendered, with the loop's suffix
    and a prompted output's schema), what it sees of the conversation, the offer's tools."""
    instructions = agent.instructions
    if not isinstance(instructions, str) or agent._templated:
        variables, given = pieces.place.variables, pieces.transfers.given
        if given is not None and given[0] == agent.name:  # a swarm member's transform
            variables = {**(variables or {}), **given[1]}
        instructions = await agent.render_instructions(pieces.context_for(agent), variables)
    suffix = pieces.place.suffix
    if suffix:
        instructions = f"{instructions}\n\n{suffix}" if instructions else suffix
    spec = agent.output
    if spec is not None and offer.output_mode == "prompted":
        instructions = prompted(spec, instructions)
    messages = pieces.views.view
    if agent.compression is not None or agent.memory is not None:
        messages = await request_messages(pieces, agent, instructions, offer.definitions,
                                          parent)
    info = pieces.log.session.info
    return ModelRequest(instructions=instructions, messages=messages, tools=offer.definitions,
                        settings=agent.model_settings, agent=agent.name, output=offer.output,
                        conversation=info.parent_id or info.session_id)


@dataclass(frozen=True, slots=True)
class _Answer:
    """What the model answered: its response, and the text and calls the turn takes from it
    (``written``: the answer was calls written as text)."""

    response: ModelResponse
    model: str
    """The name of the model asked."""
    content: str
    calls: tuple[ToolCall, ...]
    written: Written | None


async def _answer(pieces: Pieces, agent: Agent[Any], model: Model, offer: Offer,
                  request: ModelRequest, streamed: _Streamed, parent: Span) -> _Answer:
    """``request`` asked under the run's budget, in its span: streamed when the run streams, a
    step when the run is durable."""
    state, path = pieces.state, pieces.path(agent)
    budget, local = state.budget, pieces.place.local
    gate = budget.gate
    estimate = None if gate is None else await gate.admit(request, budget.usage.total)
    budget.open_request(path, local)
    span = state.trace.start("model", model.name, parent, agent=agent.name)
    try:
        emit, steps = state.emit, state.steps
        if emit is None and steps is None:  # the usual turn: just ask
            response = await model.request(request)
        else:  # streamed, or a durable run's step that records the answer
            call: Callable[[], Awaitable[ModelResponse]] = partial(model.request, request) \
                if emit is None else \
                partial(_stream_model, pieces, model, request, agent, path, streamed)
            response = await (call() if steps is None else model_step(
                steps, pieces.log.session.session_id, len(pieces.views.transcript), agent.name,
                call))
    except BaseException as exc:
        budget.close_request(estimate, path, local, None, model.name)
        state.trace.end(span, exc)
        raise
    budget.close_request(estimate, path, local, response, model.name)
    content, calls = response.message.content, response.message.tool_calls
    written: Written | None = None
    if not calls and content:
        try:
            written = written_calls(pieces, agent, model, offer, content)
        except ModelBehaviorError as exc:
            state.trace.end(span, exc)
            raise
        if written is not None and written.calls:  # parsed: they run as the model's calls
            calls, content = written.calls, ""
    _traced(span, response, written)
    state.trace.end(span)
    return _Answer(response, model.name, content, calls, written)


def _traced(span: Span, response: ModelResponse, written: Written | None) -> None:
    """What the model span records of the answer."""
    attributes = span.attributes
    attributes["input_tokens"] = response.usage.input_tokens
    attributes["output_tokens"] = response.usage.output_tokens
    attributes["response_model"] = response.model
    if written is not None:
        attributes["text_tool_calls"] = "parsed" if written.calls else "reasked"
        attributes["text_tool_names"] = list(written.names)


async def _record(pieces: Pieces, agent: Agent[Any], offer: Offer, answer: _Answer,
                  guarded: bool, streamed: _Streamed) -> Message | None:
    """The answer through ``agent``'s output guardrails, the rest of a stream shown, and the
    message added to the conversation and logged (``None``: the model was asked again)."""
    response, content, calls, written = answer.response, answer.content, answer.calls, \
        answer.written
    name, path = agent.name, pieces.path(agent)
    if not calls:
        # A delegated child's empty answer is reported to its parent as empty.
        if not content and not pieces.place.depth:
            raise ModelBehaviorError(
                f"The model of agent {name!r} returned an empty turn (no text and no tool "
                "call); check the model's output limits or its stop sequences.")
        if guarded and written is None:  # calls written as text are no answer to guard
            content = guard_text(pieces, agent, content)
    elif offer.finish_task and guarded:
        calls = tuple(guard_finish(pieces, agent, c) for c in calls)
    if written is None:  # calls written as text are never shown
        _show_rest(pieces, agent, path, streamed, content, calls)
    message = response.message
    if message.name != name or content is not message.content or \
            calls is not message.tool_calls:
        # A copy: the model may hand out shared messages (test doubles, caches).
        message = Message("assistant", content, calls, None, name)
    pieces.views.push(message)
    pieces.log.add(MessageEvent(
        agent=name, path=path, message=message, usage=response.usage,
        model=response.model or answer.model,
        finish_reason=_finish_reason(offer, calls),
        parsed_from_text=written.text if written and calls else None))
    if written is not None and not calls:  # asked again: the next answer is the turn's
        pieces.note(agent, written.reask)
        await pieces.flush()
        return None
    if calls and pieces.log.session.persistent:
        # Logged before the tools run, so a crash cannot lose the calls. A memory log takes
        # them before the tools run; a final answer goes with what ends the turn.
        await pieces.flush()
    budget = pieces.state.budget
    if budget.limits is not None:  # a token budget to check
        budget.check_tokens()
    return message


def _show_rest(pieces: Pieces, agent: Agent[Any], path: str, streamed: _Streamed,
               content: str, calls: tuple[ToolCall, ...]) -> None:
    """What a streamed answer still has to show once it is complete."""
    shown, held = streamed.shown, streamed.held
    if shown is not None and content:
        rest = shown.finish(content, guarded=not calls)
        if rest:
            _emit_text(pieces, agent, path, rest)
    elif held is not None and held.held:  # no calls after all: shown
        _emit_text(pieces, agent, path, held.held)
        if streamed.partials is not None:
            streamed.partials.feed(held.held)


def _finish_reason(offer: Offer, calls: tuple[ToolCall, ...]) -> Literal["transfer"] | None:
    """``"transfer"`` when the answer calls a transfer tool: known from the calls themselves,
    so a stream and a persistent log (written before the tools run) show it too."""
    if calls and not offer.refuse_handoffs:
        by_tool = offer.toolset.handoffs.by_tool
        if any(c.name in by_tool for c in calls):
            return "transfer"
    return None


def _emit_text(pieces: Pieces, agent: Agent[Any], path: str, delta: str) -> None:
    """Stream a piece of ``agent``'s text (never logged)."""
    emit = pieces.state.emit
    assert emit is not None
    emit(TextDeltaEvent(agent=agent.name, path=path, delta=delta))

async def _stream_model(
    pieces: Pieces, model: Model, request: ModelRequest, agent: Agent[Any], path: str,
    streamed: _Streamed,
) -> ModelResponse:
    shown, held, partials = streamed.shown, streamed.held, streamed.partials
    if shown is not None and not shown.live:
        # A guardrail that may block holds the answer whole: model_turn shows what passes.
        return await model.request(request)
    response: ModelResponse | None = None
    any_text = False
    async for item in model.stream(request):
        if isinstance(item, str):
            any_text = True
            if held is not None:
                item = held.feed(item)
            delta = item if shown is None or not item else shown.feed(item)
            if delta:
                _emit_text(pieces, agent, path, delta)
                if partials is not None:
                    partials.feed(delta)
        elif isinstance(item, OutputDelta):  # a structured output streamed through its tool
            if partials is not None:
                partials.feed(item.json)
        elif isinstance(item, StatusUpdate):  # a remote agent's progress: shown, not logged
            emit = pieces.state.emit
            assert emit is not None
            emit(StatusEvent(agent=agent.name, path=path, state=item.state, text=item.text))
        else:
            response = item
    if response is None:
        raise ModelBehaviorError(f"Model {model.name!r} ended its stream without a response.")
    if not any_text and shown is None and response.message.content:
        # A model that cannot stream text (a guarded turn shows its text as it passes).
        text = response.message.content
        text = text if held is None else held.feed(text)
        if text:
            _emit_text(pieces, agent, path, text)
    return response
