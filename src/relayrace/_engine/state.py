"""The state a run keeps outside its loop: shared run state, log-derived views, toolsets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from weakref import WeakKeyDictionary

from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..agents.handoffs import FINISH_TASK, HandoffSet
from ..agents.output import OUTPUT_TOOL
from ..agents.tools import Tool
from ..agents.tools import Toolset as ListedTools
from ..core.events import AgentEvent, MessageEvent, ToolResultEvent
from ..core.exceptions import AnswerError, UserError
from ..core.messages import Message, ToolCall
from ..core.usage import UsageLimits
from ..models.interface import Model, ToolDefinition
from ..sessions.base import Session
from ..sessions.steps import StepRunner
from ..tracing import Trace
from .budget import Budget
from .offer import Offer
from .takeover import Reply, bind_reply

Emit = Callable[[AgentEvent], None]


class Decisions:
    """A resumed run's approval decisions and answers, each bound to the request it answers.

    A decision or answer holds for the call that was pending in that session with that id,
    tool and arguments, once: any other call, a later one with the same id included, asks
    again.
    """

    __slots__ = ("_answers", "_open", "_reply")

    def __init__(self, decided: dict[tuple[str, str, str, str], bool],
                 answers: dict[tuple[str, str, str, str], list[str]] | None = None,
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

    def take(self, session_id: str, call: ToolCall) -> bool | None:
        """The decision on ``call`` in ``session_id``, used up; ``None``: ask for one."""
        return self._open.pop((session_id, call.id, call.name, call.arguments), None)

    def answered(self, session_id: str, call: ToolCall) -> bool:
        """Whether a person answered the question ``call`` in ``session_id`` waits on."""
        return bool(self._answers) and \
            (session_id, call.id, call.name, call.arguments) in self._answers

    def take_reply(self, session_id: str) -> Reply | None:
        """The person's reply to the takeover in ``session_id``, used up (``None``: none)."""
        reply = self._reply
        if reply is None or reply.session_id != session_id:
            return None
        self._reply = None
        return reply

    def take_answers(self, session_id: str, call: ToolCall) -> list[str]:
        """The answers to ``call``'s questions, used up (none if it waits on no question)."""
        return self._answers.pop((session_id, call.id, call.name, call.arguments), [])


class RunState:
    """What a run shares with every child it delegates to."""

    __slots__ = ("approvals", "budget", "context", "emit", "memory_owner", "model_override",
                 "steps", "trace")

    def __init__(self, context: Any, trace: Trace, limits: UsageLimits | None = None,
                 emit: Emit | None = None, model_override: Model | None = None,
                 approvals: Decisions | None = None, steps: StepRunner | None = None) -> None:
        self.context = context
        self.trace = trace
        self.budget = Budget(limits)
        self.emit = emit
        self.model_override = model_override
        self.approvals = approvals
        """The decisions of a resumed run (``None`` unless it resumes after approval)."""
        self.steps = steps
        """Where a durable run records its model requests and tool calls (``None``: not
        durable)."""
        self.memory_owner = ""
        """Whose memory agents with ``memory=`` keep: the run's ``user_id``, else its top
        session's id."""


def history(events: Sequence[AgentEvent]) -> list[Message]:
    """The conversation held in a session log."""
    return [e.message for e in events if isinstance(e, (MessageEvent, ToolResultEvent))]


def unanswered_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet."""
    if not messages or (messages[-1].role == "assistant" and not messages[-1].tool_calls):
        return []  # the common case: the conversation ends with an answer
    answered: set[str] = set()
    for m in reversed(messages):
        if m.role == "tool" and m.tool_call_id is not None:
            answered.add(m.tool_call_id)
        elif m.role == "assistant":
            return [c for c in m.tool_calls if c.id not in answered]
        else:
            return []
    return []


class Toolset:
    """The tools one agent is offered, by name; static while the agent's tree is and its
    toolsets list the same tools (see ``toolset_of``)."""

    __slots__ = ("agent", "definitions", "enabled", "gated", "handoffs", "listed",
                 "permissions", "plain", "refused", "source", "tools")

    def __init__(self, agent: Agent[Any], listed: tuple[Sequence[Tool], ...] = (),
                 extra: Sequence[Tool] = ()) -> None:
        supervisor = agent.pattern == "supervisor"
        self.agent = agent
        own = [*agent.tools, *(t for group in listed for t in group)]
        offered = [t for t in own if t.delegates or not supervisor]
        self.permissions = rules = agent.permissions  # what it was built from, too
        if rules is not None:  # a denied tool is not offered; a call to it is refused by rule
            offered = [t for t in offered if rules.refusal(t.name) is None]
        offered = [t for t in offered if t.is_enabled is not False]
        offered.extend(t for t in extra if t.name not in {o.name for o in offered})
        self.tools: dict[str, Tool] = {t.name: t for t in offered}
        self.gated = {t.name: t for t in offered if t.is_enabled is not True}
        """Tools offered only while their ``is_enabled`` function says so, by name."""
        self.refused = {t.name for t in own} - set(self.tools)
        self.source = agent.handoff_set()  # what it was built from: stale once that changes
        self.listed = listed  # what the agent's toolsets listed: stale once one lists anew
        self.handoffs = HandoffSet() if supervisor else self.source
        if listed:
            _check_listed(agent, listed, self.handoffs)
        self.definitions: list[ToolDefinition] = [t.definition for t in offered]
        self.definitions.extend(self.handoffs.definitions)
        self.enabled = tuple(self.handoffs.by_agent.values())
        """Its handoffs, all of them (a turn's offer may take fewer: see ``offer_of``)."""
        self.plain = Offer(self, self.definitions, frozenset(), self.enabled, False, False)
        """The offer of a turn that changes nothing of what the agent has (the usual one)."""


def _check_listed(agent: Agent[Any], listed: tuple[Sequence[Tool], ...],
                  handoffs: HandoffSet) -> None:
    """Reject a listed tool named like another tool the agent is offered, naming both."""
    owners: dict[str, str] = {t.name: f"its tool {t.name!r}" for t in agent.tools}
    owners.update((n, f"its transfer tool {n!r}") for n in handoffs.by_tool)
    if agent.mode == "task":
        owners[FINISH_TASK] = f"the tool {FINISH_TASK!r} of task mode"
    if agent.output is not None:
        owners[OUTPUT_TOOL] = f"the tool {OUTPUT_TOOL!r} that gives its output"
    for toolset, group in zip(agent.toolsets, listed, strict=True):
        for t in group:
            here = f"tool {t.name!r} of {toolset.label}"
            other = owners.get(t.name)
            if other is not None:
                raise UserError(
                    f"Agent {agent.name!r}: the {here} clashes with {other}; give the server "
                    "a prefix= or leave one tool out with exclude=.")
            owners[t.name] = f"the {here}"


_toolsets: WeakKeyDictionary[Agent[Any], Toolset] = WeakKeyDictionary()


def toolset_of(agent: Agent[Any]) -> Toolset:
    """The tools ``agent`` is offered, built once and again only when its transfers change
    (an agent placed under a parent gains its parent and peers) or its permissions do, or,
    with toolsets, when one lists anew (see ``listed_toolset_of``)."""
    ts = _toolsets.get(agent)
    if ts is None or ts.source is not agent.handoff_set() or \
            ts.permissions is not agent.permissions:
        ts = _toolsets[agent] = Toolset(agent, ts.listed if ts is not None else ())
    return ts


async def listed_toolset_of(agent: Agent[Any]) -> Toolset:
    """``toolset_of`` for an agent with toolsets: what they list now (cached by each), the
    offer rebuilt (and checked for clashing names) only when a list changed."""
    lists: tuple[ListedTools, ...] = agent.toolsets
    listed = tuple(await asyncio.gather(*(s.list_tools() for s in lists)))
    ts = toolset_of(agent)
    if len(ts.listed) != len(listed) or any(a is not b for a, b in zip(ts.listed, listed,
                                                                        strict=False)):
        ts = _toolsets[agent] = Toolset(agent, listed)
    return ts
