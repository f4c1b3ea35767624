"""What a stopped run waits for a person on: an approval, an answer, a takeover's reply; and
the signals that stop it (`UserQuestion` from a tool, `Interrupted` for the run).

Data only: `relayrace.agents.approvals.PendingRun` holds these for a run and resumes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.events import AgentEvent, ApprovalRequestedEvent, HumanTakeoverEvent, QuestionAskedEvent
from ..core.exceptions import AnswerError

__all__ = ["Interrupted", "Pending", "PendingApproval", "PendingQuestion", "PendingTakeover",
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
