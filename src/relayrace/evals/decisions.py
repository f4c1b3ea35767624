"""A person's decisions in a case: approvals per tool name and answers to questions, checked
against the team before any case runs, then handed out to each stop of a case run's
conversation, for ``Runner.resume`` (the resume of the command line and the server); and the
decisions a stored session shows, for a captured case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from relayrace import Agent
from relayrace.agents.approvals import PendingRun
from relayrace.agents.delegation import AgentTool
from relayrace.config import suggest
from relayrace.core.events import (
    AgentEvent,
    ApprovalRequestedEvent,
    HumanTakeoverEvent,
    QuestionAskedEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolResultEvent,
)

from .cases import Case, Decision
from .loading import CaseFileError

__all__ = ["REJECTED", "CaseDecisions", "Decided", "Stop", "check_decisions", "decided_in",
           "team_tools"]


def _reachable(team: Agent[Any]) -> list[Agent[Any]]:
    """Every agent a run of ``team`` may reach: its tree, specialists, delegated children."""
    found: dict[int, Agent[Any]] = {}
    todo = [team.root]
    while todo:
        agent = todo.pop()
        if id(agent) in found:
            continue
        found[id(agent)] = agent
        todo.extend(h.agent for h in agent.handoffs)
        todo.extend(agent.specialists)
        todo.extend(t.agent for t in agent.tools if isinstance(t, AgentTool))
    return list(found.values())


def team_tools(team: Agent[Any]) -> tuple[set[str], bool]:
    """The tool and transfer names of every agent a run of ``team`` may reach, and whether
    any agent has toolsets, whose tools are known only when a run lists them."""
    agents = _reachable(team)
    names = {t.name for a in agents for t in a.tools}
    names.update(tool for a in agents for tool in a.handoff_set().by_tool)
    return names, any(a.toolsets for a in agents)


def check_decisions(team: Agent[Any], cases: Sequence[Case]) -> None:
    """Raise `CaseFileError` naming every tool in the cases' ``approvals:`` and
    ``expect.pending`` (where a person holding the conversation is their agent) that
    ``team`` does not have, each at its ``file:line`` with the closest name; before any
    case runs."""
    names, dynamic = team_tools(team)
    if dynamic:
        return  # an MCP server's tools are listed only when a run needs them
    people = {a.name for a in _reachable(team) if a.is_human}
    known = sorted(names | {"ask_user"} | people)
    problems = []
    for case in cases:
        for tool in case.approvals:
            if tool not in names:
                problems.append(f"{case.where_of(f'approvals.{tool}')}: approvals: the team has "
                                f"no tool {tool!r}{suggest(tool, sorted(names)) or ''}")
        for tool in case.expect.pending or []:
            if tool not in known:
                problems.append(f"{case.where_of('expect.pending')}: expect.pending: the team "
                                f"has no tool {tool!r}{suggest(tool, known) or ''}")
    if problems:
        raise CaseFileError("\n".join(problems))


@dataclass(slots=True, frozen=True)
class Stop:
    """A stop of a case run's conversation that the case gives no decision for."""

    tools: list[str]
    """The tools the run waits on (a person holding the conversation: their agent)."""
    reason: str
    """What the run waits for, in words: ``approval of issue_refund``."""
    fix: str
    """What a case gives to go on: ``give approvals: or expect: pending:``."""


@dataclass(slots=True)
class CaseDecisions:
    """A case's decisions, used up in order as its conversation stops for a person."""

    case: Case
    taken: dict[str, int] = field(default_factory=dict)
    """Per tool, how many of its decisions were used."""
    answered: int = 0
    """How many answers were used."""
    made: list[str] = field(default_factory=list)
    """Each decision given, as a line: ``approve issue_refund (call_1)``."""

    def _decision(self, tool: str) -> bool | None:
        decided = self.case.approvals.get(tool)
        if decided is None:
            return None
        if isinstance(decided, str):
            return decided == "approve"
        n = self.taken.get(tool, 0)
        if n >= len(decided):
            return None
        self.taken[tool] = n + 1
        return decided[n] == "approve"

    def for_stop(self, pending: PendingRun) -> tuple[dict[str, bool], dict[str, str]] | Stop:
        """The approvals (call id to decision) and answers (question id to text) for what
        ``pending`` waits on; a `Stop` if the case has no decision for any of it."""
        if pending.takeover is not None:
            return Stop([pending.takeover.agent],
                        f"a person ({pending.takeover.agent}) holding the conversation",
                        "a case cannot reply for them; give expect: pending:")
        approvals: dict[str, bool] = {}
        undecided = []
        for request in pending.approvals:
            decision = self._decision(request.tool_name)
            if decision is None:
                undecided.append(request.tool_name)
            else:
                approvals[request.call_id] = decision
        answers: dict[str, str] = {}
        unanswered = []
        for question in pending.questions:
            if self.answered < len(self.case.answers):
                answers[question.id] = self.case.answers[self.answered]
                self.answered += 1
            else:
                unanswered.append(question.tool_name)
        if undecided or unanswered:
            what = [f"approval of {', '.join(undecided)}"] if undecided else []
            what += [f"an answer to {', '.join(unanswered)}"] if unanswered else []
            tools = [r.tool_name for r in pending.approvals] + \
                [q.tool_name for q in pending.questions]
            keys = ["approvals:"] if undecided else []
            keys += ["answers:"] if unanswered else []
            return Stop(tools, " and ".join(what), f"give {' and '.join(keys)} or expect: "
                                                    "pending:")
        for request in pending.approvals:
            verb = "approve" if approvals[request.call_id] else "reject"
            self.made.append(f"{verb} {request.tool_name} ({request.call_id})")
        for question in pending.questions:
            self.made.append(f"answer {question.question!r}: {answers[question.id]!r}")
        return approvals, answers


REJECTED = "Rejected: a human reviewer declined"
"""How the tool result of a rejected call begins (the runner's own words for it)."""


@dataclass(slots=True)
class Decided:
    """A person's decisions as a session's log shows them, in a case's terms."""

    approvals: dict[str, Decision | list[Decision]] = field(default_factory=dict)
    """Per tool: one decision when every call got the same, else each call's in order."""
    answers: list[str] = field(default_factory=list)
    """The answers to the questions asked, in order."""
    pending: list[str] | None = None
    """The tools the session still waits on (``None``: it does not wait)."""


def _results(events: Sequence[AgentEvent]) -> dict[str, str]:
    """Tool results by call id (the last, for a call that ran again after a question)."""
    return {e.message.tool_call_id or "": e.message.content for e in events
            if isinstance(e, ToolResultEvent)}


def decided_in(events: Sequence[AgentEvent],
               children: Mapping[str, Sequence[AgentEvent]] | None = None) -> Decided:
    """The decisions a session's log (``events``) and its delegated children's logs
    (``children``, by session id; a child's request is decided in its own log) show."""
    logs = {"": _results(events)}
    for session_id, log in (children or {}).items():
        logs[session_id] = _results(log)
    per_tool: dict[str, list[Decision]] = {}
    found = Decided()
    asked: list[QuestionAskedEvent] = []
    for e in events:
        if isinstance(e, ApprovalRequestedEvent):
            result = logs.get(e.session_id, {}).get(e.tool_call_id)
            if result is not None:  # else still waiting
                per_tool.setdefault(e.tool_name, []).append(
                    "reject" if result.startswith(REJECTED) else "approve")
        elif isinstance(e, QuestionAskedEvent):
            asked.append(e)
    for i, question in enumerate(asked):
        # A call asking again holds the earlier answers; the built-in tool's result is one.
        later = next((q for q in asked[i + 1:] if q.tool_call_id == question.tool_call_id
                      and q.session_id == question.session_id
                      and len(q.answered) > len(question.answered)), None)
        if later is not None:
            found.answers.append(later.answered[len(question.answered)])
        elif question.tool_name == "ask_user":
            result = logs.get(question.session_id, {}).get(question.tool_call_id)
            if result is not None:
                found.answers.append(result)
    found.approvals = {tool: made[0] if len(set(made)) == 1 else made
                       for tool, made in per_tool.items()}
    found.pending = _waiting(events)
    return found


def _waiting(events: Sequence[AgentEvent]) -> list[str] | None:
    """The tools the log's last run stopped on, if it stopped for a person."""
    ends = [i for i, e in enumerate(events) if isinstance(e, RunFinishedEvent)]
    if not ends or events[ends[-1]].status != "interrupted":  # type: ignore[attr-defined]
        return None
    starts = [i for i, e in enumerate(events[:ends[-1]]) if isinstance(e, RunStartedEvent)]
    tools = []
    for e in events[starts[-1] if starts else 0:ends[-1]]:
        if isinstance(e, ApprovalRequestedEvent | QuestionAskedEvent):
            tools.append(e.tool_name)
        elif isinstance(e, HumanTakeoverEvent):
            tools.append(e.agent)
    return tools
