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
from typing import TYPE_CHECKING, Any

from ..core.events import (
    AgentEvent,
    ApprovalRequestedEvent,
    HumanTakeoverEvent,
    QuestionAskedEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ..core.exceptions import AnswerError, UserError

if TYPE_CHECKING:
    from ..sessions import Session
    from .agent import Agent

__all__ = ["Interrupted", "PendingApproval", "PendingQuestion", "PendingRun", "PendingTakeover",
           "UserQuestion"]


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

    def event(self, *, here: bool) -> AgentEvent:
        """The request as logged: in its own session (``here``) or surfaced on the outer one."""
        return ApprovalRequestedEvent(
            agent=self.agent, path=self.path, tool_call_id=self.call_id,
            tool_name=self.tool_name, arguments=self.arguments,
            session_id="" if here else self.session_id, note=self.note,
            time=self.requested_at)


@dataclass(slots=True, kw_only=True)
class PendingQuestion:
    """A question a tool call asked a person, waiting for the answer."""

    id: str
    """The question's id: the key of ``answers`` in ``Runner.resume``."""
    question: str
    """What was asked."""
    choices: list[str] | None = None
    """The answers allowed (``None``: any text)."""
    call_id: str
    """The tool call that asked."""
    tool_name: str
    """The tool called (``ask_user`` for the built-in tool)."""
    arguments: str
    """The call's raw JSON arguments."""
    agent: str
    """The agent that made the call."""
    path: str
    """Its delegation path; a question inside a delegated child has a path with a ``/``."""
    session_id: str
    """The session holding the call (a child session for a delegated child)."""
    asked_at: float
    """When it was asked (the ``QuestionAskedEvent``'s time)."""
    answered: list[str] = field(default_factory=list)
    """The answers to the call's earlier questions: the call runs again from its start when
    the run resumes, and its earlier ``ask_user`` calls return these, in order."""

    def event(self, *, here: bool) -> AgentEvent:
        """The question as logged: in its own session (``here``) or surfaced on the outer one."""
        return QuestionAskedEvent(
            agent=self.agent, path=self.path, question_id=self.id, question=self.question,
            choices=self.choices, answered=list(self.answered), tool_call_id=self.call_id,
            tool_name=self.tool_name, arguments=self.arguments,
            session_id="" if here else self.session_id, time=self.asked_at)

    def check(self, answer: object) -> str:
        """``answer`` if it answers this question, else an ``AnswerError`` saying what would."""
        if not isinstance(answer, str):
            raise AnswerError(f"The answer to question {self.id!r} must be a string, got "
                              f"{type(answer).__name__}.")
        if self.choices is not None and answer not in self.choices:
            raise AnswerError(f"{answer!r} is not an answer to question {self.id!r} "
                              f"({self.question!r}); choose one of: "
                              f"{', '.join(map(repr, self.choices))}.")
        return answer


@dataclass(slots=True, kw_only=True)
class PendingTakeover:
    """A person holds the conversation (a ``human(...)`` agent) and the run waits for their
    reply, or for them to hand the conversation back to an agent."""

    agent: str
    """The human agent."""
    path: str
    """Its delegation path."""
    session_id: str
    """The session holding the conversation."""
    from_agent: str
    """The agent that transferred to the person: where ``hand_back=True`` returns."""
    requested_at: float
    """When the run stopped for the person (the ``HumanTakeoverEvent``'s time): a reply
    answers this stop only."""

    def event(self, *, here: bool) -> AgentEvent:
        """The takeover as logged: in its own session (``here``) or surfaced on the outer one."""
        return HumanTakeoverEvent(agent=self.agent, path=self.path, from_agent=self.from_agent,
                                  session_id="" if here else self.session_id,
                                  time=self.requested_at)


class UserQuestion(Exception):  # noqa: N818 - a control-flow signal, caught by the engine
    """Raised by ``RunContext.ask_user`` when the answer is not known yet: the engine stops
    the run with the question pending. A tool must let it propagate."""

    def __init__(self, question: str, choices: list[str] | None, number: int,
                 answered: list[str]) -> None:
        super().__init__(f"waiting for the user's answer to: {question}")
        self.question = question
        self.choices = choices
        self.number = number
        """Which of the call's questions it is: 0 for the first."""
        self.answered = answered


Pending = PendingApproval | PendingQuestion | PendingTakeover
"""What a stopped run waits for a person on."""


class Interrupted(Exception):  # noqa: N818 - a control-flow signal, caught by the runner
    """The run stopped for a person: decisions on approvals, answers to questions, the reply
    of a person who holds the conversation."""

    def __init__(self, pending: list[Pending]) -> None:
        super().__init__(f"{len(pending)} request(s) await a person")
        self.pending = pending

    @property
    def reason(self) -> str:
        """Why the run stopped, for its ``RunFinishedEvent``."""
        kinds = {type(p) for p in self.pending}
        if PendingTakeover in kinds:
            return "awaiting a person's reply"
        if kinds == {PendingQuestion}:
            return "awaiting an answer"
        return "awaiting approval" if PendingQuestion not in kinds else \
            "awaiting approval and an answer"


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
    options: dict[str, Any] = field(default_factory=dict)
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
