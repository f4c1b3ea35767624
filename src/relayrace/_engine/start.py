"""Where a run starts: the session's log read into the loop, and the agent that takes the
turn (the one the log left active, the member a team starts at, or, for a new user turn, the
agent the last one hands back to)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.events import HandoffEvent
from ..core.exceptions import UserError

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.handoffs import Handoff
    from ..core.events import RunFinishedEvent
    from ..core.messages import Message
    from ..sessions.base import LogView
    from .pieces import Pieces

__all__ = ["start"]


def start(pieces: Pieces, log: LogView, input: str | Sequence[Message] | None,
          start_agent: Agent[Any] | None) -> Agent[Any]:
    """Read ``log`` into the loop's pieces (the conversation, compactions, returns owed, calls
    a crash left unknown) and return the agent the run starts with (``start_agent`` if
    given)."""
    views = pieces.views
    views.transcript.extend(log.messages)
    views.run_start = len(views.transcript)
    if log.archives:
        views.compactions, views.archives = dict(log.compactions), log.archives
    if input is None and not pieces.views.transcript:
        raise UserError(f"Session {pieces.log.session.session_id!r} holds no conversation to "
                        "resume; give the run an input.")
    if log.returns:
        pieces.transfers.resume(log.returns)
    if log.started:  # a crash left these calls' outcomes unknown
        pieces.calls.resume(log.started, log.asked)
    agent = start_agent or _active(pieces, log.active)
    entry = pieces.place.entry
    back = _hands_back(pieces, agent, log.ended) if input is not None and \
        start_agent is None else None
    if back is not None:  # a new user turn: the agent that ended the last one hands back
        _hand_back(pieces, agent, back)
        agent = back
    if entry.is_composite and start_agent is not entry:
        from ..teams.team import Team

        if isinstance(entry, Team):
            # The team starts at the member named, and its rules apply; resumed with no
            # input, at the member that was to speak next (it stopped at max_turns).
            member = start_agent
            if member is None and input is None and log.active not in (None, entry.name):
                member = entry.find_agent(log.active)
            if member is not None and member is not entry:
                pieces.scope.start_at(member)
                agent = entry
    if log.handoff is not None and log.handoff.to_agent == agent.name:
        pieces.views.remember(_filter_of(pieces, log.handoff.agent, agent))
        if log.handoff.context is not None:  # what the transfer's context_transform made
            pieces.transfers.given = (agent.name, log.handoff.context)
    return agent


def _hands_back(pieces: Pieces, agent: Agent[Any],
                ended: RunFinishedEvent | None) -> Agent[Any] | None:
    """Who starts a new user turn instead of ``agent``, which held the conversation when
    the last run completed (however it answered: in text or through a tool's ``Finish``).

    A workflow or single-turn target a ``Finish`` stopped gives it back to the agent that
    transferred; a chat agent that can transfer nowhere, to its parent (unless sticky). A
    ``task`` agent keeps it until ``finish_task``: its text asks the user. ``None``:
    ``agent`` keeps it (or the last run did not complete).
    """
    entry = pieces.place.entry
    if ended is None or ended.status != "completed" or agent is entry or \
            entry.is_composite:
        return None
    if agent.is_composite or agent.mode == "single_turn":
        return pieces.caller()
    parent = agent.parent
    if parent is None or agent.sticky or agent.mode != "chat" or agent.handoffs or \
            ended.agent != agent.name:
        return None
    policy = agent.transfer_policy
    if policy.to_parent or policy.to_peers or parent.is_composite:
        return None
    return parent

def _hand_back(pieces: Pieces, agent: Agent[Any], back: Agent[Any]) -> None:
    """Log that a new user turn starts with ``back`` rather than ``agent``."""
    if back.name in pieces.transfers.returns:  # a return owed since the transfer
        pieces.returned(agent, back, "the new user turn starts with the agent that "
                                  "transferred")
        return
    pieces.log.add(HandoffEvent(
        agent=agent.name, path=pieces.path(agent), to_agent=back.name,
        reason=f"{agent.name} can transfer to no agent, so the new turn starts with "
               f"{back.name} (make it sticky=True to keep the conversation)"))

def _filter_of(pieces: Pieces, source: str, target: Agent[Any]) -> Handoff | None:
    """``source``'s handoff to ``target``, if it has an input filter."""
    agent = pieces.place.entry.find_agent(source)
    if agent is None:
        return None
    h = pieces.toolset(agent).handoffs.by_agent.get(target.name)
    return h if h is not None and h.input_filter is not None else None

def _active(pieces: Pieces, name: str | None) -> Agent[Any]:
    entry = pieces.place.entry
    if entry.is_composite:
        return entry
    if name is not None and name != entry.name:
        found = entry.find_agent(name)
        if found is not None:
            return found
    if entry.pattern == "swarm":
        return entry.sub_agents[0]
    return entry
