"""Delegation: an agent called as a tool runs to completion in a child session and reports back.

A handoff moves the conversation; delegation keeps it. The child runs in a fresh session linked
to its parent's (same store), shares the run's context, trace, usage limits and cancellation,
and returns one compact result: its structured :class:`HandoffReport`, never its transcript.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import jsonschema
from pydantic import BaseModel, ConfigDict, ValidationError

from ._engine import AgentLoop
from ._templates import ContextTransform, ContextTransformError
from .approvals import Interrupted, PendingApproval
from .events import DelegationEvent, MessageEvent, RunFinishedEvent, ToolResultEvent
from .exceptions import UsageLimitExceeded, UserError
from .handoffs import InputFilter, keep_last, remove_tool_traffic, sanitize_tool_name
from .messages import Message, ToolCall
from .reports import DEFAULT_REPORT_SUFFIX, EMPTY_ANSWER, HandoffReport, parse_report
from .reports import report_instructions as _report_instructions
from .tools import RateLimit, Tool, ToolRetry, describe_validation_error, parse_arguments
from .usage import Usage

if TYPE_CHECKING:
    from .agent import Agent
    from .context import RunContext
    from .events import AgentEvent
    from .sessions import Session

__all__ = ["AgentTool", "ChildResult", "run_child", "run_children"]

class _Query(BaseModel):
    """The default arguments of an agent tool."""

    model_config = ConfigDict(extra="forbid")
    query: str


DEFAULT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "The task, fully specified."}},
    "required": ["query"],
}
T = TypeVar("T")
HISTORY_MESSAGES = 6
"""How many recent parent messages ``include_history=True`` passes to a child."""
HISTORY_CHARS = 4000
"""The most characters of parent history a child receives."""
SOURCE_ARGUMENTS_CHARS = 400
"""The most characters of a used tool's arguments kept in a report's completed SOURCES."""


@dataclass(slots=True, kw_only=True)
class ChildResult:
    """How one delegated child run ended."""

    agent: str
    """The child agent's name."""
    path: str
    """Its delegation path, e.g. ``coordinator/researcher``."""
    ok: bool
    """Whether it finished with an answer."""
    output: str = ""
    """Its final answer (empty if it failed)."""
    report: HandoffReport | None = None
    """Its parsed report, when a report was asked for."""
    error: str | None = None
    """Why it failed."""
    session_id: str = ""
    """Its child session."""
    usage: Usage
    """What it used, its own children included."""

    def render(self) -> str:
        """The compact text its parent's model receives."""
        if not self.ok:
            return f"{self.agent} failed: {self.error}"
        if self.report is not None:
            return self.report.render()
        return self.output or EMPTY_ANSWER


def _sources(events: Sequence[AgentEvent]) -> list[str]:
    """The tools a child actually used, with their arguments, for provenance."""
    calls: dict[str, ToolCall] = {}
    used: list[str] = []
    for e in events:  # one pass: a call is always logged before its result
        kind = type(e)
        if kind is MessageEvent:
            for c in e.message.tool_calls:  # type: ignore[attr-defined]
                calls[c.id] = c
        elif kind is ToolResultEvent and not e.is_error:  # type: ignore[attr-defined]
            call = calls.get(e.message.tool_call_id or "")  # type: ignore[attr-defined]
            if call is None or call.name.startswith("transfer_to_"):
                continue
            args = call.arguments.strip()
            if len(args) > SOURCE_ARGUMENTS_CHARS:  # long, but a URL or path must stay whole
                args = args[:SOURCE_ARGUMENTS_CHARS - 3] + "..."
            used.append(f"{call.name}({args})" if args not in ("", "{}") else call.name)
    return used


def _paired(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without tool calls that have no result, nor results without their call.

    A history filter sees the parent's conversation as it stands, the open call to this very
    tool included; a child's model must never receive a call without its result.
    """
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    called: set[str] = set()
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            calls = tuple(c for c in m.tool_calls if c.id in answered)
            called.update(c.id for c in calls)
            if len(calls) != len(m.tool_calls):
                if not calls and not m.content:
                    continue
                m = Message("assistant", m.content, calls, name=m.name)
        elif m.role == "tool" and m.tool_call_id not in called:
            continue
        out.append(m)
    return out


def bounded_history(messages: Sequence[Message]) -> list[Message]:
    """The recent conversation text a child may see: no tool traffic, few messages, capped."""
    recent = keep_last(HISTORY_MESSAGES)(remove_tool_traffic(list(messages)))
    out: list[Message] = []
    budget = HISTORY_CHARS
    for m in reversed(recent):
        if m.role not in ("user", "assistant") or not m.content:
            continue
        if len(m.content) > budget:
            break
        budget -= len(m.content)
        out.append(Message(m.role, m.content))
    out.reverse()
    while out and out[0].role != "user":  # a conversation starts with the user
        out.pop(0)
    return out


async def run_child(
    ctx: RunContext[Any],
    agent: Agent[Any],
    task: str,
    *,
    report: bool = True,
    audience: str = "",
    report_template: str = DEFAULT_REPORT_SUFFIX,
    suffix: str = "",
    max_turns: int | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - the child's own deadline, enforced inside
    variables: dict[str, Any] | None = None,
    history: Sequence[Message] = (),
    key: str | None = None,
) -> ChildResult:
    """Run ``agent`` on ``task`` as a delegated child of the agent ``ctx`` serves.

    Every failure comes back as a failed ``ChildResult`` that the parent's model is told
    about: a refused start (``max_agent_calls`` or ``max_depth`` reached) and whatever ends the
    child (an error, a timeout, its turn or usage limit).
    """
    loop = ctx.loop
    state = loop.state
    prefix = ctx.path + "/"
    path = prefix + agent.name
    too_deep = state.budget.refuse_depth(ctx.depth + 1)
    if too_deep is not None:
        return _refused(agent, path, too_deep)
    if key is None:  # children of one tool call are numbered, so a resume finds each again
        n = loop.child_counts.get(ctx.tool_call_id, 0)
        loop.child_counts[ctx.tool_call_id] = n + 1
        key = str(n)
    # Which batch made the call, too: a model may reuse a call id in a later turn.
    key = f"{loop.batch_at}:{key}"
    child_input: list[Message] | None = [*history, Message.user(task)]
    session: Session | None = None
    if state.approvals or ctx.tool_call_id in loop.resumed:
        # The call ran before this process: continue its child, or reuse what it returned.
        session, finished = await _earlier_child(loop.session, ctx.tool_call_id, key)
        if finished is not None:
            return finished
        if session is not None and (await session.view()).messages:
            child_input = None
    if child_input is not None:  # a new child: checked and counted with no await between
        refused = state.budget.start_child()
        if refused is not None:
            return _refused(agent, path, refused)
    child_session = session or loop.session.child(path=path, tool_call_id=ctx.tool_call_id,
                                                  key=key)
    instructions_suffix = _report_instructions(audience, report_template) if report else ""
    if suffix:
        instructions_suffix = f"{instructions_suffix}\n\n{suffix}".strip()
    child = AgentLoop(state, agent, child_session, path_prefix=prefix, parent_span=ctx.span,
                      max_turns=max_turns, depth=ctx.depth + 1,
                      instructions_suffix=instructions_suffix, variables=variables)
    used = child.local
    assert used is not None  # a delegated loop counts what it uses
    result = ChildResult(agent=agent.name, path=path, ok=False,
                         session_id=child_session.session_id, usage=used)
    deadline = asyncio.timeout(timeout) if timeout is not None else None
    try:
        if deadline is None:
            final = (await child.run(child_input))[0]
        else:
            async with deadline:
                final = (await child.run(child_input))[0]
    except Interrupted:
        if loop.local is not None:
            loop.local.add(used)
        raise  # the approval request surfaces on the outer run
    except Exception as exc:  # the parent's model is told; the child's log has the details
        result.error = (f"timed out after {timeout:g} s"
                        if deadline is not None and deadline.expired()
                        else f"{type(exc).__name__}: {exc}")
    else:
        result.ok = True
        result.output = final
        if report:
            result.report = parse_report(final)
            result.report.merge_sources(_sources(child.new_events))
    if loop.local is not None:  # the top-level loop's usage is the run's total
        loop.local.add(used)
    loop.add(DelegationEvent(
        agent=ctx.agent.name, path=ctx.path, child_agent=agent.name,
        child_session_id=child_session.session_id, tool_call_id=ctx.tool_call_id, ok=result.ok,
        report=result.report.to_dict() if result.report else None, error=result.error,
        usage=Usage(used.requests, used.input_tokens, used.output_tokens, used.tool_calls),
    ))
    return result


def _refused(agent: Agent[Any], path: str, why: UsageLimitExceeded) -> ChildResult:
    return ChildResult(agent=agent.name, path=path, ok=False, usage=Usage(),
                       error=f"not started: {why}")


async def run_children(children: Sequence[Awaitable[T]], limit: int | None = None) -> list[T]:
    """Run children concurrently in a task group, results in the order given.

    A child that stops for approval does not cancel its siblings: they finish, and every
    request then surfaces together on the outer run.
    """
    gate = asyncio.Semaphore(limit or max(1, len(children)))
    stopped: list[PendingApproval] = []

    async def one(child: Awaitable[T]) -> T | None:
        async with gate:
            try:
                return await child
            except Interrupted as stop:
                stopped.extend(stop.approvals)
                return None

    async with asyncio.TaskGroup() as group:
        running = [group.create_task(one(c)) for c in children]
    if stopped:
        raise Interrupted(stopped)
    return [r.result() for r in running]  # type: ignore[misc]


async def _earlier_child(
    parent: Session, tool_call_id: str, key: str
) -> tuple[Session | None, ChildResult | None]:
    """The child ``key`` of ``tool_call_id`` from before a resume: waiting, or finished."""
    for info in reversed(await parent.children()):
        if info.parent_tool_call_id != tool_call_id or info.key != key:
            continue
        child = parent.open_child(info)
        events = await child.get_events()
        done = events[-1] if events and isinstance(events[-1], RunFinishedEvent) else None
        if done is None or done.status == "interrupted":
            return child, None  # it stopped for approval, or crashed: it goes on from its log
        if done.status == "completed":
            report = parse_report(done.output)
            report.merge_sources(_sources(events))
            return None, ChildResult(agent=done.agent, path=info.path, ok=True,
                                     output=done.output, report=report,
                                     session_id=info.session_id, usage=Usage())
        return None, ChildResult(agent=done.agent, path=info.path, ok=False, error=done.output,
                                 session_id=info.session_id, usage=Usage())
    return None, None


class AgentTool(Tool):
    """An agent offered as a tool (see ``Agent.as_tool``)."""

    delegates = True
    idempotent = True  # a call run again continues its children's sessions (stable keys)

    def __init__(
        self,
        agent: Agent[Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: dict[str, Any] | type[BaseModel] | None = None,
        context_transform: str | None = None,
        rate_limit: RateLimit | None = None,
        max_turns: int | None = None,
        report: bool = True,
        include_history: bool | InputFilter = False,
        timeout: float | None = None,
        report_template: str = DEFAULT_REPORT_SUFFIX,
    ) -> None:
        self.agent = agent
        self.name = sanitize_tool_name(name or agent.name)
        self.description = description or agent.description or f"Delegate a task to {agent.name}."
        self._model: type[BaseModel] | None = None
        if parameters is None:  # validated by a pydantic model: no schema interpretation
            self._model, self.parameters = _Query, DEFAULT_PARAMETERS
        elif isinstance(parameters, dict):
            try:
                jsonschema.Draft202012Validator.check_schema(parameters)
            except jsonschema.SchemaError as exc:
                raise UserError(f"Agent tool {self.name!r}: invalid parameters schema: "
                                f"{exc.message}") from exc
            self.parameters = parameters
        elif isinstance(parameters, type) and issubclass(parameters, BaseModel):
            self._model = parameters
            self.parameters = parameters.model_json_schema()
        else:
            raise UserError(f"Agent tool {self.name!r}: parameters must be a JSON Schema dict "
                            f"or a pydantic model class, not {type(parameters).__name__}.")
        self._validator = (jsonschema.Draft202012Validator(self.parameters)
                           if self._model is None else None)
        self.transform = (ContextTransform(context_transform, name=f"{self.name}.context_transform")
                          if context_transform else None)
        self.rate_limit = rate_limit
        self.max_turns = max_turns
        self.report = report
        self.include_history = include_history
        self.timeout = timeout
        self.report_template = report_template

    def _arguments(self, arguments: str) -> dict[str, Any]:
        if self._model is not None:
            try:  # the validator and serializer themselves: the model's wrappers cost more
                parsed = self._model.__pydantic_validator__.validate_json(arguments or "{}")
                return self._model.__pydantic_serializer__.to_python(  # type: ignore[no-any-return]
                    parsed, mode="json")
            except ValidationError as exc:
                raise ToolRetry(f"Invalid arguments for {self.name}: "
                                f"{describe_validation_error(exc)}.") from None
        data = parse_arguments(arguments, self.name, json.dumps(self.parameters))
        assert self._validator is not None
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.path))
        if errors:
            where = "; ".join(
                f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:5]
            )
            raise ToolRetry(f"Invalid arguments for {self.name}: {where}. "
                            f"Expected: {json.dumps(self.parameters)}")
        return data

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        data = self._arguments(arguments)
        variables = None
        if self.transform is not None:
            try:
                variables = self.transform.render(data)
            except ContextTransformError as exc:
                raise ToolRetry(str(exc)) from None
        task = data.get("query")
        if not isinstance(task, str):
            task = json.dumps(data, ensure_ascii=False)
        history: Sequence[Message] = ()
        if self.include_history is True:
            history = bounded_history(ctx.messages)
        elif callable(self.include_history):
            history = _paired(self.include_history(list(ctx.messages)))
        result = await run_child(
            ctx, self.agent, task, report=self.report, report_template=self.report_template,
            max_turns=self.max_turns, timeout=self.timeout, variables=variables, history=history,
        )
        if not result.ok:
            raise ToolRetry(result.render())
        return result.render()
