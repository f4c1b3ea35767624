"""`Memory`: an agent's own conversational memory across the sessions of one user.

An agent with ``memory=Memory(...)`` remembers, at the end of each run it spoke in, that run's
turn, in a log of its own kept in the same store as the conversation (``Session.open``), at
the session id ``"<user>::<agent path>"``: ``user`` is ``Runner.run(user_id=...)``, else the
top-level session's id (Astromesh's ``session::agent`` namespaces); a delegated child's path
names its parents (``coordinator/researcher``). A later run, in any session of that user,
shows the agent what it remembers from its other sessions, before the conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..core.events import AgentEvent, ContextCompactedEvent, MemoryEvent
from ..core.exceptions import UserError
from ..core.messages import NOTE, Message
from ..models.interface import Model
from .compression import render_messages

__all__ = ["RECALL_MESSAGE_CHARS", "Memory", "MemoryStrategy", "memory_session_id",
           "memory_state", "recall"]

MemoryStrategy = Literal["sliding_window", "summary"]

RECALL_MESSAGE_CHARS = 2000
"""The most characters of one remembered message an agent is shown (the log keeps it all)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory:
    """How an agent remembers its earlier conversations with a user.

    ``sliding_window`` shows the last ``max_turns`` turns; ``summary`` shows a summary of the
    older turns and the recent ones (at most ``2 * max_turns``): once more than that many
    wait, the older ones are folded into the summary by ``summary_model`` (default: the
    agent's model). ``store="transcript"`` remembers the run's user and assistant messages
    (without tool calls); ``"request"`` only the run's request and this agent's answer, as an
    Astromesh swarm target does.
    """

    strategy: MemoryStrategy = "sliding_window"
    """``sliding_window`` or ``summary``."""
    max_turns: int = 20
    """Turns shown (``sliding_window``), or kept verbatim beside the summary (``summary``)."""
    store: Literal["transcript", "request"] = "transcript"
    """What a turn remembers: the run's conversation, or its request and the agent's answer."""
    summary_model: Model | str | None = None
    """The model of the ``summary`` strategy; ``None``: the agent's own."""

    def __post_init__(self) -> None:
        if self.strategy not in ("sliding_window", "summary"):
            raise UserError(f"Memory(strategy={self.strategy!r}): use 'sliding_window' or "
                            "'summary'.")
        if isinstance(self.max_turns, bool) or not isinstance(self.max_turns, int) \
                or self.max_turns < 1:
            raise UserError(f"Memory(max_turns={self.max_turns!r}): give the number of turns "
                            "to keep, an integer of at least 1.")
        if self.store not in ("transcript", "request"):
            raise UserError(f"Memory(store={self.store!r}): use 'transcript' or 'request'.")
        if self.summary_model is not None and not isinstance(self.summary_model, Model | str):
            raise UserError(f"Memory(summary_model={self.summary_model!r}): give a Model or a "
                            "'provider:model' string, or None for the agent's model.")


def memory_session_id(owner: str, path: str) -> str:
    """The id of the log holding the memory of the agent at ``path`` for ``owner``."""
    return f"{owner}::{path}"


def _state(events: Sequence[AgentEvent]) -> tuple[list[MemoryEvent], ContextCompactedEvent | None]:
    turns = [e for e in events if isinstance(e, MemoryEvent)]
    last = None
    for e in events:
        if isinstance(e, ContextCompactedEvent):
            last = e
    return turns, last


def memory_state(memory: Memory, events: Sequence[AgentEvent]
            ) -> tuple[list[MemoryEvent], ContextCompactedEvent | None, int]:
    """The turns of a memory log, its latest summary, and where the turns it holds verbatim
    begin."""
    turns, summary = _state(events)
    start = summary.end if summary is not None and memory.strategy == "summary" else 0
    return turns, summary, start


def recall(memory: Memory, events: Sequence[AgentEvent], session_id: str) -> Message | None:
    """What the agent is shown of its memory log ``events`` in session ``session_id`` (whose
    own turns it sees in the conversation itself): a note, or ``None`` if nothing."""
    turns, summary, start = memory_state(memory, events)
    if memory.strategy == "sliding_window":
        shown = [t for t in turns if t.session_id != session_id][-memory.max_turns:]
        text = ""
    else:
        shown = [t for t in turns[start:] if t.session_id != session_id][-2 * memory.max_turns:]
        text = summary.summary if summary is not None else ""
    if not shown and not text:
        return None
    parts = ["[Your memory of earlier conversations with this user, oldest first.]"]
    if text:
        parts.append(f"Summary of the older ones: {text}")
    parts.extend(render_messages(t.messages, limit=RECALL_MESSAGE_CHARS) for t in shown)
    return Message("user", "\n\n".join(parts), name=NOTE)
