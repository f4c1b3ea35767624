"""`Runner`: the entry point that runs an agent team on a session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypedDict

from pydantic import ValidationError
from typing_extensions import TypeVar, Unpack

from ._engine.decisions import Decisions
from ._engine.loop import AgentLoop
from ._engine.state import RunState
from .agents.agent import Agent, TOutput
from .agents.approvals import Interrupted, PendingRun, StoppedWith
from .agents.tools import describe_validation_error
from .core.events import AgentEvent, DelegationEvent, HandoffEvent, ToolResultEvent
from .core.exceptions import OutputValidationError, UserError
from .core.messages import Message
from .core.reports import DelegationReport
from .core.usage import RunUsage, UsageLimits
from .models import infer_model
from .models.interface import Model
from .sessions import MemorySession, Session
from .sessions.base import Lease, check_wait
from .sessions.steps import StepRunner
from .tracing import Trace

__all__ = ["RunOptions", "RunResult", "RunStream", "Runner", "run_with"]


T = TypeVar("T", default=Any)


@dataclass(slots=True, kw_only=True)
class RunResult(Generic[T]):
    """What a run produced."""

    final_output: T
    """The last agent's final answer: its text, or the validated value of its
    ``output_type`` (empty text, or ``None`` for a typed agent, while ``pending``)."""
    last_agent: Agent[Any]
    """The agent that gave it (after any handoffs)."""
    new_events: list[AgentEvent]
    """The events this run appended to the session, in order."""
    usage: RunUsage
    """Requests and tokens: the total and per agent path, delegated children included."""
    trace_id: str
    """The run's trace."""
    session: Session
    """The session the run used (a new ``MemorySession`` unless one was given)."""
    pending: PendingRun | None = None
    """Set when the run stopped for a person (approvals, questions, a human takeover): resume
    it with ``Runner.resume``."""
    reason: str = ""
    """Why the run ended, when a rule, tool or guardrail ended it."""

    @property
    def handoffs(self) -> list[HandoffEvent]:
        """The handoffs made during the run."""
        return [e for e in self.new_events if isinstance(e, HandoffEvent)]

    @property
    def tool_results(self) -> list[ToolResultEvent]:
        """Every tool result of the run, errors included."""
        return [e for e in self.new_events if isinstance(e, ToolResultEvent)]

    @property
    def delegations(self) -> list[DelegationEvent]:
        """The delegated child runs this run's agents started."""
        return [e for e in self.new_events if isinstance(e, DelegationEvent)]

    @property
    def reports(self) -> list[DelegationReport]:
        """The structured reports of this run's delegations, in order."""
        return [DelegationReport.from_dict(e.report) for e in self.delegations if e.report]


def _final_output(last: Agent[Any], final: str, reason: str) -> Any:
    """The final answer as ``last``'s ``output_type`` (the engine validated a model's answer;
    a ``Finish`` tool or a guardrail may end the run with other text)."""
    spec = last.output
    if spec is None:
        return final
    try:
        return spec.parse(final)
    except ValidationError as exc:
        why = f"ended ({reason}) with" if reason else "ended with"
        raise OutputValidationError(
            last.name, spec.name, 1, final,
            f"the run {why} text that is not one: {describe_validation_error(exc)}") from None


def _start_agent(agent: Agent[Any], start: Agent[Any] | str) -> Agent[Any]:
    found = agent.find_agent(start if isinstance(start, str) else start.name)
    if found is None or (isinstance(start, Agent) and found is not start):
        names = ", ".join(a.name for a in agent.root.walk())
        raise UserError(f"start_agent {start!r} is not in the team; agents: {names}.")
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How one run goes, besides its agent, input and session, as one value: built once by
    each entry point (``Runner.run``, ``Runner.resume`` and ``Runner.stream`` from their
    keyword arguments; a durable worker from the run it took, through `run_with`)."""

    context: Any = None
    """The run's context object (``RunContext.context``)."""
    max_turns: int | None = None
    """Turns per agent before the run fails (``None``: the agent's own limit)."""
    max_handoffs: int | None = None
    """Transfers before the next one is refused (``None``: the default bound)."""
    start_agent: Agent[Any] | str | None = None
    """The agent the run starts with, as for ``Runner.run``."""
    model: Model | str | None = None
    """Every agent's model, overriding their own."""
    usage_limits: UsageLimits | None = None
    """Request and token limits of the run."""
    wait_for_session: float | None = None
    """Seconds to wait for the session's lease (``None``: refuse at once when it is held)."""
    user_id: str | None = None
    """Whose memory agents with ``memory=`` keep (``None``: the session's)."""
    # What a person decided on the run the session stopped (``Runner.resume``).
    approvals: dict[str, bool] | None = None
    """Call ids to decisions."""
    answers: dict[str, str] | None = None
    """Question ids to answers."""
    reply: str | None = None
    """The message of a person who holds the conversation."""
    hand_back: str | bool | None = None
    """The agent a person hands the conversation back to (``True``: the one that gave it)."""
    given_for: PendingRun | None = None
    """The pending run these decisions were made on (``None``: what the session waits for)."""
    # Hooks of the caller.
    emit: Callable[[AgentEvent], None] | None = None
    """Called with each event as it happens (``Runner.stream``)."""
    steps: StepRunner | None = None
    """Where a durable engine records the run's model requests and tool calls."""


class RunArgs(TypedDict, total=False):
    """``Runner.run``'s options after the input, as ``Runner.run_sync`` takes them."""

    session: Session | None
    context: Any
    max_turns: int | None
    max_handoffs: int | None
    start_agent: Agent[Any] | str | None
    model: Model | str | None
    usage_limits: UsageLimits | None
    wait_for_session: float | None
    user_id: str | None


class StreamArgs(RunArgs, total=False):
    """``Runner.stream``'s options: ``Runner.run``'s, and a resume's decisions."""

    approvals: dict[str, bool] | None
    answers: dict[str, str] | None
    reply: str | None
    hand_back: str | bool | None


class Runner:
    """Runs agents. Every option after the input is keyword-only."""

    @classmethod
    async def run(
        cls,
        agent: Agent[Any, TOutput],
        input: str | Sequence[Message] | None,
        *,
        session: Session | None = None,
        context: Any = None,
        max_turns: int | None = None,
        max_handoffs: int | None = None,
        start_agent: Agent[Any] | str | None = None,
        model: Model | str | None = None,
        usage_limits: UsageLimits | None = None,
        wait_for_session: float | None = None,
        user_id: str | None = None,
    ) -> RunResult[TOutput]:
        """Run ``agent``'s team on ``input`` and return the result.

        On a session that already has a conversation, the run continues with the agent that
        was active when it ended (if it is in ``agent``'s tree), unless ``start_agent`` names
        another, or ``agent`` is itself a sub-agent: naming one is choosing where to start.
        On a ``Team``, ``start_agent`` is the member its run starts with, under its rules.
        ``input=None`` resumes an interrupted run from the log, with the agent it stopped
        with. ``model`` overrides every agent's model.

        One run writes to a session at a time: the run holds the session's lease, and a run
        started meanwhile raises `SessionInUseError`, or first waits up to
        ``wait_for_session`` seconds for the lease.

        ``user_id`` names whose memory agents with ``memory=`` keep, across sessions (without
        it, the session's own id does).
        """
        options = RunOptions(
            context=context, max_turns=max_turns, max_handoffs=max_handoffs,
            start_agent=start_agent, model=model, usage_limits=usage_limits,
            wait_for_session=wait_for_session, user_id=user_id)
        return await cls._run(agent, input, session, options)

    @classmethod
    async def _run(
        cls,
        agent: Agent[Any],
        input: str | Sequence[Message] | None,
        session: Session | None,
        options: RunOptions,
    ) -> RunResult[Any]:
        # Checked cheapest first: this runs once per conversation turn.
        if not isinstance(agent, Agent):
            raise UserError(f"Runner.run needs an Agent, got {type(agent).__name__}.")
        if type(input) is not str and input is not None and not isinstance(input, list | tuple):
            raise UserError(f"Runner.run's input is a string, a list of Messages, or None to "
                            f"resume; got {type(input).__name__}.")
        max_turns, max_handoffs, user_id = options.max_turns, options.max_handoffs, options.user_id
        if max_handoffs is not None and max_handoffs < 0:
            raise UserError(f"max_handoffs must be >= 0, got {max_handoffs}.")
        if max_turns is not None and max_turns < 1:
            raise UserError(f"max_turns must be at least 1, got {max_turns}.")
        if user_id is not None and (type(user_id) is not str or not user_id):
            raise UserError(f"user_id names whose memory agents keep: a non-empty string, got "
                            f"{user_id!r}.")
        # One writer per session: a run holds its session's lease (its delegated children's
        # sessions are written only through it). A session made for this run alone needs none.
        check_wait(options.wait_for_session)
        if session is not None:
            lease: Lease | None = Lease(session, options.wait_for_session, run=True)
        else:
            lease, session = None, MemorySession()
        approvals, answers, reply, hand_back = \
            options.approvals, options.answers, options.reply, options.hand_back
        decisions = None if approvals is None and answers is None and reply is None and \
            not hand_back else await Decisions.bind(session, agent, approvals or {},
                                                    options.given_for, answers, reply,
                                                    hand_back or False)
        model = options.model
        state = RunState(options.context, Trace(), options.usage_limits, options.emit,
                         infer_model(model) if model is not None else None, decisions,
                         options.steps)
        state.memory_owner = user_id or session.session_id
        loop = AgentLoop(state, agent, session, max_turns=max_turns, max_handoffs=max_handoffs)
        start: Agent[Any] | None
        if options.start_agent is not None:
            start = _start_agent(agent, options.start_agent)
        else:
            start = agent if agent.parent is not None and input is not None else None
        try:
            if lease is None:
                final, last, reason = await loop.run(input, start_agent=start)
            elif lease.take():  # free, and kept in this process only: no await to take it
                try:
                    final, last, reason = await loop.run(input, start_agent=start)
                finally:
                    lease.give_back()
            else:
                async with lease:
                    final, last, reason = await loop.run(input, start_agent=start)
        except Interrupted as stop:
            pending = PendingRun.of(stop.pending, session_id=session.session_id,
                                    agent=agent.name, entry=agent, session=session,
                                    options=StoppedWith(
                                        context=options.context, max_turns=max_turns,
                                        max_handoffs=max_handoffs, model=model,
                                        usage_limits=options.usage_limits, user_id=user_id))
            return RunResult(final_output="" if agent.output is None else None,
                             last_agent=agent, new_events=loop.pieces.log.new_events,
                             usage=state.budget.usage, trace_id=state.trace.trace_id,
                             session=session, pending=pending, reason=stop.reason)
        return RunResult(final_output=_final_output(last, final, reason), last_agent=last,
                         new_events=loop.pieces.log.new_events,
                         usage=state.budget.usage, trace_id=state.trace.trace_id, session=session,
                         reason=reason)

    @classmethod
    async def resume(
        cls,
        pending: PendingRun,
        *,
        approvals: dict[str, bool] | None = None,
        answers: dict[str, str] | None = None,
        reply: str | None = None,
        hand_back: str | bool = False,
        context: Any = None,
        max_turns: int | None = None,
        max_handoffs: int | None = None,
        model: Model | str | None = None,
        usage_limits: UsageLimits | None = None,
        wait_for_session: float | None = None,
    ) -> RunResult[Any]:
        """Continue a run that stopped for a person, at the calls it stopped on.

        ``approvals`` maps call ids to True (run the call) or False (tell the model it was
        rejected). Calls left out stay pending, and the run stops for them again. ``answers``
        maps each pending question's id to its answer (one of its ``choices``, if it has
        them): the call that asked runs again and its ``ask_user`` returns the answer (the
        ``ask_user`` tool's result is the answer). Every pending question needs its answer:
        one missing, an unknown id or an answer outside the choices raises ``AnswerError``
        before anything is written. A decision or answer holds once, for the request
        ``pending`` lists (its session, call id, tool and arguments): a later call, even with
        the same id, asks again, and a request the session was resumed past since cannot be
        decided on any more. ``wait_for_session`` is as for ``Runner.run``.

        When a person holds the conversation (``pending.takeover``), ``reply`` is their
        message: it joins the conversation as the human agent's answer, and the run ends with
        it (the person keeps the conversation: the user's next input stops the run for them
        again). ``hand_back`` gives the conversation back to the agent it names (``True``: the
        agent that transferred to the person); with a ``reply`` that agent takes the user's
        next turn, without one it answers now.
        """
        if pending.entry is None or pending.session is None:
            raise UserError("This pending run is not bound to an agent and a session; load it "
                            "with PendingRun.from_json(text, entry=..., session=...).")
        # Settings not given again are the stopped run's (when it stopped in this process).
        was = pending.options
        return await cls._run(pending.entry, None, pending.session, RunOptions(
            context=context if context is not None else was.get("context"),
            max_turns=max_turns or was.get("max_turns"),
            max_handoffs=max_handoffs if max_handoffs is not None else was.get("max_handoffs"),
            model=model or was.get("model"), usage_limits=usage_limits or was.get("usage_limits"),
            wait_for_session=wait_for_session, user_id=was.get("user_id"),
            approvals=approvals or {}, answers=answers or {}, reply=reply, hand_back=hand_back,
            given_for=pending))

    @classmethod
    def run_sync(
        cls,
        agent: Agent[Any, TOutput],
        input: str | Sequence[Message] | None,
        **options: Unpack[RunArgs],
    ) -> RunResult[TOutput]:
        """``Runner.run`` for code without an event loop (takes the same options)."""
        return asyncio.run(cls.run(agent, input, **options))

    @classmethod
    def stream(
        cls,
        agent: Agent[Any, TOutput],
        input: str | Sequence[Message] | None,
        **options: Unpack[StreamArgs],
    ) -> RunStream[TOutput]:
        """Run like ``Runner.run``, yielding events (text deltas included) as they happen.

        Iterate with ``async for``; afterwards ``stream.result`` holds the ``RunResult``.
        Delegated children's events come too, tagged with their agent ``path``. An agent
        with an ``output_type`` streams ``OutputEvent``s: the value validated so far, then the
        final one.
        """
        return RunStream(cls, agent, input, options)


async def run_with(agent: Agent[Any], input: str | Sequence[Message] | None,
                   session: Session | None, options: RunOptions) -> RunResult[Any]:
    """Run ``agent``'s team on ``input`` in ``session`` (``None``: a new ``MemorySession``) as
    ``options`` say: the one run of ``Runner.run``, ``Runner.resume`` and ``Runner.stream``,
    for entry points that build the options themselves (the durable runner's workers, an
    adapter of another durable-execution engine giving its ``steps``)."""
    return await Runner._run(agent, input, session, options)


_STREAM_OPTIONS = ("session", "context", "max_turns", "max_handoffs", "start_agent", "model",
                   "usage_limits", "approvals", "wait_for_session", "user_id", "answers",
                   "reply", "hand_back")
"""``Runner.run``'s keywords and a resume's decisions: ``session`` and `RunOptions` fields."""


class RunStream(Generic[T]):
    """The events of a running run; ``result`` is set once iteration ends."""

    def __init__(
        self, runner: type[Runner], agent: Agent[Any, T], input: Any, options: StreamArgs
    ) -> None:
        unknown = set(options) - set(_STREAM_OPTIONS)
        if unknown:
            raise UserError(f"Runner.stream got unknown option(s): {', '.join(sorted(unknown))}; "
                            f"valid: {', '.join(_STREAM_OPTIONS)}.")
        self._runner = runner
        self._agent = agent
        self._input = input
        self._session: Session | None = options.get("session")
        self._options = RunOptions(  # its `emit` is set when iteration starts
            context=options.get("context"), max_turns=options.get("max_turns"),
            max_handoffs=options.get("max_handoffs"), start_agent=options.get("start_agent"),
            model=options.get("model"), usage_limits=options.get("usage_limits"),
            wait_for_session=options.get("wait_for_session"), user_id=options.get("user_id"),
            approvals=options.get("approvals"), answers=options.get("answers"),
            reply=options.get("reply"), hand_back=options.get("hand_back"))
        self.result: RunResult[T] | None = None
        """The run's result, once the stream is exhausted."""

    async def __aiter__(self) -> AsyncIterator[AgentEvent]:
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        options = replace(self._options, emit=queue.put_nowait)
        task = asyncio.ensure_future(
            self._runner._run(self._agent, self._input, self._session, options))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            self.result = await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
