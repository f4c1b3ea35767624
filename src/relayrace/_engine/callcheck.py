"""A call checked against the turn's offer: the handoff a transfer call asks for (or what
was wrong with it), and what the model is told of a call the turn did not offer."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..agents.handoffs import SINGLE_TOOL_NAME, Handoff, sanitize_tool_name
from ..agents.tools import ToolRetry, parse_arguments

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..core.messages import ToolCall
    from .offer import Offer

__all__ = ["argument", "forbidden", "parse_handoff", "refusal"]


def refusal(agent: Agent[Any], name: str, offer: Offer) -> str:
    """Why the call of ``name`` is not performed, and what ``agent`` may call instead."""
    ts = offer.toolset
    offered = sorted(d.name for d in ts.definitions)
    rule = ts.permissions.refusal(name) if ts.permissions is not None else None
    if rule is not None:  # offered or not, known or not: the rule answers
        return (f"Not performed: {agent.name} is not permitted to call {name!r}: {rule} "
                f"(its permissions). Tools you can call: {', '.join(offered) or 'none'}.")
    if name in ts.refused:
        return (f"Tool {name!r} is not available to {agent.name}: as a supervisor it may "
                f"only call its workers: {', '.join(offered) or 'none'}.")
    if name == SINGLE_TOOL_NAME and not ts.handoffs.by_agent:
        return (f"Not performed: {agent.name} may not transfer the conversation to any agent; "
                "answer the user yourself.")
    if offer.refuse_handoffs and name in ts.handoffs.by_tool:
        return (f"Not performed: {name} is not available any more; this run has used its "
                "handoffs. Answer the user yourself.")
    if name.startswith("transfer_to_"):
        wanted = name.removeprefix("transfer_to_")
        # The tool name holds the agent's name sanitized ("Billing Team" -> Billing_Team).
        target = agent.find_agent(wanted) or next(
            (a for a in agent.root.walk() if sanitize_tool_name(a.name) == wanted), None)
        if target is not None:
            return forbidden(agent, target.name, offer)
    return f"Unknown tool {name!r}. Available tools: {', '.join(offered) or 'none'}."


def forbidden(agent: Agent[Any], target: str, offer: Offer) -> str:
    """Why ``agent`` may not transfer to ``target``, and the transfers it may make now."""
    handoffs = offer.toolset.handoffs
    enabled = offer.handoffs
    if not enabled:
        allowed = "none; answer the user yourself"
    elif handoffs.mode == "single":
        allowed = (f"{SINGLE_TOOL_NAME} with agent_name one of "
                   f"{', '.join(h.agent.name for h in enabled)}")
    else:
        allowed = ", ".join(n for n, h in handoffs.by_tool.items() if h in enabled)
    return (f"Transfer to {target!r} is not allowed from {agent.name!r}: an agent may "
            "transfer to its sub-agents, and to its parent or peers only if its transfer "
            f"policy allows. Transfers you can make now: {allowed}.")


def parse_handoff(
    agent: Agent[Any], call: ToolCall, offer: Offer
) -> tuple[Handoff | None, str, str | None, Any]:
    """The handoff a transfer call asks for, its reason and input (validated when the
    handoff has an ``input_type``); or what was wrong, for the model."""
    try:
        args = parse_arguments(call.arguments, call.name, '{"reason": "..."}')
    except ToolRetry as exc:
        return None, "", str(exc), None
    reason = args.get("reason")
    reason = reason.strip() if isinstance(reason, str) else ""
    handoffs = offer.toolset.handoffs
    if call.name == SINGLE_TOOL_NAME and handoffs.mode == "single":
        name = args.get("agent_name")
        valid = ", ".join(handoffs.by_agent)
        if not isinstance(name, str) or not name:
            return None, "", f"{SINGLE_TOOL_NAME} needs agent_name, one of: {valid}.", None
        h = handoffs.by_agent.get(name)
        if h is None:
            if agent.find_agent(name) is not None:
                return None, "", forbidden(agent, name, offer), None
            return None, "", f"Unknown agent {name!r}. You can transfer to: {valid}.", None
    else:
        h = handoffs.by_tool[call.name]
    assert h is not None
    if handoffs.dynamic and h not in offer.handoffs:  # its gate said no when offered
        return None, "", (f"The transfer to {h.agent.name} is not available right now; "
                          "continue without it."), None
    if h.input_type is None:
        return h, reason, None, None
    value, error = h.validate_input(args)
    return (None, "", error, None) if error is not None else (h, reason, None, value)


def argument(call: ToolCall, key: str) -> str:
    """The argument ``key`` of ``call`` as text (its raw arguments if they do not parse)."""
    try:
        value = parse_arguments(call.arguments, call.name).get(key, "")
    except ToolRetry:
        return call.arguments
    return value if isinstance(value, str) else json.dumps(value)
