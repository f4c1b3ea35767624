"""One vocabulary for what a call and a turn decide: frozen variants that carry their own data.

A tool call that asks to move control gives a `Route`: a transfer tool's `Transfer`, a task's
`Return` (``finish_task``), a tool's typed ``TransferTo`` (`RouteTo`; outside a team it becomes
a `Transfer` by name) or typed ``Finish`` (`End`). ``AgentLoop.take_turn`` makes a `TurnResult`
(the turn's message, and `Next`: what happens after it), and ``AgentLoop.turns_of`` a
dispatcher over it, ends with `Spoke`. Every tool call of a turn is answered (and logged)
before its result is made, whatever comes next. Each value is never changed once made; code
that reads one matches on its type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.handoffs import Handoff
    from ..core.messages import Message, ToolCall

__all__ = ["RUN_AGAIN", "Answer", "Blocked", "End", "Finished", "HandBack", "Next",
           "Return", "Route", "RouteTo", "RunAgain", "Spoke", "TeamRoute", "Transfer",
           "TurnResult", "Yield"]


# -- what a call asks for -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transfer:
    """A transfer to ``target``: through a transfer tool (``handoff``), or a tool's typed
    ``TransferTo`` outside a team (no ``handoff``: the tool ran, only its routing may be
    refused)."""

    kind: ClassVar[str] = "transfer"
    call: ToolCall
    """The call that asked for it."""
    target: Agent[Any]
    """The agent that takes over."""
    reason: str = ""
    handoff: Handoff | None = None
    """The handoff used, if a transfer tool asked."""
    input: Any = None
    """The validated value of a handoff with an ``input_type``."""
    view: list[Message] | None = None
    """What the target sees through the handoff's input filter (once confirmed)."""
    note: Message | None = None
    """The call's result, which the target keeps seeing beside a filter (once confirmed)."""
    context: dict[str, Any] | None = None
    """What the handoff's ``context_transform`` made: the target's template variables."""


@dataclass(frozen=True, slots=True)
class Return:
    """A task agent's ``finish_task``: control and ``summary`` go back to ``target``."""

    kind: ClassVar[str] = "return"
    call: ToolCall
    target: Agent[Any]
    summary: str = ""


@dataclass(frozen=True, slots=True)
class RouteTo:
    """A tool's typed ``TransferTo`` by agent name: in a team, the team routes after the
    turn."""

    kind: ClassVar[str] = "transfer_to"
    call: ToolCall
    name: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class End:
    """A tool's typed ``Finish``: the run ends (``scope="run"``) or the innermost loop."""

    kind: ClassVar[str] = "finish"
    call: ToolCall
    reason: str = ""
    summary: str = ""
    scope: Literal["run", "loop"] = "run"


Route = Transfer | Return | RouteTo | End
"""Where control goes after a turn's tool calls."""


# -- what happens after a turn --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """The model answered with text and no tool call: the agent's turns end with it."""

    text: str


@dataclass(frozen=True, slots=True)
class RunAgain:
    """The turn's tool calls were answered; the same agent takes another turn."""


@dataclass(frozen=True, slots=True)
class Yield:
    """A ``single_turn`` agent answered and hands control back to ``caller``."""

    caller: Agent[Any]


@dataclass(frozen=True, slots=True)
class Finished:
    """A tool returned ``Finish``: the run (or the innermost loop) ends with ``text``."""

    text: str
    route: End


@dataclass(frozen=True, slots=True)
class TeamRoute:
    """In a team, a tool's ``TransferTo``: the turn ends for the team to route."""

    route: RouteTo


@dataclass(frozen=True, slots=True)
class Blocked:
    """A guardrail blocked: the run ends with ``answer``."""

    answer: str


@dataclass(frozen=True, slots=True)
class HandBack:
    """A person hands the conversation back to ``target``: it answers now, or (the person
    replied, ``text``) at the user's next turn."""

    target: Agent[Any]
    text: str


Next = Answer | RunAgain | Transfer | Return | Yield | Finished | TeamRoute | Blocked | HandBack
"""What happens after a turn: a confirmed `Transfer` or `Return` moves control."""

RUN_AGAIN = RunAgain()
"""The one `RunAgain`: it carries nothing."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """One turn (``AgentLoop.take_turn``): its assistant message, and what happens next."""

    message: Message | None
    """The turn's answer (``None`` when the turn ran calls left pending by an earlier run)."""
    next: Next


@dataclass(frozen=True, slots=True)
class Spoke:
    """An agent's turns ended (``AgentLoop.turns_of``): its ``text``, the agent that spoke
    last, and the route that ended them, if a tool's ``Finish`` or (in a team) ``TransferTo``
    did."""

    text: str
    agent: Agent[Any]
    route: End | RouteTo | None = None
