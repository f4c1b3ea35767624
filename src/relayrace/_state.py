"""The state a run keeps outside its loop: shared run state, log-derived views, toolsets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._budget import Budget
from .agent import Agent
from .events import AgentEvent, MessageEvent, ToolResultEvent
from .handoffs import FINISH_TASK as FINISH_TASK  # re-exported: the engine imports it from here
from .handoffs import HandoffSet
from .messages import Message, ToolCall
from .models.interface import Model, ToolDefinition
from .tools import Tool
from .tracing import Trace
from .usage import UsageLimits

Emit = Callable[[AgentEvent], None]


class RunState:
    """What a run shares with every child it delegates to."""

    __slots__ = ("approvals", "budget", "context", "emit", "model_override", "trace")

    def __init__(self, context: Any, trace: Trace, limits: UsageLimits | None = None,
                 emit: Emit | None = None, model_override: Model | None = None,
                 approvals: dict[str, bool] | None = None) -> None:
        self.context = context
        self.trace = trace
        self.budget = Budget(limits)
        self.emit = emit
        self.model_override = model_override
        self.approvals = approvals or {}


def history(events: Sequence[AgentEvent]) -> list[Message]:
    """The conversation held in a session log."""
    return [e.message for e in events if isinstance(e, (MessageEvent, ToolResultEvent))]


def unanswered_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet."""
    if not messages or (messages[-1].role == "assistant" and not messages[-1].tool_calls):
        return []  # the common case: the conversation ends with an answer
    answered: set[str] = set()
    for m in reversed(messages):
        if m.role == "tool" and m.tool_call_id is not None:
            answered.add(m.tool_call_id)
        elif m.role == "assistant":
            return [c for c in m.tool_calls if c.id not in answered]
        else:
            return []
    return []


class Toolset:
    """The tools one agent is offered, by name; static, so it is cached on the agent."""

    __slots__ = ("definitions", "handoffs", "refused", "tools")

    def __init__(self, agent: Agent[Any]) -> None:
        supervisor = agent.pattern == "supervisor"
        offered = [t for t in agent.tools if t.delegates or not supervisor]
        self.tools: dict[str, Tool] = {t.name: t for t in offered}
        self.refused = {t.name for t in agent.tools} - set(self.tools)
        self.handoffs = HandoffSet() if supervisor else agent.handoff_set()
        self.definitions: list[ToolDefinition] = [t.definition for t in offered]
        self.definitions.extend(self.handoffs.definitions)
