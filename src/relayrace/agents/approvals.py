"""Pausing for a person: a run that stops for approvals or answers, as serializable state.

A tool call that needs approval and a tool that asks a question (``RunContext.ask_user``, the
``ask_user`` tool) stop the run the same way: the request is logged, the run ends
``interrupted``, and ``Runner.resume`` continues at the same call with the person's decision
or answer. A request made inside a delegated child surfaces on the outer run, with its path.
A handoff to a ``human(...)`` agent stops the run the same way, until the person replies
(``Runner.resume(pending, reply=...)``) or hands the conversation back.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from ..core.events import (
    ApprovalRequestedEvent,
    HumanTakeoverEvent,
    QuestionAskedEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ..core.exceptions import UserError
from .pending import (
    Interrupted,
    Pending,
    PendingApproval,
    PendingQuestion,
    PendingTakeover,
    UserQuestion,
)

if TYPE_CHECKING:
    from ..core.usage import UsageLimits
    from ..models.interface import Model
    from ..sessions import Session
    from .agent import Agent

# The requests themselves live in .pending (below the agent); they are named here too, where
# callers have always imported them.
__all__ = ["Interrupted", "Pending", "PendingApproval", "PendingQuestion", "PendingRun",
           "PendingTakeover", "StoppedWith", "UserQuestion"]


class StoppedWith(TypedDict, total=False):
    """The settings a stopped run was started with, which ``Runner.resume`` reuses where it
    is not given them again (in the process the run stopped in)."""

    context: Any
    max_turns: int | None
    max_handoffs: int | None
    model: Model | str | None
    usage_limits: UsageLimits | None
    user_id: str | None


@dataclass(slots=True, kw_only=True)
class PendingRun:
    """A run stopped for a person (approvals, questions, a human takeover). ``to_json`` it,
    and ``Runner.resume`` it later."""

    session_id: str
    """The top-level session to resume."""
    agent: str
    """The agent (team entry) the run was started with."""
    approvals: list[PendingApproval] = field(default_factory=list)
    """What awaits a decision."""
    questions: list[PendingQuestion] = field(default_factory=list)
    """What awaits an answer."""
    takeover: PendingTakeover | None = None
    """Set when a person holds the conversation: the run waits for their reply or hand-back
    (``Runner.resume(pending, reply=..., hand_back=...)``)."""
    entry: Agent[Any] | None = None
    """The entry agent, when the run is resumed in the same process."""
    session: Session | None = None
    """The session object, when the run is resumed in the same process."""
    options: StoppedWith = field(default_factory=lambda: StoppedWith())
    """The stopped run's settings (context, limits, ...), reused by ``Runner.resume``."""

    def to_json(self) -> str:
        """The state as JSON (without the live agent and session objects)."""
        return json.dumps({"session_id": self.session_id, "agent": self.agent,
                           "approvals": [asdict(a) for a in self.approvals],
                           "questions": [asdict(q) for q in self.questions],
                           "takeover": None if self.takeover is None else
                           asdict(self.takeover)})

    @classmethod
    def of(cls, pending: list[Pending], **fields: Any) -> PendingRun:
        """The run waiting for ``pending``, approvals, questions and a takeover apart."""
        return cls(approvals=[p for p in pending if isinstance(p, PendingApproval)],
                   questions=[p for p in pending if isinstance(p, PendingQuestion)],
                   takeover=next((p for p in pending if isinstance(p, PendingTakeover)), None),
                   **fields)

    @classmethod
    async def from_session(cls, session: Session, *, entry: Agent[Any]) -> PendingRun | None:
        """What a session's last run stopped for, or ``None`` if it did not stop."""

        events = await session.get_events()
        end = next((i for i in range(len(events) - 1, -1, -1)
                    if isinstance(events[i], RunFinishedEvent)), None)
        last = events[end] if end is not None else None
        if last is None or last.status != "interrupted":  # type: ignore[attr-defined]
            return None
        # The requests of the run that stopped (a resume that crashed after it ended nothing).
        start = max(i for i, e in enumerate(events[:end]) if isinstance(e, RunStartedEvent))
        pending: list[Pending] = []
        for e in events[start:end]:
            if isinstance(e, ApprovalRequestedEvent):
                pending.append(PendingApproval(
                    call_id=e.tool_call_id, tool_name=e.tool_name, arguments=e.arguments,
                    agent=e.agent, path=e.path, session_id=e.session_id or session.session_id,
                    requested_at=e.time, note=e.note))
            elif isinstance(e, QuestionAskedEvent):
                pending.append(PendingQuestion(
                    id=e.question_id, question=e.question, choices=e.choices,
                    call_id=e.tool_call_id, tool_name=e.tool_name, arguments=e.arguments,
                    agent=e.agent, path=e.path, session_id=e.session_id or session.session_id,
                    asked_at=e.time, answered=list(e.answered)))
            elif isinstance(e, HumanTakeoverEvent):
                pending.append(PendingTakeover(
                    agent=e.agent, path=e.path, session_id=e.session_id or session.session_id,
                    from_agent=e.from_agent, requested_at=e.time))
        return cls.of(pending, session_id=session.session_id, agent=entry.name, entry=entry,
                      session=session)

    @classmethod
    def from_json(cls, text: str, *, entry: Agent[Any], session: Session) -> PendingRun:
        """State written by ``to_json``, bound to the ``entry`` agent and ``session`` again."""
        try:
            data = json.loads(text)
            approvals = [PendingApproval(**a) for a in data["approvals"]]
            questions = [PendingQuestion(**q) for q in data.get("questions", [])]
            takeover = data.get("takeover")
            state = cls(session_id=data["session_id"], agent=data["agent"], approvals=approvals,
                        questions=questions,
                        takeover=None if takeover is None else PendingTakeover(**takeover))
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"Not a pending run's JSON: {exc}") from exc
        if session.session_id != state.session_id:
            raise UserError(f"The pending run belongs to session {state.session_id!r}, "
                            f"not {session.session_id!r}.")
        state.entry, state.session = entry, session
        return state
