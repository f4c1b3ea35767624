"""What a tool may return to steer the run: `TransferTo` (who speaks next) and `Finish` (end the
run or the innermost loop). Data only; the engine acts on them, and ``relayrace.teams.routing``
(where a `Team`'s rules meet them) names them too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..core.exceptions import UserError

__all__ = ["Finish", "TransferTo"]


@dataclass(slots=True, frozen=True)
class TransferTo:
    """Return this from a tool to route to ``target`` (an agent name) after the turn."""

    target: str
    """The agent that speaks next."""
    reason: str = ""
    """Why, shown to the next speaker."""


@dataclass(slots=True, frozen=True)
class Finish:
    """Return this from a tool to end the run with ``summary`` as the final answer.

    ``scope="loop"`` (ADK's ``escalate``) ends only the innermost ``LoopAgent`` the tool's
    agent runs in: control goes on after the loop, and the run continues. Outside any loop it
    ends the agent's turn, like an answer.
    """

    reason: str = "finished"
    """Why the run (or the loop) ends."""
    summary: str = ""
    """The final answer (default: the speaker's last text)."""
    scope: Literal["run", "loop"] = "run"
    """What ends: the whole run, or the innermost loop."""

    def __post_init__(self) -> None:
        if self.scope not in ("run", "loop"):
            raise UserError(f"Finish(scope={self.scope!r}): scope is 'run' (end the run) or "
                            "'loop' (leave the innermost LoopAgent).")
