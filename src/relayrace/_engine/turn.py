"""One model turn as a value: what the model said and what happens next.

``AgentLoop.take_turn`` produces a `TurnResult`; ``AgentLoop.turns_of`` is a dispatcher over
its ``next``. Every tool call of the turn is answered (and logged) before the result is made,
whatever comes next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..core.messages import Message
    from .toolexec import Route

__all__ = ["RUN_AGAIN", "Answer", "Blocked", "Finished", "HandBack", "Move", "Next", "RunAgain",
           "TeamRoute", "TurnResult", "Yield"]


@dataclass(slots=True)
class Answer:
    """The model answered with text and no tool call: the agent's turns end with it."""

    text: str


@dataclass(slots=True)
class RunAgain:
    """The turn's tool calls were answered; the same agent takes another turn."""


@dataclass(slots=True)
class Move:
    """Control moves: a transfer, or a task agent's return to its caller (``route``)."""

    route: Route


@dataclass(slots=True)
class Yield:
    """A ``single_turn`` agent answered and hands control back to ``caller``."""

    caller: Agent[Any]


@dataclass(slots=True)
class Finished:
    """A tool returned ``Finish``: the run ends with ``text``."""

    text: str
    route: Route


@dataclass(slots=True)
class TeamRoute:
    """In a team, a tool's ``TransferTo``: the turn ends for the team to route."""

    route: Route


@dataclass(slots=True)
class Blocked:
    """A guardrail blocked: the run ends with ``answer``."""

    answer: str


@dataclass(slots=True)
class HandBack:
    """A person hands the conversation back to ``target``: it answers now, or (the person
    replied, ``text``) at the user's next turn."""

    target: Agent[Any]
    text: str


Next = Answer | RunAgain | Move | Yield | Finished | TeamRoute | Blocked | HandBack
"""What happens after a turn (a value, never changed once made)."""

RUN_AGAIN = RunAgain()
"""The one `RunAgain`: it carries nothing."""


@dataclass(slots=True)
class TurnResult:
    """One turn: the assistant message (``None`` when the turn ran calls left pending by an
    earlier run), and what happens next."""

    message: Message | None
    next: Next
