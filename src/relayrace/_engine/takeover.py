"""A person's turn: a human agent's turn stops the run for them, or takes their reply.

``Runner.resume(pending, reply=..., hand_back=...)`` binds the person's reply to the takeover
the session waits for (`bind_reply`); the human agent's next turn (`human_turn`) adds it to
the conversation as that agent's message, and hands the conversation back if asked to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agents.approvals import Interrupted, PendingRun, PendingTakeover
from ..core.events import HandoffEvent
from ..core.exceptions import UserError
from ..core.messages import Message
from .builders import new_message_event
from .turn import Answer, HandBack, TurnResult

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from .loop import AgentLoop

__all__ = ["Reply", "bind_reply", "human_turn"]


@dataclass(slots=True, frozen=True)
class Reply:
    """A person's reply to the takeover ``session_id`` waits for."""

    session_id: str
    text: str
    """What the person says ("" for nothing)."""
    hand_back: str
    """The agent the person hands the conversation back to ("" to keep it)."""


def bind_reply(waiting: PendingRun | None, given_for: PendingRun | None, entry: Agent[Any],
               reply: str | None, hand_back: str | bool) -> Reply | None:
    """``reply`` and ``hand_back`` checked against the takeover the session waits for
    (``waiting``); ``None`` when the person gave neither. A mistake raises ``UserError``
    before anything is written."""
    if reply is None and hand_back is False:
        return None
    if reply is not None and (type(reply) is not str or not reply.strip()):
        raise UserError(f"A reply is the person's message, non-empty text; got {reply!r}.")
    if not isinstance(hand_back, str | bool):
        raise UserError(f"hand_back names the agent to hand the conversation back to, or is "
                        f"True for the agent that transferred; got {hand_back!r}.")
    takeover = waiting.takeover if waiting is not None else None
    if takeover is None:
        raise UserError("No person holds this conversation, so there is nothing to reply to: "
                        "reply= and hand_back= answer a pending human takeover "
                        "(PendingRun.takeover).")
    if given_for is not None and given_for.takeover not in (None, takeover):
        raise UserError(f"Session {takeover.session_id!r} no longer waits for the reply this "
                        "pending run asks for: it was resumed since. Reply to what it waits "
                        "for now: PendingRun.from_session(session, entry=agent).")
    target = ""
    if hand_back is True:
        target = takeover.from_agent
        if not target:
            raise UserError(f"No agent transferred to {takeover.agent!r}, so hand_back=True "
                            "has nowhere to go; name the agent: hand_back='name'.")
    elif isinstance(hand_back, str):
        found = entry.find_agent(hand_back)
        if found is None or found.is_human or not found.handoff_target:
            names = ", ".join(a.name for a in entry.root.walk()
                              if not a.is_human and a.handoff_target)
            raise UserError(f"hand_back={hand_back!r} is not an agent of the team the "
                            f"conversation can go to; agents: {names}.")
        target = hand_back
    return Reply(takeover.session_id, reply or "", target)


async def human_turn(loop: AgentLoop, agent: Agent[Any]) -> TurnResult:
    """``agent``'s turn, taken by a person: their reply if the run was resumed with one, else
    the run stops for them (``Interrupted``), with no model call."""
    session = loop.log.session
    decisions = loop.state.approvals
    given = decisions.take_reply(session.session_id) if decisions is not None else None
    if given is None:
        # The transfer that brought the person in: made in this run (a team's route is not
        # written yet), or in an earlier one (the log's).
        handoff = next((e for e in reversed(loop.log.new_events)
                        if type(e) is HandoffEvent and e.to_agent == agent.name
                        and not e.is_return), None) or (await session.view()).handoff
        came_from = handoff.agent if handoff is not None and handoff.to_agent == agent.name \
            else ""
        stop = PendingTakeover(agent=agent.name, path=loop.path(agent),
                               session_id=session.session_id, from_agent=came_from,
                               requested_at=time.time())
        loop.log.add(stop.event(here=True))
        raise Interrupted([stop])
    message = None
    if given.text:
        message = Message.assistant(given.text, name=agent.name)
        loop.push(message)
        loop.log.add(new_message_event(agent.name, loop.path(agent), message))
    if given.hand_back:
        target = loop.place.entry.find_agent(given.hand_back)
        assert target is not None  # checked by bind_reply
        return TurnResult(message, HandBack(target, given.text))
    return TurnResult(message, Answer(given.text))
