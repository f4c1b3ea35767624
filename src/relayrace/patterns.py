"""Coordination patterns built from agents: swarm, and tools that route a team."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .agent import Agent
from .context import RunContext
from .exceptions import UserError
from .handoffs import Handoff, InputFilter, TransferPolicy
from .messages import Message
from .routing import TransferTo
from .tools import Tool, parse_arguments

__all__ = ["bounded_transcript", "route_tool", "swarm"]


def bounded_transcript(*, turns: int | None = None, chars: int | None = None) -> InputFilter:
    """An input filter keeping the last ``turns`` user turns and at most ``chars`` characters.

    It never splits a tool call from its result.
    """

    def _filter(messages: list[Message]) -> list[Message]:
        start = 0
        if turns is not None:
            users = [i for i, m in enumerate(messages) if m.role == "user"]
            if len(users) > turns:
                start = users[-turns]
        if chars is not None:
            total = sum(len(m.content) for m in messages[start:])
            while start < len(messages) - 1 and total > chars:
                total -= len(messages[start].content)
                start += 1
        while start > 0 and messages[start].role == "tool":
            start -= 1
        return messages[start:]

    return _filter


def swarm(
    name: str,
    agents: Sequence[Agent[Any] | Handoff],
    *,
    max_handoffs: int = 3,
    transcript_turns: int | None = None,
    transcript_chars: int | None = None,
    description: str = "",
) -> Agent[Any]:
    """A swarm: ``agents`` hand the conversation to one another as peers.

    The first agent starts; whoever is active when a run ends is remembered by the session and
    continues the next run. After ``max_handoffs`` in one run, handoff tools are hidden and
    further transfers are refused, so the active agent must answer. With ``transcript_turns``
    or ``transcript_chars`` the receiving agent sees only that much of the conversation.
    Members are cloned with a peer transfer policy; run the returned agent. A member given as
    a :func:`~relayrace.handoffs.handoff` keeps its tool name, description, approval and
    input filter for the transfers to it.
    """
    if len(agents) < 2:
        raise UserError(f"swarm {name!r} needs at least two agents.")
    bounded = (bounded_transcript(turns=transcript_turns, chars=transcript_chars)
               if transcript_turns is not None or transcript_chars is not None else None)
    peers = TransferPolicy(to_peers=True)
    members = [
        replace(a, agent=a.agent.clone(transfer_policy=peers),
                input_filter=a.input_filter or bounded) if isinstance(a, Handoff)
        else Handoff(agent=a.clone(transfer_policy=peers), input_filter=bounded)
        for a in agents
    ]
    return Agent(name, instructions="", description=description, sub_agents=members,
                 pattern="swarm", max_handoffs=max_handoffs)


class RouteTool(Tool):
    """A tool that asks a team to route to ``target`` after the turn."""

    def __init__(self, target: str, *, name: str | None = None,
                 description: str | None = None) -> None:
        self.target = target
        self.routes_to = (target,)
        self.name = name or f"delegate_{target}"
        self.description = description or f"Hand the work to {target} after this turn."
        self.parameters = {"type": "object", "properties": {
            "reason": {"type": "string", "description": f"What {target} should do, and why."}}}

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        reason = parse_arguments(arguments, self.name, '{"reason": "..."}').get("reason", "")
        return TransferTo(self.target, reason if isinstance(reason, str) else str(reason))


def route_tool(target: str, *, name: str | None = None, description: str | None = None) -> Tool:
    """A tool returning ``TransferTo(target, reason)``: routing by tool, for a ``Team``."""
    return RouteTool(target, name=name, description=description)
