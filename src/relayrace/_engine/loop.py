"""The run loop: model turns, same-session handoffs, guardrails and modes, logged as events.

One `AgentLoop` drives one session: it is the algorithm over a loop's `Pieces` (``pieces``),
which the engine's helpers take instead of the loop. A run starts where its log says
(``start``); each agent's turns are a dispatcher over what each turn decides (``turn``); a
turn offers the model one value (``offer``), asks it (``modelcall``), and answers every call
(``toolexec``). A delegated child gets its own loop and session but shares the `RunState`
(context, usage, limits, trace, stream, approvals) of the run that started it (``children``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agents.agent import Agent
from ..agents.approvals import Interrupted
from ..agents.output import OUTPUT_TOOL
from ..core.events import HandoffEvent
from ..core.exceptions import (
    MaxTurnsExceeded,
    RunTimeout,
)
from ..core.messages import Message, ToolCall
from ..sessions.base import Session
from ..teams.routing import Finish, TransferTo
from ..teams.workflows import SpeakerTurn
from ..tracing import Span
from .children import ChildRuns
from .guarding import guard_text, input_block, recheck_input
from .modelcall import model_turn
from .moves import log_move
from .pieces import Pieces
from .runends import begin_run, completed, failed, interrupted
from .state import RunState, model_of
from .structured import check_output
from .takeover import human_turn
from .toolexec import run_tools
from .turn import (
    RUN_AGAIN,
    Answer,
    Blocked,
    End,
    Finished,
    HandBack,
    Next,
    Return,
    RouteTo,
    RunAgain,
    Spoke,
    TeamRoute,
    Transfer,
    TurnResult,
    Yield,
)

if TYPE_CHECKING:
    from ..agents.context import RunContext
    from ..agents.guardrails import Guardrail
    from ..agents.tools import Tool
    from ..teams.workflows import Composite
    from .offer import Offer



@dataclass(frozen=True, slots=True)
class _ToRun:
    """A turn's calls to answer: the turn's message (``None``: calls an earlier run left),
    the calls, and the offer they are checked against."""

    message: Message | None
    calls: list[ToolCall]
    offer: Offer


@dataclass(frozen=True, slots=True)
class _Active:
    """Who holds the turn after a step, and its span; with ``spoke``, the turns ended."""

    agent: Agent[Any]
    span: Span
    spoke: Spoke | None = None


class AgentLoop:
    """Drives one session until an agent gives its final answer, over its `Pieces`."""

    __slots__ = ("pieces",)

    def __init__(
        self, state: RunState, entry: Agent[Any], session: Session, *, path_prefix: str = "",
        parent_span: Span | None = None, max_turns: int | None = None,
        max_handoffs: int | None = None, depth: int = 0, instructions_suffix: str = "",
        variables: dict[str, Any] | None = None, extra_tools: tuple[Tool, ...] = (),
    ) -> None:
        self.pieces = Pieces(state, entry, session, path_prefix, parent_span, max_turns,
                             max_handoffs, depth, instructions_suffix, variables, extra_tools)
        self.pieces.children = ChildRuns(self.pieces, AgentLoop)

    # -- the run -----------------------------------------------------------------------------

    async def run(
        self, input: str | Sequence[Message] | None, *, start_agent: Agent[Any] | None = None
    ) -> tuple[str, Agent[Any], str]:
        """Continue the session with ``input`` (``None`` resumes where the log stopped).

        Returns the final answer, the agent that gave it, and why the run ended (when a rule,
        tool or guardrail ended it); the events are in ``new_events``.
        """
        pieces = self.pieces
        begun = await begin_run(pieces, input, start_agent)
        agent, span = begun.agent, begun.span
        try:
            if pieces.log.session.persistent:
                await pieces.flush()
            final, agent, reason = await self._main(agent, span, begun.pending)
        except Interrupted as stop:
            await interrupted(pieces, stop, agent, span)
            raise
        except BaseException as exc:
            await failed(pieces, exc, agent, span)
            raise
        await completed(pieces, final, agent, reason, span)
        return final, agent, reason

    async def _main(self, agent: Agent[Any], span: Span, pending: list[ToolCall]
                    ) -> tuple[str, Agent[Any], str]:
        """The run's turns, under the entry's timeout: (final answer, last agent, reason)."""
        entry = self.pieces.place.entry
        if entry.timeout is not None:
            try:
                async with asyncio.timeout(entry.timeout):
                    return await self.drive(agent, span, pending)
            except TimeoutError:
                raise RunTimeout(entry.name, entry.timeout) from None
        if not agent.is_composite or agent is entry:
            return await self.drive(agent, span, pending)
        # Resumed inside a workflow a handoff brought control to: it finishes, then the agent
        # that transferred goes on.
        final, agent, _, ended = await self._through(agent, span, span, pending)
        if not (self.stopped or ended or agent.is_composite):
            return self._ended(await self.turns_of(agent, span, []))
        return final, agent, "guardrail" if self.pieces.control.blocked else ""

    async def drive(
        self, agent: Agent[Any], parent: Span, pending: list[ToolCall]
    ) -> tuple[str, Agent[Any], str]:
        """Run ``agent`` (or a workflow) until a final answer: (text, last agent, reason)."""
        if agent.is_composite:
            composite: Composite = agent  # type: ignore[assignment]
            return await composite.run_composite(self, parent, pending)
        if agent.pattern == "swarm" and agent is not self.pieces.place.entry:
            # A swarm inside a workflow or team: its hop limit holds while it runs, only.
            with self.pieces.transfers.swarm(agent.max_handoffs):
                return await self.drive(agent.sub_agents[0], parent, pending)
        return self._ended(await self.turns_of(agent, parent, pending))

    def _ended(self, spoke: Spoke) -> tuple[str, Agent[Any], str]:
        """What ``drive`` returns once an agent's turns end: (text, last agent, reason)."""
        match spoke.route:
            case End(scope="run", reason=reason):
                self.pieces.control.finish()
            case End(reason=reason) if self.pieces.control.loops:
                self.pieces.control.leaving_loop = True
            case End():  # no loop to leave: the turn ended, like an answer
                reason = ""
            case _:
                reason = "guardrail" if self.pieces.control.blocked else ""
        return spoke.text, spoke.agent, reason

    # -- what composite agents ask of the run (``workflows.Driver``) -----------------------

    async def speak(self, agent: Agent[Any], span: Span,
                    pending: list[ToolCall]) -> SpeakerTurn:
        """One team member's turn; a typed ``TransferTo`` ends it for the team to route."""
        spoke = await self.turns_of(agent, span, pending, team=True)
        signal: TransferTo | Finish | None = None
        match spoke.route:
            case End(scope="run", reason=reason, summary=summary):
                signal = Finish(reason, summary)
            case RouteTo(name=name, reason=reason):
                signal = TransferTo(name, reason)
        return SpeakerTurn(spoke.text, spoke.agent, signal, frozenset(self.pieces.scope.called))


    @property
    def transcript(self) -> list[Message]:
        """The session's conversation so far."""
        return self.pieces.views.transcript

    @property
    def resuming(self) -> bool:
        """Whether the run continues an interrupted one (``input=None``)."""
        return self.pieces.control.resuming

    @property
    def blocked(self) -> str | None:
        """A guardrail's answer that ended the run, if one did."""
        return self.pieces.control.blocked

    @property
    def context(self) -> Any:
        """The run's context object."""
        return self.pieces.state.context

    def say(self, agent: Agent[Any], text: str) -> None:
        """Add ``agent``'s answer to the conversation."""
        self.pieces.say(agent, text)

    def route(self, speaker: Agent[Any], to: Agent[Any], why: str) -> None:
        """A team passes the conversation from ``speaker`` to ``to``."""
        self.pieces.log.add(HandoffEvent(agent=speaker.name, path=self.pieces.path(speaker),
                                         to_agent=to.name, reason=why))
        self.pieces.note(to, f"[{speaker.name} -> {to.name}] {why}")

    def finish(self) -> None:
        """End the run after this member (a tool returned ``Finish``)."""
        self.pieces.control.finish()

    @contextmanager
    def loop_scope(self) -> Iterator[None]:
        """A ``LoopAgent`` runs: a step's ``Finish(scope="loop")`` ends it, and only it."""
        self.pieces.control.loops += 1
        try:
            yield
        finally:
            self.pieces.control.loops -= 1
            self.pieces.control.leaving_loop = False

    @property
    def leaving_loop(self) -> bool:
        """Whether a step left the innermost loop (``Finish(scope="loop")``)."""
        return self.pieces.control.leaving_loop

    @contextmanager
    def team_scope(self, input_guardrails: tuple[Guardrail, ...],
                   output_guardrails: tuple[Guardrail, ...]) -> Iterator[None]:
        """A team's guardrails hold for its members while it runs, only."""
        saved = self.pieces.scope.enter_team(input_guardrails, output_guardrails)
        try:
            yield
        finally:
            self.pieces.scope.leave_team(saved)

    def take_start_member(self) -> Agent[Any] | None:
        """The member ``start_agent`` named for the entry team's run, once."""
        return self.pieces.scope.take_start_member()

    @property
    def stopped(self) -> bool:
        """Whether the run must end now (a Finish, or a guardrail's block)."""
        return self.pieces.control.finished or self.pieces.control.blocked is not None

    def path(self, agent: Agent[Any]) -> str:
        """The delegation path of ``agent`` in this loop."""
        return self.pieces.path(agent)

    def note(self, agent: Agent[Any], text: str) -> None:
        """Add a framework note to the conversation."""
        self.pieces.note(agent, text)

    def answer_dangling(self, agent: Agent[Any], why: str) -> None:
        """Give every unanswered call a result, so the session stays valid."""
        self.pieces.answer_dangling(agent, why)

    def context_for(self, agent: Agent[Any], *, span: Span | None = None) -> RunContext[Any]:
        """A run context for ``agent``."""
        return self.pieces.context_for(agent, span=span)

    async def turns_of(
        self, agent: Agent[Any], run_span: Span, pending: list[ToolCall], *, team: bool = False
    ) -> Spoke:
        """Model turns and tool calls, following handoffs, until a final answer.

        In a team, a typed ``TransferTo`` ends the turn instead, for the team to route.
        """
        pieces = self.pieces
        pieces.scope.speaker_turn(team)
        blocked = input_block(pieces, agent)
        if blocked is not None:
            pieces.control.block(blocked)
            return Spoke(pieces.say(agent, blocked), agent)
        resumed = pieces.views.take_remembered()  # for the agent the run starts with, only
        if resumed is None:
            pieces.views.show(agent.name)
        else:
            view = await pieces.filtered_view(agent, resumed, pieces.views.note)
            pieces.views.show(agent.name, view, resumed)
        trace = pieces.state.trace
        agent_span = trace.start("agent", agent.name, run_span)
        last_text = ""
        try:
            while True:  # a dispatcher over what each turn decides
                turn = await self.take_turn(agent, agent_span, pending, team)
                pending = []
                if turn.message is not None and turn.message.content:
                    last_text = turn.message.content
                active = await self._follow(agent, agent_span, run_span, turn.next, last_text)
                agent, agent_span = active.agent, active.span
                if active.spoke is not None:
                    return active.spoke
        except BaseException as exc:
            trace.end(agent_span, exc)
            raise
        finally:
            if not agent_span.end_ns:
                trace.end(agent_span)

    async def _follow(self, agent: Agent[Any], agent_span: Span, run_span: Span, step: Next,
                      last_text: str) -> _Active:
        """What ``step``, the turn's `Next`, makes of ``agent``'s turns: who holds the turn
        now, and the turns' end if they ended."""
        pieces = self.pieces
        match step:
            case RunAgain():
                return _Active(agent, agent_span)
            case Answer(text=text):
                return _Active(agent, agent_span, Spoke(text, agent))
            case Blocked(answer=answer):
                return _Active(agent, agent_span, Spoke(pieces.say(agent, answer),
                                                        agent))
            case Finished(text=text, route=end):
                return _Active(agent, agent_span,
                               Spoke(text or guard_text(pieces, agent, last_text), agent, end))
            case TeamRoute(route=routed):
                return _Active(agent, agent_span, Spoke(last_text, agent, routed))
            case Transfer() | Return() as route:
                active = await self._move(agent, route, agent_span, run_span)
                if active.spoke is not None:
                    return active
                agent, agent_span = active.agent, active.span
            case HandBack(target=target, text=text):
                person = agent
                agent, agent_span = self._handed_back(agent, target, agent_span, run_span)
                if text:  # the person answered this turn; the agent takes the next
                    return _Active(agent, agent_span, Spoke(text, person))
            case Yield(caller=caller):
                pieces.returned(agent, caller, "answered")
                pieces.note(caller, f"[{agent.name} answered and returned control to "
                                    f"{caller.name}]")
                agent, agent_span = self._switch(agent, caller, agent_span, run_span)
        blocked = pieces.control.blocked
        if blocked is not None:  # the new agent's input guardrails
            return _Active(agent, agent_span, Spoke(pieces.say(agent, blocked), agent))
        return _Active(agent, agent_span)

    async def _move(self, agent: Agent[Any], route: Transfer | Return, agent_span: Span,
                    run_span: Span) -> _Active:
        """Control moves as ``agent``'s turn confirmed: logged, and the target made active (a
        workflow target runs its steps, then its caller goes on)."""
        pieces = self.pieces
        transfer = log_move(pieces, agent, route)
        # The call's result and the move: one batch, so a crash cannot leave a persistent log
        # with the old agent told "Transferred" (or "Returned") and still active. A memory log
        # ends with the process: it takes them with its next write (before a tool runs, or the
        # run's end), one write for a chain of handoffs, not one per move.
        if pieces.log.session.persistent:
            await pieces.flush()
        agent, agent_span = self._switch(agent, route.target, agent_span, run_span, transfer)
        if agent.is_composite and pieces.control.blocked is None:
            final, agent, agent_span, ended = await self._through(agent, agent_span, run_span,
                                                                  [])
            if self.stopped or ended:
                return _Active(agent, agent_span, Spoke(final, agent))
        return _Active(agent, agent_span)

    async def take_turn(self, agent: Agent[Any], agent_span: Span, pending: list[ToolCall],
                        team: bool) -> TurnResult:
        """One turn of ``agent``: a model request (or the calls an earlier run left pending),
        every tool call answered, and what happens next."""
        if pending:
            asked = await self._resumed_calls(agent, pending)
        elif agent.is_human:  # a person's turn: no model call
            return await human_turn(self.pieces, agent)
        else:
            asked = await self._ask_model(agent, agent_span)
        if type(asked) is TurnResult:
            return asked
        assert type(asked) is _ToRun
        return await self._run_calls(agent, agent_span, asked, team)

    async def _resumed_calls(self, agent: Agent[Any], pending: list[ToolCall]
                             ) -> TurnResult | _ToRun:
        """The calls an earlier run logged and left unanswered, to run now; a final output
        among them (logged before a crash) is checked first."""
        pieces = self.pieces
        calls = pending
        output = agent.output
        if output is not None and any(c.name == OUTPUT_TOOL for c in calls):
            answer, given = check_output(pieces, agent, output,
                                         model_of(agent, pieces.state.model_override),
                                         Message("assistant", "", tuple(calls)))
            if answer is not None:
                return TurnResult(None, Answer(answer))
            if not given:
                await pieces.flush()
                return TurnResult(None, RUN_AGAIN)
            calls = list(given)
        return _ToRun(None, calls, await pieces.offer(agent))

    async def _ask_model(self, agent: Agent[Any], agent_span: Span) -> TurnResult | _ToRun:
        """A model turn of ``agent``: its answer ends the turn, or its calls are to run."""
        pieces = self.pieces
        control = pieces.control
        if control.turns >= control.max_turns:
            raise MaxTurnsExceeded(control.max_turns)
        blocked = await recheck_input(pieces, agent)
        if blocked is not None:
            return TurnResult(None, Blocked(blocked))
        control.count_turn(agent.name, agent.max_turns
                           if agent is not pieces.place.entry else None)
        offer = await pieces.offer(agent)
        message = await model_turn(pieces, agent, offer, agent_span)
        if message is None:  # calls written as text: the model was told to make them
            return TurnResult(None, RUN_AGAIN)
        answer: str | None = message.content
        given = message.tool_calls
        if agent.output is not None and control.blocked is None:
            answer, given = check_output(pieces, agent, agent.output,
                                         model_of(agent, pieces.state.model_override), message)
            if answer is None and not given:  # the model was told what to fix
                await pieces.flush()
                return TurnResult(message, RUN_AGAIN)
        if given:
            return _ToRun(message, list(given), offer)
        assert answer is not None
        caller = pieces.caller() if agent.mode == "single_turn" else None
        if caller is not None and not control.blocked:
            return TurnResult(message, Yield(caller))
        return TurnResult(message, Answer(answer))

    async def _run_calls(self, agent: Agent[Any], agent_span: Span, asked: _ToRun,
                         team: bool) -> TurnResult:
        """Answer every call of the turn, and say what happens next."""
        pieces = self.pieces
        message, calls = asked.message, asked.calls
        if team:  # routing rules look at what the speaker called
            pieces.scope.called.update([c.name for c in calls])
        route = await run_tools(pieces, agent, calls, agent_span, asked.offer)
        blocked = pieces.control.blocked
        if blocked is not None:
            await pieces.flush()
            return TurnResult(message, Blocked(blocked))
        match route:
            case None:
                if pieces.log.session.persistent:  # a memory log is written before tools run
                    await pieces.flush()
                return TurnResult(message, RUN_AGAIN)
            case Transfer() | Return():  # its result is written with the move (``_move``)
                return TurnResult(message, route)
            case End(summary=summary):
                await pieces.flush()
                return TurnResult(message, Finished(summary, route))
            case RouteTo():  # in a team; elsewhere it became a transfer by name
                await pieces.flush()
                return TurnResult(message, TeamRoute(route))

    async def _through(self, workflow: Agent[Any], span: Span, run_span: Span,
                       pending: list[ToolCall]) -> tuple[str, Agent[Any], Span, bool]:
        """Run a workflow a handoff brought control to, then give control back to the agent
        that transferred (logged like a task's return): (its answer, who is active, span,
        whether the run ends with the workflow's answer).

        With ``ends_turn`` and an answer in text, the run ends there and the agent that
        transferred takes the next user turn; otherwise that agent goes on now.
        """
        final, last, _ = await self.drive(workflow, span, pending)
        caller = self.pieces.caller()
        if self.stopped or caller is None:
            return final, last, span, False
        self.pieces.returned(workflow, caller, final)
        flow: Composite = workflow  # type: ignore[assignment]
        if flow.ends_turn and _answered(self.pieces.views.transcript, last):
            self.pieces.state.trace.end(span)
            return final, last, self.pieces.state.trace.start("agent", caller.name, run_span), True
        self.pieces.note(caller, f"[{workflow.name} finished its steps and returned control to "
                          f"{caller.name}]")
        agent, span = self._switch(workflow, caller, span, run_span)
        return final, agent, span, False

    def _handed_back(self, person: Agent[Any], target: Agent[Any], span: Span,
                     run_span: Span) -> tuple[Agent[Any], Span]:
        """A person hands the conversation back to ``target``, which holds it from now on."""
        self.pieces.log.add(HandoffEvent(agent=person.name, path=self.pieces.path(person),
                                  to_agent=target.name,
                                  reason=f"{person.name} handed the conversation back"))
        self.pieces.note(target, f"[{person.name} handed the conversation back to {target.name}]")
        return self._switch(person, target, span, run_span)

    def _switch(self, agent: Agent[Any], target: Agent[Any], agent_span: Span, run_span: Span,
                route: Transfer | None = None) -> tuple[Agent[Any], Span]:
        """Make ``target`` the active agent: its guardrails, its view, and its span.

        A transfer's target was checked, and its filtered view made, before the transfer was
        confirmed; a return is checked here, and a block there ends the run
        (``control.blocked``).
        """
        pieces = self.pieces
        trace = pieces.state.trace
        trace.end(agent_span)
        if target.input_guardrails or pieces.scope.team_input:  # else nothing to check
            blocked = input_block(pieces, target)
            if blocked is not None:
                pieces.control.block(blocked)
        pieces.transfers.given = None if route is None or route.context is None else (
            target.name, route.context)
        if route is not None and route.note is not None:
            pieces.views.keep_note(route.note)
        if route is None or route.view is None:
            pieces.views.show(target.name)
        else:
            pieces.views.show(target.name, route.view, route.handoff)
        return target, trace.start("agent", target.name, run_span)


def _answered(transcript: Sequence[Message], agent: Agent[Any]) -> bool:
    """Whether the conversation ends with ``agent``'s answer (not a call, nor a tool result)."""
    last = transcript[-1] if transcript else None
    return last is not None and last.role == "assistant" and last.name == agent.name and \
        not last.tool_calls
