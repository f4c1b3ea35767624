"""What happened in a conversation, read from its session events: the trajectory that the
matchers compare with a case's expectations, and that replay compares with a stored one."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from relayrace import Agent
from relayrace.core.events import (
    AgentEvent,
    DelegationEvent,
    HandoffEvent,
    MessageEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from relayrace.core.usage import Usage

__all__ = ["CallMade", "Trajectory", "handoff_tools", "read_trajectory"]


@dataclass(slots=True, frozen=True)
class CallMade:
    """One tool call a model made."""

    name: str
    """The tool."""
    args: Any
    """Its arguments as JSON data (the raw text when they are not JSON)."""
    agent: str
    """The agent whose model made it."""

    def __str__(self) -> str:
        shown = json.dumps(self.args, sort_keys=True) if not isinstance(self.args, str) \
            else self.args
        return f"{self.name}({shown})"


@dataclass(slots=True)
class Trajectory:
    """A conversation's agents, tool calls, delegations and final answer."""

    path: list[str] = field(default_factory=list)
    """The agents that held the conversation, in order (a return is a step too)."""
    turns: list[list[CallMade]] = field(default_factory=list)
    """The tool calls, per model turn that made any (handoffs left out)."""
    delegations: list[DelegationEvent] = field(default_factory=list)
    """The delegated children that finished."""
    final: Any = ""
    """The final answer: text, or a typed agent's JSON data."""
    last_agent: str = ""
    """The agent that gave it."""
    usage: Usage = field(default_factory=Usage)
    """Requests and tokens of the models' answers in this log (children: their delegation's)."""
    models: dict[str, Usage] = field(default_factory=dict)
    """The same, per model name."""
    failed: str = ""
    """How the last run failed, if it did."""
    steps: list[str] = field(default_factory=list)
    """The trajectory as lines, in order: each agent taking over, each tool call and
    delegation, and who answered."""

    @property
    def calls(self) -> list[CallMade]:
        """Every tool call, in order."""
        return [c for turn in self.turns for c in turn]


def handoff_tools(team: Agent[Any]) -> frozenset[str]:
    """The tool names that are transfers anywhere in ``team``."""
    names: set[str] = set()
    for member in team.root.walk():
        names.update(member.handoff_set().by_tool)
    return frozenset(names)


def _args(raw: str) -> Any:
    try:
        return json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return raw


def read_trajectory(events: Iterable[AgentEvent], *, handoffs: Collection[str] = (),
                    final_output: Any = None, steps: bool = True) -> Trajectory:
    """The trajectory of ``events`` (a session's log, or a run's new events).

    ``handoffs`` names transfer tools, left out of the tool calls (as are the calls a
    ``HandoffEvent`` names); ``final_output`` is a typed run's value, used for ``final``;
    ``steps=False`` leaves the trajectory's ``steps`` empty (they cost time to write out).
    """
    out = Trajectory()
    events = list(events)
    transfer_ids = {e.tool_call_id for e in events if isinstance(e, HandoffEvent)}
    skip = set(handoffs)
    path = out.path
    lines = out.steps if steps else []  # written to and dropped when not wanted
    for e in events:
        kind = type(e)
        if kind is RunStartedEvent:
            if not path or path[-1] != e.agent:
                path.append(e.agent)
                lines.append(f"→ {e.agent}")
        elif kind is HandoffEvent:
            path.append(e.to_agent)  # type: ignore[attr-defined]
            lines.append(f"→ {e.to_agent}")  # type: ignore[attr-defined]
        elif kind is MessageEvent:
            message = e.message  # type: ignore[attr-defined]
            if message.role != "assistant":
                continue
            usage = e.usage  # type: ignore[attr-defined]
            if usage is not None:
                out.usage.add(usage)
                out.models.setdefault(e.model or "?", Usage()).add(usage)  # type: ignore[attr-defined]
            made = [CallMade(c.name, _args(c.arguments), e.agent) for c in message.tool_calls
                    if c.id not in transfer_ids and c.name not in skip]
            if made:
                out.turns.append(made)
                if steps:
                    lines.extend(f"  {e.agent}: {c}" for c in made)
        elif kind is DelegationEvent:
            out.delegations.append(e)  # type: ignore[arg-type]
            lines.append(f"  {e.agent} delegated to {e.child_agent}: "  # type: ignore[attr-defined]
                         f"{'ok' if e.ok else 'failed'}")  # type: ignore[attr-defined]
            if e.usage is not None:  # type: ignore[attr-defined]
                out.usage.add(e.usage)  # type: ignore[attr-defined]
        elif kind is RunFinishedEvent:
            status = e.status  # type: ignore[attr-defined]
            out.failed = e.output if status == "failed" else ""  # type: ignore[attr-defined]
            if status == "completed":
                out.final, out.last_agent = e.output, e.agent  # type: ignore[attr-defined]
                lines.append(f"answer by {e.agent}")
    if final_output is not None and not isinstance(final_output, str):
        out.final = to_jsonable_python(final_output)
    return out
