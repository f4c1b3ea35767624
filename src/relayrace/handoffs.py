"""Same-session handoff: transfer tools, transfer policies and input filters.

A handoff moves the live conversation to another agent: the target continues the same session
with the whole history, under its own instructions. Which targets an agent may reach is decided
by the agent tree (``sub_agents``) and its :class:`TransferPolicy`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .messages import Message
from .models.interface import ToolDefinition

if TYPE_CHECKING:
    from .agent import Agent
    from .context import RunContext

__all__ = [
    "HandoffTool",
    "InputFilter",
    "TransferPolicy",
    "handoff",
    "keep_last",
    "remove_tool_traffic",
    "sanitize_tool_name",
]

InputFilter = Callable[[list[Message]], list[Message]]
"""Decides what a handoff's target model sees; the session keeps the full record."""

HandoffToolsMode = Literal["per_agent", "single"]
SINGLE_TOOL_NAME = "transfer_to_agent"


@dataclass(slots=True, kw_only=True, frozen=True)
class TransferPolicy:
    """Where an agent may transfer besides its children, which are always allowed."""

    to_parent: bool = False
    """Allow a transfer back to the parent agent."""
    to_peers: bool = False
    """Allow transfers to siblings (the parent's other children)."""


@dataclass(kw_only=True, eq=False)
class HandoffTool:
    """A handoff to ``agent`` as offered to a model; build it with :func:`handoff`."""

    agent: Agent[Any]
    """The agent that takes over."""
    tool_name: str | None = None
    """The tool's name; ``transfer_to_<agent name>`` by default."""
    description: str | None = None
    """The tool's description; built from the target's description by default."""
    is_enabled: bool | Callable[[RunContext[Any]], bool] = True
    """Whether the handoff is offered: a bool, or a function of the run context."""
    input_filter: InputFilter | None = None
    """What the target's model sees of the history (the session keeps it all)."""
    on_handoff: Callable[[RunContext[Any], str], Awaitable[None] | None] | None = None
    """Called with the run context and the reason when the handoff happens."""
    requires_approval: bool = False
    """Pause the run for a human decision before the transfer."""

    def default_description(self) -> str:
        """The description offered to the model."""
        if self.description:
            return self.description
        about = self.agent.description or f"the {self.agent.name} agent"
        return f"Transfer the conversation to {self.agent.name}: {about}"


def handoff(
    agent: Agent[Any],
    *,
    tool_name: str | None = None,
    description: str | None = None,
    is_enabled: bool | Callable[[RunContext[Any]], bool] = True,
    input_filter: InputFilter | None = None,
    on_handoff: Callable[[RunContext[Any], str], Awaitable[None] | None] | None = None,
    requires_approval: bool = False,
) -> HandoffTool:
    """Build a handoff explicitly; pass it in ``sub_agents`` in place of the bare agent."""
    return HandoffTool(
        agent=agent,
        tool_name=tool_name,
        description=description,
        is_enabled=is_enabled,
        input_filter=input_filter,
        on_handoff=on_handoff,
        requires_approval=requires_approval,
    )


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitize_tool_name(name: str, taken: set[str] | None = None) -> str:
    """A tool name of ``[A-Za-z0-9_-]``, at most 64 characters, unique within ``taken``."""
    base = _UNSAFE.sub("_", name)[:64] or "tool"
    if taken is None or base not in taken:
        return base
    n = 2
    while True:
        suffix = f"_{n}"
        candidate = base[: 64 - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


REASON_SCHEMA = {
    "type": "string",
    "description": "Why the transfer is needed, for the agent taking over.",
}


@dataclass(slots=True)
class HandoffSet:
    """The transfers one agent may make, resolved from its tree and policy."""

    by_agent: dict[str, HandoffTool] = field(default_factory=dict)
    """Allowed targets by agent name."""
    by_tool: dict[str, HandoffTool | None] = field(default_factory=dict)
    """Tool name to handoff (``None`` for the single ``transfer_to_agent`` tool)."""
    definitions: list[ToolDefinition] = field(default_factory=list)
    """Tool definitions when every handoff is enabled."""
    dynamic: bool = False
    """Whether some ``is_enabled`` is a function, so the offer changes per turn."""
    mode: HandoffToolsMode = "per_agent"
    """One tool per target, or one ``transfer_to_agent`` tool."""

    def offered(self, ctx: RunContext[Any], taken: set[str]) -> list[ToolDefinition]:
        """The definitions to offer this turn."""
        if not self.dynamic:
            return self.definitions
        enabled = [h for h in self.by_agent.values() if _enabled(h, ctx)]
        return _definitions(enabled, self.mode, taken)[0]

    def is_offered(self, h: HandoffTool, ctx: RunContext[Any]) -> bool:
        """Whether ``h`` may be taken this turn."""
        return _enabled(h, ctx)


def _enabled(h: HandoffTool, ctx: RunContext[Any]) -> bool:
    flag = h.is_enabled
    return flag if isinstance(flag, bool) else bool(flag(ctx))


def _definitions(
    handoffs: Sequence[HandoffTool], mode: HandoffToolsMode, taken: set[str]
) -> tuple[list[ToolDefinition], dict[str, HandoffTool | None]]:
    if not handoffs:
        return [], {}
    if mode == "single":
        lines = "\n".join(f"- {h.agent.name}: {h.default_description()}" for h in handoffs)
        definition = ToolDefinition(
            name=SINGLE_TOOL_NAME,
            description="Transfer the conversation to another agent. Targets:\n" + lines,
            parameters={
                "type": "object",
                "properties": {
                    "agent_name": {"type": "string", "enum": [h.agent.name for h in handoffs]},
                    "reason": REASON_SCHEMA,
                },
                "required": ["agent_name"],
            },
        )
        return [definition], {SINGLE_TOOL_NAME: None}
    definitions: list[ToolDefinition] = []
    by_tool: dict[str, HandoffTool | None] = {}
    names = set(taken)
    for h in handoffs:
        name = sanitize_tool_name(h.tool_name or f"transfer_to_{h.agent.name}", names)
        names.add(name)
        by_tool[name] = h
        definitions.append(
            ToolDefinition(
                name=name,
                description=h.default_description(),
                parameters={"type": "object", "properties": {"reason": REASON_SCHEMA}},
            )
        )
    return definitions, by_tool


def resolve_handoffs(agent: Agent[Any], taken: set[str]) -> HandoffSet:
    """The transfers ``agent`` may make: children, then parent and peers if its policy allows."""
    targets: list[HandoffTool] = list(agent.handoffs)
    parent = agent.parent
    if parent is not None:
        if agent.transfer_policy.to_parent:
            targets.append(HandoffTool(agent=parent))
        if agent.transfer_policy.to_peers:
            targets.extend(h for h in parent.handoffs if h.agent is not agent)
    by_agent: dict[str, HandoffTool] = {}
    for h in targets:
        if h.is_enabled is not False:
            by_agent.setdefault(h.agent.name, h)
    handoffs = list(by_agent.values())
    definitions, by_tool = _definitions(handoffs, agent.handoff_tools, taken)
    return HandoffSet(
        by_agent=by_agent,
        by_tool=by_tool,
        definitions=definitions,
        dynamic=any(not isinstance(h.is_enabled, bool) for h in handoffs),
        mode=agent.handoff_tools,
    )


def remove_tool_traffic(messages: list[Message]) -> list[Message]:
    """An input filter that drops tool calls and tool results, keeping the conversation text."""
    out: list[Message] = []
    for m in messages:
        if m.role == "tool":
            continue
        if m.tool_calls:
            if m.content:
                out.append(Message.assistant(m.content, name=m.name))
            continue
        out.append(m)
    return out


def keep_last(n: int) -> InputFilter:
    """An input filter keeping the last ``n`` messages, never splitting a call from its result."""
    if n < 1:
        raise ValueError(f"keep_last needs n >= 1, got {n}")

    def _filter(messages: list[Message]) -> list[Message]:
        start = max(0, len(messages) - n)
        # A tool result must follow its call: move back to the assistant message that made it.
        while start > 0 and messages[start].role == "tool":
            start -= 1
        return messages[start:]

    return _filter
