"""Human approval: a run that stops for a decision, as serializable state, and its resumption."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .exceptions import UserError

if TYPE_CHECKING:
    from .agent import Agent
    from .sessions import Session

__all__ = ["Interrupted", "PendingApproval", "PendingRun"]


@dataclass(slots=True, kw_only=True)
class PendingApproval:
    """One tool call or handoff waiting for a human decision."""

    call_id: str
    """The call's id: the key of ``approvals`` in ``Runner.resume``."""
    tool_name: str
    """The tool or handoff called."""
    arguments: str
    """The call's raw JSON arguments."""
    agent: str
    """The agent that made the call."""
    path: str
    """Its delegation path; a call inside a delegated child has a path with a ``/``."""
    session_id: str
    """The session holding the call (a child session for a delegated child)."""
    requested_at: float
    """When approval was asked (the ``ApprovalRequestedEvent``'s time): a decision answers
    this request only, so a later call with the same id asks again."""
    note: str = ""
    """What the person deciding must know: set when the call started before and a crash left
    its outcome unknown (running it again may repeat its effect)."""


class Interrupted(Exception):  # noqa: N818 - a control-flow signal, caught by the runner
    """The run stopped for human decisions on ``approvals``."""

    def __init__(self, approvals: list[PendingApproval]) -> None:
        super().__init__(f"{len(approvals)} call(s) await approval")
        self.approvals = approvals


@dataclass(slots=True, kw_only=True)
class PendingRun:
    """A run stopped for approvals. ``to_json`` it, and ``Runner.resume`` it later."""

    session_id: str
    """The top-level session to resume."""
    agent: str
    """The agent (team entry) the run was started with."""
    approvals: list[PendingApproval] = field(default_factory=list)
    """What awaits a decision."""
    entry: Agent[Any] | None = None
    """The entry agent, when the run is resumed in the same process."""
    session: Session | None = None
    """The session object, when the run is resumed in the same process."""
    options: dict[str, Any] = field(default_factory=dict)
    """The stopped run's settings (context, limits, ...), reused by ``Runner.resume``."""

    def to_json(self) -> str:
        """The state as JSON (without the live agent and session objects)."""
        return json.dumps({"session_id": self.session_id, "agent": self.agent,
                           "approvals": [asdict(a) for a in self.approvals]})

    @classmethod
    async def from_session(cls, session: Session, *, entry: Agent[Any]) -> PendingRun | None:
        """The approvals a session's last run stopped for, or ``None`` if it did not stop."""
        from .events import ApprovalRequestedEvent, RunFinishedEvent, RunStartedEvent

        events = await session.get_events()
        end = next((i for i in range(len(events) - 1, -1, -1)
                    if isinstance(events[i], RunFinishedEvent)), None)
        last = events[end] if end is not None else None
        if last is None or last.status != "interrupted":  # type: ignore[attr-defined]
            return None
        # The requests of the run that stopped (a resume that crashed after it ended nothing).
        start = max(i for i, e in enumerate(events[:end]) if isinstance(e, RunStartedEvent))
        approvals = [
            PendingApproval(call_id=e.tool_call_id, tool_name=e.tool_name,
                            arguments=e.arguments, agent=e.agent, path=e.path,
                            session_id=e.session_id or session.session_id,
                            requested_at=e.time, note=e.note)
            for e in events[start:end] if isinstance(e, ApprovalRequestedEvent)
        ]
        return cls(session_id=session.session_id, agent=entry.name, approvals=approvals,
                   entry=entry, session=session)

    @classmethod
    def from_json(cls, text: str, *, entry: Agent[Any], session: Session) -> PendingRun:
        """State written by ``to_json``, bound to the ``entry`` agent and ``session`` again."""
        try:
            data = json.loads(text)
            approvals = [PendingApproval(**a) for a in data["approvals"]]
            state = cls(session_id=data["session_id"], agent=data["agent"], approvals=approvals)
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"Not a pending run's JSON: {exc}") from exc
        if session.session_id != state.session_id:
            raise UserError(f"The pending run belongs to session {state.session_id!r}, "
                            f"not {session.session_id!r}.")
        state.entry, state.session = entry, session
        return state
