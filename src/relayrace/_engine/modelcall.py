"""The model call of one turn: what the agent is offered, its instructions, the request under
the run's budget, streaming through output guardrails, and the answer logged."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ..agents.handoffs import FINISH_TASK
from ..core.events import StatusEvent, TextDeltaEvent
from ..core.exceptions import ModelBehaviorError, UserError
from ..core.messages import Message
from ..models.interface import (
    Model,
    ModelRequest,
    ModelResponse,
    OutputDelta,
    StatusUpdate,
    ToolDefinition,
)
from .builders import new_message_event, new_request
from .context import request_messages
from .guarding import GuardedStream, cost_block, guard_finish, guard_text
from .state import Toolset, listed_toolset_of
from .steps import model_step
from .structured import Partials, ask, mode_of
from .toolexec import finish_task_definition, tools_off

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..tracing import Span
    from .loop import AgentLoop

__all__ = ["model_of", "model_turn", "turn_flags"]


def model_of(loop: AgentLoop, agent: Agent[Any]) -> Model:
    """The model ``agent`` uses in this run (a run's ``model=`` replaces any agent's but a
    remote one's, whose model is the remote agent itself)."""
    model = agent.model if agent.remote else (loop.state.model_override or agent.model)
    if type(model) is str:
        model = agent.resolved_model()
    if model is None:
        raise UserError(f"Agent {agent.name!r} has no model; give it model=... (a Model or "
                        "a 'provider:model' string) or pass model=... to Runner.run.")
    return model  # type: ignore[return-value]  # a string was resolved above


def turn_flags(loop: AgentLoop, agent: Agent[Any]) -> None:
    """Whether ``agent`` is offered finish_task and refused transfers, this turn."""
    transfers = loop.transfers
    loop.control.offer(agent.mode == "task" and bool(transfers.returns), transfers.used_up())

async def _definitions(loop: AgentLoop, agent: Agent[Any], ts: Toolset
                       ) -> list[ToolDefinition]:
    """The tools offered this turn, when they change by turn (see ``model_turn``)."""
    turn_flags(loop, agent)
    no_handoffs = loop.control.refuse_handoffs or (agent.mode == "single_turn"
                                           and bool(loop.transfers.returns))
    if not (ts.handoffs.dynamic or loop.control.finish_task or no_handoffs or ts.gated):
        return ts.definitions
    off = await tools_off(loop, agent, ts) if ts.gated else set()
    defs = [d for d in ts.definitions if d.name not in ts.handoffs.by_tool and d.name not in off]
    if not no_handoffs:
        defs.extend(await ts.handoffs.offered(loop.context_for(agent)))
    if loop.control.finish_task:
        defs.append(ToolDefinition(
            name=FINISH_TASK, parameters=finish_task_definition(),
            description="Return control, and your result, to the agent that gave you "
                        "this task. Call it when the task is done."))
    return defs

async def model_turn(loop: AgentLoop, agent: Agent[Any], parent: Span) -> Message:
    """One model request of ``agent``: its offer and instructions, the budget, the call
    (streamed through its output guardrails), the answer logged."""
    state = loop.state
    path = loop.path(agent)
    model = model_of(loop, agent)
    if agent.toolsets:  # listed now: a server may have changed its tools since last turn
        loop.place.toolsets[agent.name] = loop.offered(await listed_toolset_of(agent))
    if agent.input_guardrails or agent.output_guardrails or loop.scope.team_output \
            or loop.scope.team_input:
        stop = cost_block(loop, agent)
        if stop is not None:  # the agent answers with the block, no request is made
            message = Message.assistant(stop, name=agent.name)
            loop.push(message)
            loop.log.add(new_message_event(agent.name, path, message))
            if state.emit is not None:
                _emit_text(loop, agent, path, stop)
            return message
    ts = loop.toolset(agent)
    if agent.mode == "chat" and not (loop.transfers.swarm_limit or ts.handoffs.dynamic
                                     or ts.gated):
        # The common case, decided early.
        loop.control.offer(False, False)
        definitions = ts.definitions
    else:
        definitions = await _definitions(loop, agent, ts)
    instructions = agent.instructions
    if not isinstance(instructions, str) or agent._templated:
        instructions = await agent.render_instructions(loop.context_for(agent),
                                                       loop.place.variables)
    if loop.place.suffix:
        suffix = loop.place.suffix
        instructions = f"{instructions}\n\n{suffix}" if instructions else suffix
    name = agent.name
    spec = agent.output
    partials: Partials | None = None
    output = None
    if spec is not None:
        mode = mode_of(spec, model)
        instructions, definitions, output = ask(spec, mode, instructions, definitions)
        if state.emit is not None:
            partials = Partials(loop, agent, path, spec, mode)
    messages = loop.views.view
    if agent.compression is not None or agent.memory is not None:
        messages = await request_messages(loop, agent, instructions, definitions, parent)
    info = loop.log.session.info
    request = new_request(instructions, messages, definitions, agent.model_settings, name, output,
                          info.parent_id or info.session_id)
    budget, local = state.budget, loop.place.local
    estimate = await budget.open_request(request, path, local)
    span = state.trace.start("model", model.name, parent, agent=name)
    guarded = agent.output_guardrails or loop.scope.team_output
    shown: GuardedStream | None = None  # a streamed turn's text, as its guardrails pass it
    try:
        if guarded and state.emit is not None:
            shown = GuardedStream(loop, agent)

        def call() -> Awaitable[ModelResponse]:
            if state.emit is None:
                return model.request(request)
            return _stream_model(loop, model, request, agent, path, shown, partials)

        # A durable run records the answer as a step; any other run just asks.
        steps = state.steps
        response = await (call() if steps is None else model_step(loop, steps, name, call))
    except BaseException as exc:
        budget.close_request(estimate, path, local, None, model.name)
        state.trace.end(span, exc)
        raise
    u = response.usage
    budget.close_request(estimate, path, local, response, model.name)
    attributes = span.attributes
    attributes["input_tokens"] = u.input_tokens
    attributes["output_tokens"] = u.output_tokens
    attributes["response_model"] = response.model
    state.trace.end(span)
    message = response.message
    content, calls = message.content, message.tool_calls
    if not calls:
        # A delegated child's empty answer is reported to its parent as empty.
        if not content and not loop.place.depth:
            raise ModelBehaviorError(
                f"The model of agent {name!r} returned an empty turn (no text and no tool "
                "call); check the model's output limits or its stop sequences.")
        if guarded:
            content = guard_text(loop, agent, content)
    elif loop.control.finish_task and guarded:
        calls = tuple(guard_finish(loop, agent, c) for c in calls)
    if shown is not None and content:
        rest = shown.finish(content, guarded=not calls)
        if rest:
            _emit_text(loop, agent, path, rest)
    if message.name != name or content is not message.content or \
            calls is not message.tool_calls:
        # A copy: the model may hand out shared messages (test doubles, caches).
        message = Message("assistant", content, calls, None, name)
    loop.push(message)
    # Known from the calls themselves, so a stream and a persistent log (written before the tools
    # run) show it too.
    transfers = calls and not loop.control.refuse_handoffs and \
        any(c.name in ts.handoffs.by_tool for c in calls)
    loop.log.add(new_message_event(name, path, message, u, response.model or model.name,
                                   "transfer" if transfers else None))
    if calls and loop.log.session.persistent:
        # Logged before the tools run, so a crash cannot lose the calls. A memory log takes
        # them with their results; a final answer goes with what ends the turn.
        await loop.flush()
    budget.check_tokens()
    return message

def _emit_text(loop: AgentLoop, agent: Agent[Any], path: str, delta: str) -> None:
    """Stream a piece of ``agent``'s text (never logged)."""
    emit = loop.state.emit
    assert emit is not None
    emit(TextDeltaEvent(agent=agent.name, path=path, delta=delta))

async def _stream_model(
    loop: AgentLoop, model: Model, request: ModelRequest, agent: Agent[Any], path: str,
    shown: GuardedStream | None, partials: Partials | None = None,
) -> ModelResponse:
    if shown is not None and not shown.live:
        # A guardrail that may block holds the answer whole: model_turn shows what passes.
        return await model.request(request)
    response: ModelResponse | None = None
    streamed = False
    async for item in model.stream(request):
        if isinstance(item, str):
            streamed = True
            delta = item if shown is None else shown.feed(item)
            if delta:
                _emit_text(loop, agent, path, delta)
                if partials is not None:
                    partials.feed(delta)
        elif isinstance(item, OutputDelta):  # a structured output streamed through its tool
            if partials is not None:
                partials.feed(item.json)
        elif isinstance(item, StatusUpdate):  # a remote agent's progress: shown, not logged
            emit = loop.state.emit
            assert emit is not None
            emit(StatusEvent(agent=agent.name, path=path, state=item.state, text=item.text))
        else:
            response = item
    if response is None:
        raise ModelBehaviorError(f"Model {model.name!r} ended its stream without a response.")
    if not streamed and shown is None and response.message.content:
        # A model that cannot stream text (a guarded turn shows its text as it passes).
        _emit_text(loop, agent, path, response.message.content)
    return response
