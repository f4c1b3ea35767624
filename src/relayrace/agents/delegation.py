"""Delegation: an agent called as a tool runs to completion in a child session and reports back.

A handoff moves the conversation; delegation keeps it. The child runs in a fresh session linked
to its parent's (same store), shares the run's context, trace, usage limits and cancellation,
and returns one compact result: its structured :class:`DelegationReport`, never its transcript.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic

from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import TypeVar

from ..core._lazy import lazy_names
from ..core.events import MessageEvent, ToolResultEvent
from ..core.exceptions import UserError
from ..core.messages import Message, ToolCall
from ..core.reports import (
    DEFAULT_REPORT_SUFFIX,
    SUBMIT_REPORT,
    Confidence,
    DelegationReport,
)
from ..core.templates import ContextTransform, ContextTransformError
from ._spec import AgentLike
from .children import ChildOptions, ChildResult
from .handoffs import InputFilter, sanitize_tool_name
from .input_filters import keep_last, remove_tool_traffic
from .returns import Finish
from .tools import (
    FunctionTool,
    RateLimit,
    Tool,
    ToolRetry,
    describe_validation_error,
    parse_arguments,
)

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

    from ..core.events import AgentEvent
    from .context import RunContext

__all__ = ["AgentTool", "ChildOptions", "ChildResult", "run_child",
           "submit_report", "used_sources"]


class _Query(BaseModel):
    """The default arguments of an agent tool."""

    # built at an agent tool's first call, not at import (pydantic's first schema is costly)
    model_config = ConfigDict(extra="forbid", defer_build=True)
    query: str


DEFAULT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "The task, fully specified."}},
    "required": ["query"],
}
A = TypeVar("A", bound=AgentLike, default=AgentLike)
HISTORY_MESSAGES = 6
"""How many recent parent messages ``include_history=True`` passes to a child."""
HISTORY_CHARS = 4000
"""The most characters of parent history a child receives."""
SOURCE_ARGUMENTS_CHARS = 400
"""The most characters of a used tool's arguments kept in a report's completed SOURCES."""


def _submit_report(
    summary: str,
    confidence: Confidence,
    confidence_reason: str,
    key_findings: list[str] | None = None,
    sources: list[str] | None = None,
    gaps: list[str] | None = None,
) -> Finish:
    """Finish your task with your report to the agent that gave it to you. Call it last.

    Args:
        summary: The answer in one to three sentences.
        confidence: How sure you are: high, medium or low (unknown if you cannot tell).
        confidence_reason: Why that confidence.
        key_findings: One finding per item, with the names and figures that matter.
        sources: Each tool, document or URL your findings come from.
        gaps: What you could not find or verify; leave it empty if nothing is missing.
    """
    report = DelegationReport(summary=summary.strip(), key_findings=key_findings or [],
                              sources=sources or [], confidence=confidence,
                              confidence_reason=confidence_reason.strip(), gaps=gaps or [])
    data = report.to_dict()
    del data["raw"]
    return Finish("report submitted", json.dumps(data, ensure_ascii=False))


def used_sources(events: Sequence[AgentEvent]) -> list[str]:
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
            if call is None or call.name.startswith("transfer_to_") or \
                    call.name == SUBMIT_REPORT:
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
    agent: AgentLike,
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
    child (an error, a timeout, its turn or usage limit). ``key`` tells children of one call
    apart (they are numbered by default), so a resumed call finds each again.
    """
    return await ctx.children.run_child(ctx, agent, task, ChildOptions(
        report=report, audience=audience, report_template=report_template, suffix=suffix,
        max_turns=max_turns, timeout=timeout, variables=variables, history=tuple(history),
        key=key))


OutputExtractor = Callable[["ChildResult"], Any]
"""Turns a delegated child's result into the tool result its caller's model sees (a sync or
async function; see ``Agent.as_tool``)."""


class AgentTool(Tool, Generic[A]):
    """An agent offered as a tool (see ``Agent.as_tool``); ``A`` is the agent's type."""

    delegates = True
    idempotent = True  # a call run again continues its children's sessions (stable keys)

    def __init__(
        self,
        agent: A,
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
        output_extractor: OutputExtractor | None = None,
        is_enabled: bool | Callable[[RunContext[Any]], bool | Awaitable[bool]] = True,
    ) -> None:
        self.agent = agent
        if output_extractor is not None and not callable(output_extractor):
            raise UserError(f"Agent tool {agent.name!r}: output_extractor must be a function "
                            f"(sync or async) of the ChildResult, got "
                            f"{type(output_extractor).__name__}.")
        if not isinstance(is_enabled, bool) and not callable(is_enabled):
            raise UserError(f"Agent tool {agent.name!r}: is_enabled must be a bool or a "
                            f"function of the run context, got {type(is_enabled).__name__}.")
        self.output_extractor = output_extractor
        self.is_enabled = is_enabled
        self.name = sanitize_tool_name(name or agent.name)
        self.description = description or agent.description or f"Delegate a task to {agent.name}."
        self._model: type[BaseModel] | None = None
        self._validator: Draft202012Validator | None = None
        if parameters is None:  # validated by a pydantic model: no schema interpretation
            self._model, self.parameters = _Query, DEFAULT_PARAMETERS
        elif isinstance(parameters, dict):
            import jsonschema  # only a schema given as a dict needs it

            try:
                jsonschema.Draft202012Validator.check_schema(parameters)
            except jsonschema.SchemaError as exc:
                raise UserError(f"Agent tool {self.name!r}: invalid parameters schema: "
                                f"{exc.message}") from exc
            self.parameters = parameters
            self._validator = jsonschema.Draft202012Validator(parameters)
        elif isinstance(parameters, type) and issubclass(parameters, BaseModel):
            self._model = parameters
            self.parameters = parameters.model_json_schema()
        else:
            raise UserError(f"Agent tool {self.name!r}: parameters must be a JSON Schema dict "
                            f"or a pydantic model class, not {type(parameters).__name__}.")
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
        if self.output_extractor is None:
            return result.render()
        try:
            extracted = self.output_extractor(result)
            if inspect.isawaitable(extracted):
                extracted = await extracted
        except Exception as exc:
            raise UserError(f"The output_extractor of agent tool {self.name!r} raised "
                            f"{type(exc).__name__}: {exc}. Fix it: it takes the ChildResult "
                            "and returns the tool result.") from exc
        return extracted


# ``submit_report`` is the tool above, made when first named (see `relayrace.core._lazy`).
if TYPE_CHECKING:
    submit_report: FunctionTool
__getattr__ = lazy_names(__name__, {"submit_report": lambda: FunctionTool(_submit_report,
                                                                           name=SUBMIT_REPORT)})
