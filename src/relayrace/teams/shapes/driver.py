"""What a shape run in the run's own session asks of the engine (`Driver`), how a team
member's turn ended (`SpeakerTurn`), and `Composite`, the base of every agent made of agents.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ...agents.agent import Agent
from ...core.exceptions import UserError
from ...core.messages import Message, ToolCall
from ..routing import Finish, TransferTo
from .options import Shape

if TYPE_CHECKING:
    from ...agents.context import RunContext
    from ...agents.guardrails import Guardrail
    from ...tracing import Span

__all__ = ["Composite", "Driver", "SpeakerTurn"]


@dataclass(slots=True, frozen=True)
class SpeakerTurn:
    """How one team member's turn ended (``Driver.speak``)."""

    final: str
    """Its last text."""
    last: Agent[Any]
    """The agent that gave it (a transfer may have moved on from the member)."""
    signal: TransferTo | Finish | None
    """A tool's typed routing request, if one was made."""
    called: frozenset[str]
    """The tools called during the turn, for routing rules."""


class Driver(Protocol):
    """What workflow agents and teams ask of the engine while they run their members.

    The engine implements it; a composite agent changes run state only through it.
    """

    @property
    def transcript(self) -> Sequence[Message]:
        """The session's conversation so far."""
        ...

    @property
    def resuming(self) -> bool:
        """Whether the run continues an interrupted one (``input=None``)."""
        ...

    @property
    def stopped(self) -> bool:
        """Whether the run must end now (a ``Finish``, or a guardrail's block)."""
        ...

    @property
    def blocked(self) -> str | None:
        """A guardrail's answer that ended the run, if one did."""
        ...

    @property
    def context(self) -> Any:
        """The run's context object."""
        ...

    def path(self, agent: Agent[Any]) -> str:
        """The delegation path of ``agent`` in this run."""
        ...

    async def drive(self, agent: Agent[Any], span: Span,
                    pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        """Run ``agent`` (or a workflow) to a final answer: (text, last agent, reason)."""
        ...

    async def speak(self, agent: Agent[Any], span: Span,
                    pending: list[ToolCall]) -> SpeakerTurn:
        """Run one team member's turn; a typed ``TransferTo`` ends it for the team to route."""
        ...

    def note(self, agent: Agent[Any], text: str) -> None:
        """Add a framework note to the conversation."""
        ...

    def say(self, agent: Agent[Any], text: str) -> None:
        """Add ``agent``'s answer to the conversation."""
        ...

    def route(self, speaker: Agent[Any], to: Agent[Any], why: str) -> None:
        """Record that a team passes the conversation from ``speaker`` to ``to``."""
        ...

    def finish(self) -> None:
        """End the run after this member (a tool returned ``Finish``)."""
        ...

    def loop_scope(self) -> AbstractContextManager[None]:
        """While a ``LoopAgent`` runs: a step's ``Finish(scope="loop")`` ends it, only it."""
        ...

    @property
    def leaving_loop(self) -> bool:
        """Whether a step left the innermost loop (``Finish(scope="loop")``)."""
        ...

    def team_scope(self, input_guardrails: tuple[Guardrail, ...],
                   output_guardrails: tuple[Guardrail, ...]) -> AbstractContextManager[None]:
        """Apply a team's guardrails to every member while the team runs."""
        ...

    def take_start_member(self) -> Agent[Any] | None:
        """The member ``start_agent`` named for this team's run, once."""
        ...

    def answer_dangling(self, agent: Agent[Any], why: str) -> None:
        """Give every unanswered tool call a result, so the session stays valid."""
        ...

    def context_for(self, agent: Agent[Any], *, span: Span | None = None) -> RunContext[Any]:
        """A run context for ``agent``."""
        ...


class Composite(Agent[Any], ABC):
    """An agent made of other agents; it calls no model itself."""

    is_composite = True
    handoff_target = False
    ends_turn = False
    """As a handoff target: whether its answer ends the run (see ``SequentialAgent``)."""
    shape: Shape
    """The shape it runs and the options it chose (docs/orchestration.md)."""

    def __init__(self, name: str, *, members: Sequence[Agent[Any]], description: str = "",
                 max_turns: int | None = None) -> None:
        if not members:
            raise UserError(f"{type(self).__name__} {name!r} needs at least one agent.")
        super().__init__(name, instructions="", description=description, sub_agents=members,
                         max_turns=max_turns)

    @abstractmethod
    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        """Run to a final answer: (text, last agent, reason the run ended, or "")."""


