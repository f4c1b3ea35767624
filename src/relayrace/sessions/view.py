"""`LogView`: what a run needs from a session's log, folded from its events one by one."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.events import (
    AgentEvent,
    ApprovalRequestedEvent,
    ContextCompactedEvent,
    HandoffEvent,
    MessageEvent,
    QuestionAskedEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolResultEvent,
    ToolStartedEvent,
)
from ..core.messages import Message

__all__ = ["LogView"]


class LogView:
    """What a run needs from a log, kept up to date event by event (never rebuilt).

    Continuing a long conversation costs the same as continuing a short one. A turn's tool
    results are logged as each call finishes, so in the order they finished; the view puts
    them in the order of their calls, as the run that made them did.
    """

    __slots__ = ("_order", "active", "archives", "asked", "compactions", "ended", "handoff",
                 "messages", "returns", "run_id", "size", "started")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        """The conversation: every message and tool result, in order."""
        self.active: str | None = None
        """The agent that held the conversation when the log ends."""
        self.returns: list[str] = []
        """Callers that ``task``/``single_turn`` agents owe a return to, innermost last."""
        self.handoff: HandoffEvent | None = None
        """The transfer that made ``active`` the active agent (``None`` if no transfer did)."""
        self.started: dict[str, ToolStartedEvent] = {}
        """Calls of the last turn that started and have no result yet, by call id."""
        self.asked: set[str] = set()
        """Of ``started``, the calls that stopped for a person after they started: asked to be
        approved again, or asking a question (not of unknown outcome, then)."""
        self.compactions: dict[str, ContextCompactedEvent] = {}
        """Per agent: its latest compression summary (what it sees in place of the oldest
        messages)."""
        self.archives = 0
        """How many archives the log holds (compression summaries)."""
        self.size = 0
        """How many events have been folded in (a store compares it with its own count)."""
        self.run_id = ""
        """The durable run id of the last run that started (``""``: not a durable run)."""
        self.ended: RunFinishedEvent | None = None
        """How the last run that started ended (``None``: it did not, or none started)."""
        # The last turn's calls: their positions, and where its results begin in messages.
        self._order: tuple[dict[str, int], int] | None = None

    def copy(self) -> LogView:
        """A view of the same log that folds on without changing this one (the messages and
        events are shared: neither is ever changed in place)."""
        made = LogView()
        made.messages, made.returns = list(self.messages), list(self.returns)
        made.started, made.asked = dict(self.started), set(self.asked)
        made.compactions = dict(self.compactions)
        made.active, made.handoff, made.archives = self.active, self.handoff, self.archives
        made.size, made.run_id, made.ended = self.size, self.run_id, self.ended
        made._order = self._order  # replaced, never changed, by fold
        return made

    def fold(self, events: Sequence[AgentEvent]) -> None:
        """Take ``events`` (appended after the ones already folded) into account."""
        messages, returns = self.messages, self.returns
        for e in events:
            kind = type(e)
            if kind is MessageEvent:
                message: Message = e.message  # type: ignore[attr-defined]
                messages.append(message)
                if message.tool_calls:
                    self._order = ({c.id: i for i, c in enumerate(message.tool_calls)},
                                   len(messages))
                    self.started, self.asked = {}, set()
                else:
                    self._order = None
            elif kind is ToolResultEvent:
                self._place(e.message)  # type: ignore[attr-defined]
            elif kind is RunStartedEvent:  # every run's start and end: checked early
                self.run_id, self.ended = e.run_id, None  # type: ignore[attr-defined]
                if e.agent != self.active:
                    self.active, self.handoff = e.agent, None
            elif kind is RunFinishedEvent:
                self.ended = e  # type: ignore[assignment]
            elif kind is ToolStartedEvent:
                self.started[e.tool_call_id] = e  # type: ignore[attr-defined,assignment]
                self.asked.discard(e.tool_call_id)  # type: ignore[attr-defined]
            elif kind is ApprovalRequestedEvent or kind is QuestionAskedEvent:
                if not e.session_id and e.tool_call_id in self.started:  # type: ignore[attr-defined]
                    self.asked.add(e.tool_call_id)  # type: ignore[attr-defined]
            elif kind is HandoffEvent:
                self.active = e.to_agent  # type: ignore[attr-defined]
                self.handoff = None if e.is_return else e  # type: ignore[attr-defined,assignment]
                if e.is_return:  # type: ignore[attr-defined]
                    if returns:
                        returns.pop()
                elif e.returns_to:  # type: ignore[attr-defined]
                    returns.append(e.returns_to)  # type: ignore[attr-defined]
            elif kind is ContextCompactedEvent:
                self.compactions[e.agent] = e  # type: ignore[assignment]
                self.archives += 1
        self.size += len(events)

    def _place(self, result: Message) -> None:
        """Add a tool result after the results of the calls made before its own."""
        messages = self.messages
        call_id = result.tool_call_id or ""
        self.started.pop(call_id, None)
        self.asked.discard(call_id)
        order = self._order
        position = order[0].get(call_id) if order is not None else None
        if position is None:  # not a call of the last turn: as logged
            messages.append(result)
            return
        assert order is not None
        index, start = order
        at = len(messages)
        while at > start and index.get(messages[at - 1].tool_call_id or "", -1) > position:
            at -= 1
        messages.insert(at, result)
