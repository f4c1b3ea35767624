"""A person's turn: a human agent's turn stops the run for them, or takes their reply.

``Runner.resume(pending, reply=..., hand_back=...)`` binds the person's reply to the takeover
the session waits for (``decisions.bind_reply``); the human agent's next turn (`human_turn`)
adds it to the conversation as that agent's message, and hands the conversation back if asked
to.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..agents.approvals import Interrupted, PendingTakeover
from ..core.events import HandoffEvent, MessageEvent
from ..core.messages import Message
from .turn import Answer, HandBack, TurnResult

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from .pieces import Pieces

__all__ = ["human_turn"]


async def human_turn(pieces: Pieces, agent: Agent[Any]) -> TurnResult:
    """``agent``'s turn, taken by a person: their reply if the run was resumed with one, else
    the run stops for them (``Interrupted``), with no model call."""
    session = pieces.log.session
    decisions = pieces.state.approvals
    given = decisions.take_reply(session.session_id) if decisions is not None else None
    if given is None:
        # The transfer that brought the person in: made in this run (a team's route is not
        # written yet), or in an earlier one (the log's).
        handoff = next((e for e in reversed(pieces.log.new_events)
                        if type(e) is HandoffEvent and e.to_agent == agent.name
                        and not e.is_return), None) or (await session.view()).handoff
        came_from = handoff.agent if handoff is not None and handoff.to_agent == agent.name \
            else ""
        stop = PendingTakeover(agent=agent.name, path=pieces.path(agent),
                               session_id=session.session_id, from_agent=came_from,
                               requested_at=time.time())
        pieces.log.add(stop.event(here=True))
        raise Interrupted([stop])
    message = None
    if given.text:
        message = Message.assistant(given.text, name=agent.name)
        pieces.push(message)
        pieces.log.add(MessageEvent(agent=agent.name, path=pieces.path(agent), message=message))
    if given.hand_back:
        target = pieces.place.entry.find_agent(given.hand_back)
        assert target is not None  # checked by bind_reply
        return TurnResult(message, HandBack(target, given.text))
    return TurnResult(message, Answer(given.text))
