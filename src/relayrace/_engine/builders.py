"""The engine's speed tricks, in one place: positional builders for the objects it makes on
every turn.

Matching a keyword-only dataclass's keyword arguments costs more than the rest of logging an
event or serving a tool call, so these set each field directly. Each sets every field, and
``tests/test_builders.py`` checks that each builds what the plain constructor builds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..agents.context import ChildRunner, RunContext
from ..core.events import (
    HandoffEvent,
    MessageEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolResultEvent,
)
from ..core.messages import Message
from ..models.interface import ModelRequest, ModelSettings, OutputSchema, ToolDefinition

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..core.usage import RunUsage, Usage
    from ..sessions.base import Session
    from ..tracing import Span

__all__ = [
    "fast_frozen",
    "new_context",
    "new_handoff_event",
    "new_message_event",
    "new_request",
    "new_run_finished_event",
    "new_run_started_event",
    "new_tool_message",
    "new_tool_result_event",
]

_new = object.__new__
_T = TypeVar("_T")
_time = time.time


def new_message_event(agent: str, path: str, message: Message, usage: Usage | None = None,
                      model: str | None = None,
                      finish_reason: Literal["transfer"] | None = None,
                      parsed_from_text: str | None = None) -> MessageEvent:
    """``MessageEvent(agent=..., path=..., message=..., usage=..., model=...,
    finish_reason=..., parsed_from_text=...)``, faster."""
    e: MessageEvent = _new(MessageEvent)
    e.agent = agent
    e.path = path
    e.time = _time()
    e.kind = "message"
    e.message = message
    e.usage = usage
    e.model = model
    e.finish_reason = finish_reason
    e.parsed_from_text = parsed_from_text
    return e


def new_tool_result_event(agent: str, path: str, message: Message, tool_name: str,
                          is_error: bool = False, traceback: str | None = None,
                          full_content: str | None = None) -> ToolResultEvent:
    """``ToolResultEvent(agent=..., path=..., message=..., ...)``, faster."""
    e: ToolResultEvent = _new(ToolResultEvent)
    e.agent = agent
    e.path = path
    e.time = _time()
    e.kind = "tool_result"
    e.message = message
    e.tool_name = tool_name
    e.is_error = is_error
    e.traceback = traceback
    e.full_content = full_content
    return e


def new_tool_message(content: str, tool_call_id: str, name: str) -> Message:
    """``Message("tool", content, (), tool_call_id, name)``, faster: one per tool call and
    per handoff."""
    m: Message = _new(Message)
    m.role = "tool"
    m.content = content
    m.tool_calls = ()
    m.tool_call_id = tool_call_id
    m.name = name
    return m


def new_run_started_event(agent: str, path: str, trace_id: str, run_id: str = ""
                          ) -> RunStartedEvent:
    """``RunStartedEvent(agent=..., path=..., trace_id=..., run_id=...)``, faster."""
    e: RunStartedEvent = _new(RunStartedEvent)
    e.agent = agent
    e.path = path
    e.time = _time()
    e.kind = "run_started"
    e.trace_id = trace_id
    e.run_id = run_id
    return e


def new_run_finished_event(
    agent: str, path: str, status: Literal["completed", "failed", "interrupted"], output: str,
    reason: str,
) -> RunFinishedEvent:
    """``RunFinishedEvent(agent=..., path=..., status=..., output=..., reason=...)``, faster."""
    e: RunFinishedEvent = _new(RunFinishedEvent)
    e.agent = agent
    e.path = path
    e.time = _time()
    e.kind = "run_finished"
    e.status = status
    e.output = output
    e.reason = reason
    return e


def new_handoff_event(agent: str, path: str, to_agent: str, reason: str, tool_call_id: str,
                      returns_to: str | None) -> HandoffEvent:
    """``HandoffEvent(agent=..., path=..., to_agent=..., ...)`` for a transfer, faster."""
    e: HandoffEvent = _new(HandoffEvent)
    e.agent = agent
    e.path = path
    e.time = _time()
    e.kind = "handoff"
    e.to_agent = to_agent
    e.reason = reason
    e.tool_call_id = tool_call_id
    e.returns_to = returns_to
    e.is_return = False
    e.input = None
    e.context = None
    return e


def new_context(
    context: Any, agent: Agent[Any], path: str, session: Session, usage: RunUsage,
    tool_call_id: str, messages: Sequence[Message], depth: int, span: Span | None,
    children: ChildRunner, call_key: str = "",
) -> RunContext[Any]:
    """A `RunContext`, for the engine: one is made per tool call, and matching ten keyword
    arguments would cost more than the rest of the call's bookkeeping."""
    ctx: RunContext[Any] = _new(RunContext)
    ctx.context = context
    ctx.agent = agent
    ctx.path = path
    ctx.session = session
    ctx.usage = usage
    ctx.tool_call_id = tool_call_id
    ctx.call_key = call_key
    ctx.messages = messages
    ctx.depth = depth
    ctx.span = span
    ctx.children = children
    ctx.answers = ()
    ctx._asked = 0
    return ctx


def new_request(instructions: str, messages: list[Message], tools: Sequence[ToolDefinition],
                settings: ModelSettings | None, agent: str,
                output: OutputSchema | None = None, conversation: str = "") -> ModelRequest:
    """``ModelRequest(instructions=..., messages=..., ...)``, faster."""
    request: ModelRequest = _new(ModelRequest)
    request.conversation = conversation
    request.instructions = instructions
    request.messages = messages
    request.tools = tools
    request.settings = settings
    request.agent = agent
    request.output = output
    return request


def fast_frozen(cls: type[_T]) -> type[_T]:
    """Give the frozen slots dataclass ``cls`` an ``__init__`` that sets each field through its
    slot (about a third faster than the generated one, which goes through
    ``object.__setattr__`` by name); the class stays frozen, and its signature the same.
    For the values the engine makes on every turn and handoff (``turn``, ``offer``)."""
    params: list[str] = []
    keywords: list[str] = []  # keyword-only, as the dataclass orders them: after the others
    body: list[str] = []
    names: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: a default factory is not supported")
        names[f"_set_{f.name}"] = getattr(cls, f.name).__set__  # the slot's descriptor
        into = keywords if f.kw_only else params
        if f.default is MISSING:
            into.append(f.name)
        else:
            names[f"_default_{f.name}"] = f.default
            into.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
    if keywords:
        params += ["*", *keywords]
    source = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "    pass")
    exec(source, names)  # as dataclasses makes __init__, with the setters bound here
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls

