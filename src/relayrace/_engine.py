"""The run loop: model turns, tool execution, same-session handoffs, all logged as events.

One `AgentLoop` drives one session. A delegated child gets its own loop and session but shares
the `RunState` (context, usage, limits, trace, stream) of the run that started it.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .agent import Agent
from .context import RunContext
from .events import (
    AgentEvent,
    HandoffEvent,
    MessageEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextDeltaEvent,
    ToolResultEvent,
)
from .exceptions import (
    HandoffLoopError,
    MaxHandoffsExceeded,
    MaxTurnsExceeded,
    ModelBehaviorError,
    UsageLimitExceeded,
    UserError,
)
from .handoffs import SINGLE_TOOL_NAME, HandoffTool
from .messages import Message, ToolCall
from .models import infer_model
from .models.interface import Model, ModelRequest, ModelResponse, ToolDefinition
from .sessions.base import Session
from .tools import Tool, ToolRetry, render_tool_output
from .tracing import Span, Trace
from .usage import RunUsage, Usage, UsageLimits

DEFAULT_MAX_TURNS = 25

Emit = Callable[[AgentEvent], None]


class RunState:
    """What a run shares with every child it delegates to."""

    __slots__ = ("agent_calls", "context", "emit", "limits", "model_override", "trace", "usage")

    def __init__(
        self,
        *,
        context: Any,
        trace: Trace,
        limits: UsageLimits | None = None,
        emit: Emit | None = None,
        model_override: Model | None = None,
    ) -> None:
        self.context = context
        self.trace = trace
        self.usage = RunUsage()
        self.limits = limits
        self.emit = emit
        self.model_override = model_override
        self.agent_calls = 0
        """Delegated child runs started so far (for ``UsageLimits.max_agent_calls``)."""


@dataclass(slots=True)
class LoopOutcome:
    """How one loop ended."""

    final_output: str
    last_agent: Agent[Any]
    new_events: list[AgentEvent]


def history(events: Sequence[AgentEvent]) -> list[Message]:
    """The conversation held in a session log."""
    return [e.message for e in events if isinstance(e, MessageEvent | ToolResultEvent)]


def active_agent_name(events: Sequence[AgentEvent]) -> str | None:
    """The agent that held the conversation when the log ends."""
    for e in reversed(events):
        if isinstance(e, HandoffEvent):
            return e.to_agent
        if isinstance(e, RunStartedEvent):
            return e.agent
    return None


def unanswered_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet."""
    answered: set[str] = set()
    for m in reversed(messages):
        if m.role == "tool" and m.tool_call_id is not None:
            answered.add(m.tool_call_id)
        elif m.role == "assistant":
            return [c for c in m.tool_calls if c.id not in answered]
        else:
            return []
    return []


class _Toolset:
    """The tools one agent is offered, by name."""

    __slots__ = ("definitions", "handoffs", "tools")

    def __init__(self, agent: Agent[Any]) -> None:
        self.tools: dict[str, Tool] = {t.name: t for t in agent.tools}
        hs = agent.handoff_set()
        self.handoffs = hs
        self.definitions: list[ToolDefinition] = [t.definition for t in agent.tools]
        self.definitions.extend(hs.definitions)


class AgentLoop:
    """Drives one session until an agent answers without calling tools."""

    def __init__(
        self,
        state: RunState,
        entry: Agent[Any],
        session: Session,
        *,
        path_prefix: str = "",
        parent_span: Span | None = None,
        max_turns: int | None = None,
        max_handoffs: int | None = None,
        depth: int = 0,
        instructions_suffix: str = "",
        variables: dict[str, Any] | None = None,
    ) -> None:
        self.state = state
        self.depth = depth
        self.suffix = instructions_suffix
        self.variables = variables
        self.entry = entry
        self.session = session
        self.prefix = path_prefix
        self.parent_span = parent_span
        self.max_turns = max_turns or entry.max_turns or DEFAULT_MAX_TURNS
        self.max_handoffs = max_handoffs
        self.transcript: list[Message] = []
        self.view: list[Message] = self.transcript  # what the active agent's model sees
        self.new_events: list[AgentEvent] = []
        self._batch: list[AgentEvent] = []
        self._toolsets: dict[str, _Toolset] = {}
        self._paths: dict[str, str] = {}
        self.handoff_count = 0
        self.local = Usage()  # what this loop used, its delegated children included
        self._hops: list[str] = []  # agents passed through by handoffs since the last real work

    # -- bookkeeping -------------------------------------------------------------------------

    def path(self, agent: Agent[Any]) -> str:
        """The delegation path of ``agent`` in this loop."""
        p = self._paths.get(agent.name)
        if p is None:
            p = self._paths[agent.name] = self.prefix + agent.name
        return p

    def add(self, event: AgentEvent) -> None:
        """Record an event: into the next session batch, the result, and the stream."""
        self._batch.append(event)
        self.new_events.append(event)
        if self.state.emit is not None:
            self.state.emit(event)

    def push(self, message: Message) -> None:
        """Append a message to the conversation (and to the active filtered view)."""
        self.transcript.append(message)
        if self.view is not self.transcript:
            self.view.append(message)

    async def flush(self) -> None:
        """Write the pending events to the session in one batch."""
        if self._batch:
            batch, self._batch = self._batch, []
            await self.session.append(batch)

    def context_for(
        self, agent: Agent[Any], call_id: str = "", span: Span | None = None
    ) -> RunContext[Any]:
        """A run context for ``agent``."""
        return RunContext(
            context=self.state.context,
            agent=agent,
            path=self.path(agent),
            session=self.session,
            usage=self.state.usage,
            tool_call_id=call_id,
            messages=self.view,
            depth=self.depth,
            span=span,
            loop=self,
        )

    def toolset(self, agent: Agent[Any]) -> _Toolset:
        """The (cached) tools of ``agent``."""
        ts = self._toolsets.get(agent.name)
        if ts is None:
            ts = self._toolsets[agent.name] = _Toolset(agent)
        return ts

    def tool_result(
        self,
        agent: Agent[Any],
        call: ToolCall,
        content: str,
        *,
        is_error: bool = False,
        tb: str | None = None,
    ) -> ToolResultEvent:
        """The result event for ``call``."""
        return ToolResultEvent(
            agent=agent.name,
            path=self.path(agent),
            message=Message.tool(call.id, content, name=call.name),
            tool_name=call.name,
            is_error=is_error,
            traceback=tb,
        )

    def answer_dangling(self, agent: Agent[Any], why: str) -> None:
        """Give every unanswered call a result, so the session stays valid for every API."""
        for call in unanswered_calls(self.transcript):
            ev = self.tool_result(agent, call, f"Not executed: {why}", is_error=True)
            self.push(ev.message)
            self.add(ev)

    # -- the loop ----------------------------------------------------------------------------

    async def run(
        self, input: str | Sequence[Message] | None, *, start_agent: Agent[Any] | None = None
    ) -> LoopOutcome:
        """Continue the session with ``input`` (``None`` resumes where the log stopped)."""
        state = self.state
        events = await self.session.get_events()
        self.transcript.extend(history(events))
        agent = start_agent or self._active(events)
        span = state.trace.start("run" if self.parent_span is None else "delegation",
                                 self.path(agent), self.parent_span,
                                 session_id=self.session.session_id, agent=agent.name)
        self.add(RunStartedEvent(agent=agent.name, path=self.path(agent),
                                 trace_id=state.trace.trace_id))
        pending = unanswered_calls(self.transcript)
        if input is not None:
            if pending:
                self.answer_dangling(agent, "the run was interrupted before this call ran.")
                pending = []
            for message in [Message.user(input)] if isinstance(input, str) else input:
                self.push(message)
                self.add(MessageEvent(agent=agent.name, path=self.path(agent), message=message))
        try:
            await self.flush()
            final, agent = await self._loop(agent, span, pending)
        except BaseException as exc:
            self.answer_dangling(agent, f"the run stopped ({type(exc).__name__}).")
            self.add(RunFinishedEvent(agent=agent.name, path=self.path(agent), status="failed",
                                      output=f"{type(exc).__name__}: {exc}"))
            await asyncio.shield(self.flush())
            state.trace.end(span, exc)
            raise
        self.add(RunFinishedEvent(agent=agent.name, path=self.path(agent), output=final))
        await self.flush()
        state.trace.end(span)
        return LoopOutcome(final, agent, self.new_events)

    def _active(self, events: Sequence[AgentEvent]) -> Agent[Any]:
        name = active_agent_name(events)
        if name is not None and name != self.entry.name:
            found = self.entry.find_agent(name)
            if found is not None:
                return found
        return self.entry

    async def _loop(
        self, agent: Agent[Any], run_span: Span, pending: list[ToolCall]
    ) -> tuple[str, Agent[Any]]:
        state = self.state
        turns = 0
        agent_span = state.trace.start("agent", agent.name, run_span)
        try:
            while True:
                if pending:
                    calls, pending = pending, []
                else:
                    if turns >= self.max_turns:
                        raise MaxTurnsExceeded(self.max_turns)
                    turns += 1
                    message = await self._model_turn(agent, agent_span)
                    if not message.tool_calls:
                        return message.content, agent
                    calls = list(message.tool_calls)
                target = await self._run_tools(agent, calls, agent_span)
                await self.flush()
                if target is not None:
                    state.trace.end(agent_span)
                    agent = target
                    agent_span = state.trace.start("agent", agent.name, run_span)
        except BaseException as exc:
            state.trace.end(agent_span, exc)
            raise
        finally:
            if not agent_span.end_ns:
                state.trace.end(agent_span)

    def _model(self, agent: Agent[Any]) -> Model:
        if self.state.model_override is not None:
            return self.state.model_override
        if agent.model is None:
            raise UserError(
                f"Agent {agent.name!r} has no model; give it model=... (a Model or a "
                "'provider:model' string) or pass model=... to Runner.run."
            )
        model = infer_model(agent.model)
        if model is not agent.model:
            agent.model = model  # resolve a "provider:model" string once
        return model

    async def _model_turn(self, agent: Agent[Any], parent: Span) -> Message:
        state = self.state
        path = self.path(agent)
        model = self._model(agent)
        ctx = self.context_for(agent)
        ts = self.toolset(agent)
        definitions = ts.definitions
        if ts.handoffs.dynamic:
            definitions = [t.definition for t in agent.tools]
            definitions.extend(ts.handoffs.offered(ctx, set(ts.tools)))
        instructions = await agent.render_instructions(ctx, self.variables)
        if self.suffix:
            instructions = f"{instructions}\n\n{self.suffix}" if instructions else self.suffix
        request = ModelRequest(
            instructions=instructions,
            messages=self.view,
            tools=definitions,
            settings=agent.model_settings,
            agent=agent.name,
        )
        usage = state.usage
        if state.limits is not None:
            state.limits.reserve_request(usage.total)
        usage.total.requests += 1
        agent_usage = usage.for_agent(path)
        agent_usage.requests += 1
        span = state.trace.start("model", model.name, parent, agent=agent.name)
        try:
            response = await self._call_model(model, request, agent, path)
        except BaseException as exc:
            state.trace.end(span, exc)
            raise
        u = response.usage
        usage.total.input_tokens += u.input_tokens
        usage.total.output_tokens += u.output_tokens
        agent_usage.input_tokens += u.input_tokens
        agent_usage.output_tokens += u.output_tokens
        local = self.local
        local.requests += 1
        local.input_tokens += u.input_tokens
        local.output_tokens += u.output_tokens
        attrs = span.attributes
        attrs["input_tokens"] = u.input_tokens
        attrs["output_tokens"] = u.output_tokens
        attrs["response_model"] = response.model
        state.trace.end(span)
        message = response.message
        message.name = agent.name
        if not message.content and not message.tool_calls:
            raise ModelBehaviorError(
                f"The model of agent {agent.name!r} returned an empty turn (no text and no "
                "tool call); check the model's output limits or its stop sequences."
            )
        self.push(message)
        self.add(MessageEvent(agent=agent.name, path=path, message=message, usage=u,
                              model=response.model or model.name))
        await self.flush()
        if state.limits is not None:
            state.limits.check_tokens(usage.total)
        return message

    async def _call_model(
        self, model: Model, request: ModelRequest, agent: Agent[Any], path: str
    ) -> ModelResponse:
        emit = self.state.emit
        if emit is None:
            return await model.request(request)
        response: ModelResponse | None = None
        async for item in model.stream(request):
            if isinstance(item, str):
                emit(TextDeltaEvent(agent=agent.name, path=path, delta=item))
            else:
                response = item
        if response is None:
            raise ModelBehaviorError(f"Model {model.name!r} ended its stream without a response.")
        return response

    # -- tools and handoffs ------------------------------------------------------------------

    async def _run_tools(
        self, agent: Agent[Any], calls: Sequence[ToolCall], parent: Span
    ) -> Agent[Any] | None:
        """Answer every call in emission order; return the handoff target, if any."""
        ts = self.toolset(agent)
        results: list[ToolResultEvent | None] = [None] * len(calls)
        ordinary: list[tuple[int, Tool, ToolCall]] = []
        chosen: tuple[int, ToolCall, HandoffTool, str] | None = None
        for i, call in enumerate(calls):
            tool = ts.tools.get(call.name)
            if tool is not None:
                ordinary.append((i, tool, call))
                continue
            if call.name not in ts.handoffs.by_tool:
                results[i] = self.tool_result(
                    agent, call, self._unknown_tool(agent, call.name, ts), is_error=True
                )
                continue
            h, reason, error = self._parse_handoff(agent, call, ts)
            if error is not None or h is None:
                results[i] = self.tool_result(agent, call, error or "", is_error=True)
            elif chosen is not None:
                first = chosen[2].agent.name
                results[i] = self.tool_result(
                    agent, call,
                    f"Not performed: only one transfer can happen per turn, and the first one "
                    f"requested in this turn (to {first}) was carried out.",
                    is_error=True,
                )
            else:
                chosen = (i, call, h, reason)
        if ordinary:
            self._hops.clear()  # real work happened: this is not a ping-pong
            await self._execute(agent, ordinary, results, parent)
        if chosen is None:
            self._push_results(results)
            return None
        i, call, h, reason = chosen
        refusal = self._check_handoff(agent, h.agent)
        if refusal is not None:
            results[i] = self.tool_result(agent, call, f"Not performed: {refusal}", is_error=True)
            self._push_results(results)
            await self.flush()
            raise self._handoff_error  # the session is complete and valid at this point
        target = await self._handoff(agent, call, h, reason, parent)
        results[i] = self.tool_result(agent, call, self._handoff_note(agent, target, reason))
        self._push_results(results)
        self.add(HandoffEvent(agent=agent.name, path=self.path(agent), to_agent=target.name,
                              reason=reason, tool_call_id=call.id))
        if h.input_filter is None:
            self.view = self.transcript
        else:
            self.view = h.input_filter(list(self.transcript))
            note = results[i]
            if not self.view or self.view[-1] is not (note.message if note else None):
                # The filter dropped the transfer's result: keep the reason visible.
                self.view.append(Message.system(self._handoff_note(agent, target, reason)))
        return target

    def _push_results(self, results: list[ToolResultEvent | None]) -> None:
        for ev in results:
            assert ev is not None
            self.push(ev.message)
            self.add(ev)

    @staticmethod
    def _handoff_note(agent: Agent[Any], target: Agent[Any], reason: str) -> str:
        text = f"Transferred from {agent.name} to {target.name}."
        return f"{text} Reason: {reason}" if reason else text

    def _check_handoff(self, agent: Agent[Any], target: Agent[Any]) -> str | None:
        """Why a handoff must not happen (limit or ping-pong), or ``None``."""
        if self.max_handoffs is not None and self.handoff_count >= self.max_handoffs:
            self._handoff_error: Exception = MaxHandoffsExceeded(self.max_handoffs)
            return f"this run already made {self.max_handoffs} handoffs."
        hops = self._hops or [agent.name]
        hops.append(target.name)
        self._hops = hops
        if len(hops) >= 4 and hops[-1] == hops[-3] and hops[-2] == hops[-4]:
            self._handoff_error = HandoffLoopError(hops[-4:])
            return "handoff loop detected (control went back and forth with no work done)."
        return None

    def _unknown_tool(self, agent: Agent[Any], name: str, ts: _Toolset) -> str:
        offered = sorted([*ts.tools, *ts.handoffs.by_tool])
        if name.startswith("transfer_to_"):
            wanted = name.removeprefix("transfer_to_")
            if agent.find_agent(wanted) is not None:
                return self._forbidden(agent, wanted, ts)
        return (
            f"Unknown tool {name!r}. Available tools: {', '.join(offered) or 'none'}."
        )

    def _forbidden(self, agent: Agent[Any], target: str, ts: _Toolset) -> str:
        allowed = ", ".join(ts.handoffs.by_agent) or "none"
        return (
            f"Transfer to {target!r} is not allowed from {agent.name!r}: an agent may transfer "
            "to its sub-agents, and to its parent or peers only if its transfer policy allows. "
            f"Allowed targets: {allowed}."
        )

    def _parse_handoff(
        self, agent: Agent[Any], call: ToolCall, ts: _Toolset
    ) -> tuple[HandoffTool | None, str, str | None]:
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return None, "", (
                f"Invalid arguments for {call.name}: not valid JSON ({exc.msg}). "
                'Send a JSON object such as {"reason": "..."}.'
            )
        if not isinstance(args, dict):
            return None, "", f"Invalid arguments for {call.name}: expected a JSON object."
        reason = args.get("reason")
        reason = reason.strip() if isinstance(reason, str) else ""
        handoffs = ts.handoffs
        if call.name == SINGLE_TOOL_NAME and handoffs.mode == "single":
            name = args.get("agent_name")
            if not isinstance(name, str) or not name:
                return None, "", (
                    f"{SINGLE_TOOL_NAME} needs agent_name, one of: "
                    f"{', '.join(handoffs.by_agent)}."
                )
            h = handoffs.by_agent.get(name)
            if h is None:
                if agent.find_agent(name) is not None:
                    return None, "", self._forbidden(agent, name, ts)
                return None, "", (
                    f"Unknown agent {name!r}. You can transfer to: "
                    f"{', '.join(handoffs.by_agent)}."
                )
        else:
            h = handoffs.by_tool[call.name]
        assert h is not None
        if handoffs.dynamic and not handoffs.is_offered(h, self.context_for(agent, call.id)):
            return None, "", (
                f"The transfer to {h.agent.name} is not available right now; "
                "continue without it."
            )
        return h, reason, None

    async def _handoff(
        self, agent: Agent[Any], call: ToolCall, h: HandoffTool, reason: str, parent: Span
    ) -> Agent[Any]:
        target = h.agent
        span = self.state.trace.start("handoff", f"{agent.name} -> {target.name}", parent,
                                      from_agent=agent.name, to_agent=target.name, reason=reason)
        try:
            if h.on_handoff is not None:
                result = h.on_handoff(self.context_for(agent, call.id), reason)
                if asyncio.iscoroutine(result):
                    await result
        except BaseException as exc:
            self.state.trace.end(span, exc)
            raise
        self.handoff_count += 1
        self.state.trace.end(span)
        return target

    async def _execute(
        self,
        agent: Agent[Any],
        calls: list[tuple[int, Tool, ToolCall]],
        results: list[ToolResultEvent | None],
        parent: Span,
    ) -> None:
        """Run ordinary tools: concurrently, except ``sequential`` ones, alone, in order."""
        group: list[tuple[int, Tool, ToolCall]] = []
        for item in calls:
            if item[1].sequential:
                if group:
                    await self._gather(agent, group, results, parent)
                    group = []
                results[item[0]] = await self._call_tool(agent, item[1], item[2], parent)
            else:
                group.append(item)
        if group:
            await self._gather(agent, group, results, parent)

    async def _gather(
        self,
        agent: Agent[Any],
        group: list[tuple[int, Tool, ToolCall]],
        results: list[ToolResultEvent | None],
        parent: Span,
    ) -> None:
        if len(group) == 1:
            i, tool, call = group[0]
            results[i] = await self._call_tool(agent, tool, call, parent)
            return
        done = await asyncio.gather(*(self._call_tool(agent, t, c, parent) for _, t, c in group))
        for (i, _, _), ev in zip(group, done, strict=True):
            results[i] = ev

    async def _call_tool(
        self, agent: Agent[Any], tool: Tool, call: ToolCall, parent: Span
    ) -> ToolResultEvent:
        state = self.state
        wait = tool.acquire_rate()
        if wait:
            limit = tool.rate_limit
            assert limit is not None
            return self.tool_result(
                agent, call,
                f"Rate limit: {tool.name} allows {limit.max_calls} call(s) per "
                f"{limit.window_s:g} s; it can be called again in {wait:.1f} s.",
                is_error=True,
            )
        usage = state.usage
        if state.limits is not None:
            state.limits.reserve_tool_call(usage.total)
        usage.total.tool_calls += 1
        usage.for_agent(self.path(agent)).tool_calls += 1
        self.local.tool_calls += 1
        span = state.trace.start("tool", tool.name, parent, call_id=call.id, agent=agent.name)
        ctx = self.context_for(agent, call.id, span)
        try:
            value = await tool.invoke(ctx, call.arguments)
        except ToolRetry as exc:
            state.trace.end(span, str(exc))
            return self.tool_result(agent, call, str(exc), is_error=True)
        except UsageLimitExceeded as exc:  # a budget ends this loop; a parent sees an error
            state.trace.end(span, exc)
            raise
        except Exception as exc:  # a crashing tool is reported to the model, not to the caller
            state.trace.end(span, exc)
            return self.tool_result(
                agent, call,
                f"Error: tool {tool.name} failed: {type(exc).__name__}: {exc}",
                is_error=True,
                tb=traceback.format_exc(),
            )
        state.trace.end(span)
        return self.tool_result(agent, call, render_tool_output(value))
