"""Delegated child runs: the engine's side of ``relayrace.agents.delegation``.

A child runs in its own loop and child session, linked to its parent's, and shares the run's
state (context, budget, trace, stream, decisions). Its session is keyed by the parent's call
(the batch's place in the log and the child's number), so a resumed call continues the same
child, or reuses what it returned, instead of starting it again; a reused child whose
delegation the parent's log lacks (the process died between the two logs' writes) is logged
then, so the parent's log accounts for every child.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol
from weakref import ref

from ..agents import delegation
from ..agents.approvals import Interrupted
from ..agents.delegation import ChildOptions, ChildResult, used_sources
from ..core.events import AgentEvent, DelegationEvent, MessageEvent, RunFinishedEvent
from ..core.exceptions import UsageLimitExceeded, UserError
from ..core.messages import Message
from ..core.reports import (
    DEFAULT_REPORT_SUFFIX,
    REPORT_TOOL_SUFFIX,
    parse_report,
    report_instructions,
)
from ..core.usage import Usage
from .callkey import child_key

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.context import RunContext
    from ..sessions import Session
    from .loopstate import EventLog
    from .pieces import Pieces

__all__ = ["ChildRuns", "run_child"]


async def run_child(
    pieces: Pieces, spawn: Spawn, ctx: RunContext[Any], agent: Agent[Any], task: str,
    options: ChildOptions,
) -> ChildResult:
    """Run ``agent`` on ``task`` as a delegated child of the agent ``ctx`` serves, in its own
    loop and child session (see ``relayrace.agents.delegation.run_child``)."""
    state = pieces.state
    prefix = ctx.path + "/"
    path = prefix + agent.name
    too_deep = state.budget.refuse_depth(ctx.depth + 1)
    if too_deep is not None:
        return _refused(agent, path, too_deep)
    key = options.key
    if key is None:  # children of one tool call are numbered, so a resume finds each again
        key = str(pieces.calls.number_child(ctx.tool_call_id))
    # Which batch made the call, too: a model may reuse a call id in a later turn.
    key = child_key(pieces.calls.batch_at, key)
    child_input: list[Message] | None = [*options.history, Message.user(task)]
    session: Session | None = None
    if state.approvals is not None or pieces.control.resuming or \
            ctx.tool_call_id in pieces.calls.resumed:
        # The call ran before (this run resumes): continue its child, or reuse what it
        # returned. A child waiting for a person goes on from its log, and asks again.
        session, finished = await _earlier_child(pieces.log.session, ctx.tool_call_id, key, agent)
        if finished is not None:
            if not await _named(pieces.log.session, finished.session_id):
                # The process that ran it died after the child's end and before its parent
                # logged the delegation (they are two logs): logged now, or the parent's log
                # would not account for the child, its report, usage and trace.
                _log_delegation(pieces.log, ctx, agent, finished)
            return finished
        if session is not None and (await session.view()).messages:
            child_input = None
    if child_input is not None:  # a new child: checked and counted with no await between
        refused = state.budget.start_child()
        if refused is not None:
            return _refused(agent, path, refused)
    child_session = session or pieces.log.session.child(path=path, tool_call_id=ctx.tool_call_id,
                                                        key=key)
    report = options.report and agent.output is None  # a typed child returns its value instead
    child = _child_loop(pieces, spawn, ctx, agent, options, child_session, report)
    used = child.pieces.place.local
    assert used is not None  # a delegated loop counts what it uses
    try:
        result = await _result(child, child_input, options.timeout, report, agent, path)
    except Interrupted:
        if pieces.place.local is not None:
            pieces.place.local.add(used)
        raise  # the approval request surfaces on the outer run
    if pieces.place.local is not None:  # the top-level loop's usage is the run's total
        pieces.place.local.add(used)
    _log_delegation(pieces.log, ctx, agent, result)
    return result


def _child_loop(pieces: Pieces, spawn: Spawn, ctx: RunContext[Any], agent: Agent[Any],
                options: ChildOptions, session: Session, report: bool) -> Child:
    """The loop of the child, one level deeper than the agent ``ctx`` serves, asked for its
    report in the instructions (or, when its model can call tools, through a tool)."""
    # The report is a tool call when the model can make one (and the text was not changed).
    by_tool = report and options.report_template == DEFAULT_REPORT_SUFFIX and \
        _calls_tools(pieces, agent)
    template = REPORT_TOOL_SUFFIX if by_tool else options.report_template
    instructions_suffix = report_instructions(options.audience, template) if report else ""
    if options.suffix:
        instructions_suffix = f"{instructions_suffix}\n\n{options.suffix}".strip()
    return spawn(pieces.state, agent, session, path_prefix=ctx.path + "/",
                 parent_span=ctx.span, max_turns=options.max_turns, depth=ctx.depth + 1,
                 instructions_suffix=instructions_suffix, variables=options.variables,
                 extra_tools=(delegation.submit_report,) if by_tool else ())


async def _result(child: Child, child_input: list[Message] | None, seconds: float | None,
                  report: bool, agent: Agent[Any], path: str) -> ChildResult:
    """Run ``child`` (within ``seconds``, if given) and say how it went: its answer (its
    value, or its report), or what went wrong, for the parent's model (the child's log has
    the details)."""
    used = child.pieces.place.local
    assert used is not None
    result = ChildResult(agent=agent.name, path=path, ok=False,
                         session_id=child.pieces.log.session.session_id, usage=used)
    deadline = asyncio.timeout(seconds) if seconds is not None else None
    try:
        if deadline is None:
            final, last, _ = await child.run(child_input)
        else:
            async with deadline:
                final, last, _ = await child.run(child_input)
    except Interrupted:  # waiting for a person is no failure: the outer run stops too
        raise
    except Exception as exc:
        result.error = (f"timed out after {seconds:g} s"
                        if deadline is not None and deadline.expired()
                        else f"{type(exc).__name__}: {exc}")
        return result
    result.ok = True
    result.output = final
    if last.output is not None:  # the engine validated it: this is its canonical JSON
        result.value = last.output.parse(final)
    elif report:
        result.report = parse_report(final)
        result.report.merge_sources(used_sources(child.pieces.log.new_events))
    return result


def _log_delegation(log: EventLog, ctx: RunContext[Any], agent: Agent[Any],
                    result: ChildResult) -> None:
    log.add(DelegationEvent(
        agent=ctx.agent.name, path=ctx.path, child_agent=agent.name,
        child_session_id=result.session_id, tool_call_id=ctx.tool_call_id, ok=result.ok,
        report=result.report.to_dict() if result.report else None, error=result.error,
        output=result.value,
        usage=replace(result.usage),  # a copy: the live tally goes on counting
    ))


def _calls_tools(pieces: Pieces, agent: Agent[Any]) -> bool:
    """Whether ``agent``'s model can call tools (a workflow's members are assumed to)."""
    model = agent.model if agent.remote else (pieces.state.model_override or agent.model)
    if isinstance(model, str):
        model = agent.resolved_model()
    return model is None or bool(getattr(model, "supports_tools", True))


def _refused(agent: Agent[Any], path: str, why: UsageLimitExceeded) -> ChildResult:
    return ChildResult(agent=agent.name, path=path, ok=False, usage=Usage(),
                       error=f"not started: {why}")



async def _named(parent: Session, child_session_id: str) -> bool:
    """Whether ``parent``'s log records the delegation to ``child_session_id``."""
    return any(isinstance(e, DelegationEvent) and e.child_session_id == child_session_id
               for e in await parent.get_events())


def _logged_usage(events: list[AgentEvent]) -> Usage:
    """What a child's log says it used: its model answers, and its own children."""
    total = Usage()
    for e in events:
        if isinstance(e, MessageEvent | DelegationEvent) and e.usage is not None:
            total.add(e.usage)
    return total


async def _earlier_child(
    parent: Session, tool_call_id: str, key: str, agent: Agent[Any]
) -> tuple[Session | None, ChildResult | None]:
    """The child ``key`` of ``tool_call_id`` from before a resume: waiting, or finished."""
    for info in reversed(await parent.children()):
        if info.parent_tool_call_id != tool_call_id or info.key != key:
            continue
        child = parent.open_child(info)
        events = await child.get_events()
        done = events[-1] if events and isinstance(events[-1], RunFinishedEvent) else None
        if done is None or done.status == "interrupted":
            return child, None  # it stopped for approval, or crashed: it goes on from its log
        used = _logged_usage(events)
        if done.status == "completed":
            last = agent.find_agent(done.agent)
            if last is not None and last.output is not None:
                return None, ChildResult(agent=done.agent, path=info.path, ok=True,
                                         output=done.output, value=last.output.parse(done.output),
                                         session_id=info.session_id, usage=used)
            report = parse_report(done.output)
            report.merge_sources(used_sources(events))
            return None, ChildResult(agent=done.agent, path=info.path, ok=True,
                                     output=done.output, report=report,
                                     session_id=info.session_id, usage=used)
        return None, ChildResult(agent=done.agent, path=info.path, ok=False, error=done.output,
                                 session_id=info.session_id, usage=used)
    return None, None


class Child(Protocol):
    """What a parent needs of a child's loop: it runs, and its pieces say what it used and
    logged."""

    pieces: Pieces

    async def run(self, input: str | Sequence[Message] | None
                  ) -> tuple[str, Agent[Any], str]: ...


Spawn = Callable[..., Child]
"""Makes a child's loop (``AgentLoop``, with its keyword options)."""


class ChildRuns:
    """The engine's `ChildRunner`, what ``RunContext.children`` holds: it starts the delegated
    children of one loop, and offers a tool nothing else of the engine."""

    __slots__ = ("_pieces", "_spawn")

    def __init__(self, pieces: Pieces, spawn: Spawn) -> None:
        # Weakly: the loop holds this object, and a cycle between them would leave every run's
        # state to the garbage collector instead of freeing it when the run ends.
        self._pieces, self._spawn = ref(pieces), spawn

    async def run_child(self, ctx: RunContext[Any], agent: Agent[Any], task: str,
                        options: ChildOptions) -> ChildResult:
        """Run ``agent`` on ``task`` as a delegated child of the agent ``ctx`` serves."""
        pieces = self._pieces()
        if pieces is None:
            raise UserError(f"{agent.name!r} cannot start as a delegated child: the run whose "
                            "context started it has ended. Start child runs while the tool "
                            "that was given that context runs.")
        return await run_child(pieces, self._spawn, ctx, agent, task, options)
