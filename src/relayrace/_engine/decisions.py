"""A resumed run's decisions: approvals, answers to questions and a person's reply, each bound
to the request it answers (``Runner.resume``), and checked before anything is written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..core.exceptions import AnswerError, UserError
from ..sessions.base import Session
from .callkey import Request

__all__ = ["Decisions", "Reply", "bind_reply"]


@dataclass(slots=True, frozen=True)
class Reply:
    """A person's reply to the takeover ``session_id`` waits for."""

    session_id: str
    text: str
    """What the person says ("" for nothing)."""
    hand_back: str
    """The agent the person hands the conversation back to ("" to keep it)."""


def bind_reply(waiting: PendingRun | None, given_for: PendingRun | None, entry: Agent[Any],
               reply: str | None, hand_back: str | bool) -> Reply | None:
    """``reply`` and ``hand_back`` checked against the takeover the session waits for
    (``waiting``); ``None`` when the person gave neither. A mistake raises ``UserError``
    before anything is written."""
    if reply is None and hand_back is False:
        return None
    if reply is not None and (type(reply) is not str or not reply.strip()):
        raise UserError(f"A reply is the person's message, non-empty text; got {reply!r}.")
    if not isinstance(hand_back, str | bool):
        raise UserError(f"hand_back names the agent to hand the conversation back to, or is "
                        f"True for the agent that transferred; got {hand_back!r}.")
    takeover = waiting.takeover if waiting is not None else None
    if takeover is None:
        raise UserError("No person holds this conversation, so there is nothing to reply to: "
                        "reply= and hand_back= answer a pending human takeover "
                        "(PendingRun.takeover).")
    if given_for is not None and given_for.takeover not in (None, takeover):
        raise UserError(f"Session {takeover.session_id!r} no longer waits for the reply this "
                        "pending run asks for: it was resumed since. Reply to what it waits "
                        "for now: PendingRun.from_session(session, entry=agent).")
    target = ""
    if hand_back is True:
        target = takeover.from_agent
        if not target:
            raise UserError(f"No agent transferred to {takeover.agent!r}, so hand_back=True "
                            "has nowhere to go; name the agent: hand_back='name'.")
    elif isinstance(hand_back, str):
        found = entry.find_agent(hand_back)
        if found is None or found.is_human or not found.handoff_target:
            names = ", ".join(a.name for a in entry.root.walk()
                              if not a.is_human and a.handoff_target)
            raise UserError(f"hand_back={hand_back!r} is not an agent of the team the "
                            f"conversation can go to; agents: {names}.")
        target = hand_back
    return Reply(takeover.session_id, reply or "", target)


class Decisions:
    """A resumed run's approval decisions and answers, each bound to the request it answers.

    A decision or answer holds for the call that was pending in that session with that id,
    tool and arguments, once: any other call, a later one with the same id included, asks
    again.
    """

    __slots__ = ("_answers", "_open", "_reply")

    def __init__(self, decided: dict[Request, bool],
                 answers: dict[Request, list[str]] | None = None,
                 reply: Reply | None = None) -> None:
        self._open = decided
        self._answers = answers or {}
        self._reply = reply

    @classmethod
    async def bind(cls, session: Session, entry: Agent[Any], approvals: Mapping[str, bool],
                   given_for: PendingRun | None,
                   answers: Mapping[str, str] | None = None, reply: str | None = None,
                   hand_back: str | bool = False) -> Decisions:
        """``approvals`` (call id to decision), ``answers`` (question id to text) and a
        person's ``reply``/``hand_back`` bound to the requests ``session`` waits for.

        ``given_for`` is the pending run they were made on: each decided or answered request
        must still be what the session waits for, not an earlier request. Every question
        waiting needs its answer (``AnswerError`` otherwise, before anything is written).
        """
        answers = answers or {}
        waiting = await PendingRun.from_session(session, entry=entry)
        requests = waiting.approvals if waiting is not None else []
        questions = waiting.questions if waiting is not None else []
        if given_for is not None:
            stale = sorted({a.call_id for a in given_for.approvals
                            if a.call_id in approvals and a not in requests} |
                           {q.id for q in given_for.questions
                            if q.id in answers and q not in questions})
            if stale:
                raise UserError(
                    f"Session {session.session_id!r} no longer waits for the request(s) "
                    f"{stale} this pending run lists: it was resumed since. Decide on what it "
                    "waits for now: PendingRun.from_session(session, entry=agent).")
        ids = {a.call_id for a in requests}
        unknown = sorted(set(approvals) - ids)
        if unknown:
            raise UserError(f"No pending call has the id(s) {unknown}; pending: "
                            f"{sorted(ids)}.")
        asked = {q.id: q for q in questions}
        unknown = sorted(set(answers) - set(asked))
        if unknown:
            raise AnswerError(f"No pending question has the id(s) {unknown}; pending: "
                              f"{sorted(asked) or 'none'}.")
        missing = [q.id for q in questions if q.id not in answers]
        if missing:
            raise AnswerError(
                f"The run waits for answers to the question(s) {missing} (" + "; ".join(
                    f"{q.id}: {q.question!r}" for q in questions if q.id in missing) +
                "); give each in answers={id: text}. Nothing was written: the session still "
                "waits for them.", missing=missing)
        return cls({(a.session_id, a.call_id, a.tool_name, a.arguments): approvals[a.call_id]
                    for a in requests if a.call_id in approvals},
                   {(q.session_id, q.call_id, q.tool_name, q.arguments):
                    [*q.answered, q.check(answers[q.id])] for q in questions},
                   bind_reply(waiting, given_for, entry, reply, hand_back))

    def decided(self) -> dict[Request, bool]:
        """The decisions not used up yet, as they stand now (``plan_calls`` reads them)."""
        return dict(self._open)

    def answered_requests(self) -> frozenset[Request]:
        """The calls whose questions a person answered, as they stand now."""
        return frozenset(self._answers)

    def take(self, request: Request) -> bool | None:
        """The decision on the call ``request`` names, used up; ``None``: ask for one."""
        return self._open.pop(request, None)

    def take_reply(self, session_id: str) -> Reply | None:
        """The person's reply to the takeover in ``session_id``, used up (``None``: none)."""
        reply = self._reply
        if reply is None or reply.session_id != session_id:
            return None
        self._reply = None
        return reply

    def take_answers(self, request: Request) -> list[str]:
        """The answers to the questions of the call ``request`` names, used up (none if it
        waits on no question)."""
        return self._answers.pop(request, [])
