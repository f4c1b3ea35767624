"""The engine's speed tricks, in one place: positional builders for the objects it makes on
every turn.

Matching a keyword-only dataclass's keyword arguments costs more than the rest of logging an
event or serving a tool call, so these set each field directly. Each sets every field, and
``tests/test_builders.py`` checks that each builds what the plain constructor builds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..agents.context import ChildRunner, RunContext
from ..core.events import (
    HandoffEvent,
    MessageEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolResultEvent,
)
from ..models.interface import ModelRequest, ModelSettings, OutputSchema, ToolDefinition

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..core.messages import Message
    from ..core.usage import RunUsage, Usage
    from ..sessions.base import Session
    from ..tracing import Span

__all__ = [
    "new_context",
    "new_handoff_event",
    "new_message_event",
    "new_request",
    "new_run_finished_event",
    "new_run_started_event",
    "new_tool_result_event",
]

_new = object.__new__
_time = time.time


def new_message_event(agent: str, path: str, message: Message, usage: Usage | None = None,
                      model: str | None = None,
                      finish_reason: Literal["transfer"] | None = None) -> MessageEvent:
    """``MessageEvent(agent=..., path=..., message=..., usage=..., model=...,
    finish_reason=...)``, faster."""
    e: MessageEvent = _new(MessageEvent)
    e.agent = agent
    e.path = path
    e.time = _time()
    e.kind = "message"
    e.message = message
    e.usage = usage
    e.model = model
    e.finish_reason = finish_reason
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
