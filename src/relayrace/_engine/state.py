"""The state a run keeps outside its loop: shared run state, log-derived views, toolsets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from ..agents.agent import Agent
from ..agents.handoffs import FINISH_TASK, HandoffSet
from ..agents.output import OUTPUT_TOOL
from ..agents.specialists import install_meta_tools
from ..agents.tools import Tool
from ..agents.tools import Toolset as ListedTools
from ..core.events import AgentEvent, MessageEvent, ToolResultEvent
from ..core.exceptions import UserError
from ..core.messages import Message, ToolCall
from ..core.usage import UsageLimits
from ..models.interface import Model, ToolDefinition
from ..sessions.steps import StepRunner
from ..teams.meta_tools import build_meta_tools
from ..tracing import Trace
from .budget import Budget
from .decisions import Decisions

Emit = Callable[[AgentEvent], None]

# An agent's meta-tools are the teams layer's; the engine, above both, wires them in.
install_meta_tools(build_meta_tools)


class RunState:
    """What a run shares with every child it delegates to."""

    __slots__ = ("approvals", "budget", "context", "emit", "memory_owner", "model_override",
                 "steps", "trace")

    def __init__(self, context: Any, trace: Trace, limits: UsageLimits | None = None,
                 emit: Emit | None = None, model_override: Model | None = None,
                 approvals: Decisions | None = None, steps: StepRunner | None = None) -> None:
        self.context = context
        self.trace = trace
        self.budget = Budget(limits)
        self.emit = emit
        self.model_override = model_override
        self.approvals = approvals
        """The decisions of a resumed run (``None`` unless it resumes after approval)."""
        self.steps = steps
        """Where a durable run records its model requests and tool calls (``None``: not
        durable)."""
        self.memory_owner = ""
        """Whose memory agents with ``memory=`` keep: the run's ``user_id``, else its top
        session's id."""


def model_of(agent: Agent[Any], override: Model | None) -> Model:
    """The model ``agent`` uses in a run whose ``model=`` is ``override`` (it replaces any
    agent's but a remote one's, whose model is the remote agent itself)."""
    model = agent.model if agent.remote else (override or agent.model)
    if type(model) is str:
        model = agent.resolved_model()
    if model is None:
        raise UserError(f"Agent {agent.name!r} has no model; give it model=... (a Model or "
                        "a 'provider:model' string) or pass model=... to Runner.run.")
    return model  # type: ignore[return-value]  # a string was resolved above


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
    """The tools one agent is offered, by name; static while the agent's tree is and its
    toolsets list the same tools (see ``toolset_of``)."""

    __slots__ = ("agent", "definitions", "enabled", "gated", "handoffs", "listed",
                 "permissions", "plain", "refused", "source", "tools")

    def __init__(self, agent: Agent[Any], listed: tuple[Sequence[Tool], ...] = (),
                 extra: Sequence[Tool] = ()) -> None:
        supervisor = agent.pattern == "supervisor"
        self.agent = agent
        own = [*agent.tools, *(t for group in listed for t in group)] if listed else \
            agent.tools
        offered = [t for t in own if (t.delegates or not supervisor) and t.is_enabled is not False]
        self.permissions = rules = agent.permissions  # what it was built from, too
        if rules is not None:  # a denied tool is not offered; a call to it is refused by rule
            offered = [t for t in offered if rules.refusal(t.name) is None]
        kept = len(offered)
        if extra:
            names = {o.name for o in offered}
            offered.extend(t for t in extra if t.name not in names)
        self.tools: dict[str, Tool] = {t.name: t for t in offered}
        self.gated = {t.name: t for t in offered if t.is_enabled is not True}
        """Tools offered only while their ``is_enabled`` function says so, by name."""
        self.refused = {t.name for t in own} - set(self.tools) if kept < len(own) else set()
        self.source = agent.handoff_set()  # what it was built from: stale once that changes
        self.listed = listed  # what the agent's toolsets listed: stale once one lists anew
        self.handoffs = HandoffSet() if supervisor else self.source
        if listed:
            _check_listed(agent, listed, self.handoffs)
        self.definitions: list[ToolDefinition] = [t.definition for t in offered]
        self.definitions.extend(self.handoffs.definitions)
        self.enabled = tuple(self.handoffs.by_agent.values())
        """Its handoffs, all of them (a turn's offer may take fewer: see ``offer_of``)."""
        self.plain: object = None
        """The ``Offer`` of a turn that takes these tools as they are, once ``offer_of`` made
        it (most turns of most runs offer it); it goes with the toolset."""


def _check_listed(agent: Agent[Any], listed: tuple[Sequence[Tool], ...],
                  handoffs: HandoffSet) -> None:
    """Reject a listed tool named like another tool the agent is offered, naming both."""
    owners: dict[str, str] = {t.name: f"its tool {t.name!r}" for t in agent.tools}
    owners.update((n, f"its transfer tool {n!r}") for n in handoffs.by_tool)
    if agent.mode == "task":
        owners[FINISH_TASK] = f"the tool {FINISH_TASK!r} of task mode"
    if agent.output is not None:
        owners[OUTPUT_TOOL] = f"the tool {OUTPUT_TOOL!r} that gives its output"
    for toolset, group in zip(agent.toolsets, listed, strict=True):
        for t in group:
            here = f"tool {t.name!r} of {toolset.label}"
            other = owners.get(t.name)
            if other is not None:
                raise UserError(
                    f"Agent {agent.name!r}: the {here} clashes with {other}; give the server "
                    "a prefix= or leave one tool out with exclude=.")
            owners[t.name] = f"the {here}"


def toolset_of(agent: Agent[Any]) -> Toolset:
    """The tools ``agent`` is offered, built once (kept on the agent) and again only when its
    transfers change (an agent placed under a parent gains its parent and peers) or its
    permissions do, or, with toolsets, when one lists anew (see ``listed_toolset_of``)."""
    ts: Toolset | None = agent._toolset
    # ``_handoff_cache``: ``handoff_set()``'s, set when ``ts`` was built, replaced (never
    # cleared) when the agent is placed anew.
    if ts is None or ts.source is not agent._handoff_cache or \
            ts.permissions is not agent.permissions:
        ts = agent._toolset = Toolset(agent, ts.listed if ts is not None else ())
    return ts


async def listed_toolset_of(agent: Agent[Any]) -> Toolset:
    """``toolset_of`` for an agent with toolsets: what they list now (cached by each), the
    offer rebuilt (and checked for clashing names) only when a list changed."""
    lists: tuple[ListedTools, ...] = agent.toolsets
    listed = tuple(await asyncio.gather(*(s.list_tools() for s in lists)))
    ts = toolset_of(agent)
    if len(ts.listed) != len(listed) or any(a is not b for a, b in zip(ts.listed, listed,
                                                                        strict=False)):
        ts = agent._toolset = Toolset(agent, listed)
    return ts
