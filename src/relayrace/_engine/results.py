"""The results of one turn's tool calls: `Batch`, the one place they are written.

Every call of a turn gets exactly one result, in call order. A result is kept the moment it is
known (a refusal when the plan is read, a tool's when it completes, a move's when it is
decided), so a timeout, a cancellation or an error never turns a call that ran into one marked
"not executed": the run's end logs what is kept in the calls' places (``hold``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..core.events import ToolResultEvent
    from ..core.messages import Message, ToolCall
    from .pieces import Pieces

__all__ = ["Batch"]


class Batch:
    """The results of ``agent``'s ``calls``, by call index, until they are pushed."""

    __slots__ = ("agent", "calls", "pieces", "results")

    def __init__(self, pieces: Pieces, agent: Agent[Any], calls: Sequence[ToolCall]) -> None:
        self.pieces = pieces
        self.agent = agent
        self.calls = calls
        self.results: list[ToolResultEvent | None] = [None] * len(calls)

    def answer(self, index: int, text: str, *, is_error: bool = False,
               tb: str | None = None) -> ToolResultEvent:
        """Answer the call at ``index`` with ``text`` (replacing what it had)."""
        ev = self.pieces.tool_result(self.agent, self.calls[index], text, is_error=is_error,
                                     tb=tb)
        self.results[index] = ev
        return ev

    def keep(self, index: int, ev: ToolResultEvent) -> None:
        """The result a tool's call came to."""
        self.results[index] = ev

    def messages(self) -> list[Message]:
        """The results kept so far, as the conversation will show them, in call order."""
        return [ev.message for ev in self.results if ev is not None]

    def push(self) -> None:
        """Add the results kept so far to the conversation, in call order; each once.

        A result recorded when its call finished (persistent logs) is not recorded again.
        """
        log = self.pieces.log
        push, add, logged = self.pieces.views.push, log.add, log.logged
        results = self.results
        for i, ev in enumerate(results):
            if ev is not None:
                push(ev.message)
                if logged and id(ev) in logged:
                    logged.discard(id(ev))
                else:
                    add(ev)
                results[i] = None

    def hold(self) -> None:
        """The run ends with the batch open: its end logs the results kept in their calls'
        places (``Pieces.answer_dangling``)."""
        self.pieces.hold(self.results)
