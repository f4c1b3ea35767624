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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..agents.agent import Agent
from ..agents.approvals import Interrupted
from ..agents.output import OUTPUT_TOOL
from ..core.events import HandoffEvent, MessageEvent, RunFinishedEvent, RunStartedEvent
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
from .context import remember, remembers
from .guarding import guard_text, input_block
from .modelcall import model_turn
from .pieces import Pieces
from .start import start
from .state import RunState, model_of, unanswered_calls
from .steps import begin_attempt
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
    from ..agents.tools import Tool
    from ..teams.workflows import Composite



class AgentLoop(Pieces):
    """Drives one session until an agent gives its final answer."""

    __slots__ = ()

    def __init__(
        self, state: RunState, entry: Agent[Any], session: Session, *, path_prefix: str = "",
        parent_span: Span | None = None, max_turns: int | None = None,
        max_handoffs: int | None = None, depth: int = 0, instructions_suffix: str = "",
        variables: dict[str, Any] | None = None, extra_tools: tuple[Tool, ...] = (),
    ) -> None:
        super().__init__(state, entry, session, path_prefix, parent_span, max_turns,
                         max_handoffs, depth, instructions_suffix, variables, extra_tools)
        self.children = ChildRuns(self, AgentLoop)

    # -- the run -----------------------------------------------------------------------------

    async def run(
        self, input: str | Sequence[Message] | None, *, start_agent: Agent[Any] | None = None
    ) -> tuple[str, Agent[Any], str]:
        """Continue the session with ``input`` (``None`` resumes where the log stopped).

        Returns the final answer, the agent that gave it, and why the run ended (when a rule,
        tool or guardrail ended it); the events are in ``new_events``.
        """
        state = self.state
        log = await self.log.session.view()
        run_id = ""
        if state.steps is not None and not self.place.depth:
            input, start_agent, run_id = await begin_attempt(state.steps, log, input,
                                                             start_agent)
        agent = start(self, log, input, start_agent)
        name, path = agent.name, self.path(agent)
        span = state.trace.start("run" if self.place.parent_span is None else "delegation", path,
                                 self.place.parent_span, session_id=self.log.session.session_id,
                                 agent=name)
        self.log.add(RunStartedEvent(agent=name, path=path, trace_id=state.trace.trace_id,
                                     run_id=run_id))
        pending = unanswered_calls(self.views.transcript)
        self.control.begin(resuming=input is None)
        if input is not None:
            if pending:
                self.answer_dangling(agent, "the run was interrupted")
                pending = []
            for message in [Message("user", input)] if isinstance(input, str) else input:
                self.push(message)
                self.log.add(MessageEvent(agent=name, path=path, message=message))
        try:
            if self.log.session.persistent:
                await self.flush()
            if self.place.entry.timeout is not None:
                try:
                    async with asyncio.timeout(self.place.entry.timeout):
                        final, agent, reason = await self.drive(agent, span, pending)
                except TimeoutError:
                    raise RunTimeout(self.place.entry.name, self.place.entry.timeout) from None
            elif agent.is_composite and agent is not self.place.entry:
                # Resumed inside a workflow a handoff brought control to: it finishes, then
                # the agent that transferred goes on.
                final, agent, _, ended = await self._through(agent, span, span, pending)
                if not (self.stopped or ended or agent.is_composite):
                    final, agent, reason = self._ended(await self.turns_of(agent, span, []))
                else:
                    reason = "guardrail" if self.control.blocked else ""
            else:
                final, agent, reason = await self.drive(agent, span, pending)
        except Interrupted as stop:
            if self.place.parent_span is None:  # the outer run lists its children's requests too
                for p in stop.pending:
                    if p.session_id != self.log.session.session_id:
                        self.log.add(p.event(here=False))
            self.log.add(RunFinishedEvent(agent=agent.name, path=self.path(agent),
                                      status="interrupted", reason=stop.reason))
            await self.flush()
            state.trace.end(span)
            raise
        except BaseException as exc:
            if state.steps is not None and state.steps.superseded(exc):
                state.trace.end(span, exc)
                raise  # the run is another attempt's now: nothing of this one is logged
            self.answer_dangling(agent, f"the run stopped ({type(exc).__name__})")
            self.log.add(RunFinishedEvent(agent=agent.name, path=self.path(agent), status="failed",
                                      output=f"{type(exc).__name__}: {exc}"))
            await asyncio.shield(self.flush())
            state.trace.end(span, exc)
            raise
        # The final answer (not written on its own) and the run's end: one batch.
        self.log.add(RunFinishedEvent(agent=agent.name, path=self.path(agent), status="completed",
                                      output=final, reason=reason))
        await self.log.session.append(self.log.unwritten())  # never empty: the end was just added
        if remembers(self.place.entry):  # the answer is safe in the log whatever happens here
            try:
                await remember(self, span)
            except BaseException as exc:
                state.trace.end(span, exc)
                raise
        state.trace.end(span)
        return final, agent, reason

    async def drive(
        self, agent: Agent[Any], parent: Span, pending: list[ToolCall]
    ) -> tuple[str, Agent[Any], str]:
        """Run ``agent`` (or a workflow) until a final answer: (text, last agent, reason)."""
        if agent.is_composite:
            composite: Composite = agent  # type: ignore[assignment]
            return await composite.run_composite(self, parent, pending)
        if agent.pattern == "swarm" and agent is not self.place.entry:
            # A swarm inside a workflow or team: its hop limit holds while it runs, only.
            with self.transfers.swarm(agent.max_handoffs):
                return await self.drive(agent.sub_agents[0], parent, pending)
        return self._ended(await self.turns_of(agent, parent, pending))

    def _ended(self, spoke: Spoke) -> tuple[str, Agent[Any], str]:
        """What ``drive`` returns once an agent's turns end: (text, last agent, reason)."""
        match spoke.route:
            case End(scope="run", reason=reason):
                self.control.finish()
            case End(reason=reason) if self.control.loops:
                self.control.leaving_loop = True
            case End():  # no loop to leave: the turn ended, like an answer
                reason = ""
            case _:
                reason = "guardrail" if self.control.blocked else ""
        return spoke.text, spoke.agent, reason

    # -- what composite agents ask of the run (``workflows.Driver``; the rest is Pieces') --

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
        return SpeakerTurn(spoke.text, spoke.agent, signal, frozenset(self.scope.called))

    async def turns_of(
        self, agent: Agent[Any], run_span: Span, pending: list[ToolCall], *, team: bool = False
    ) -> Spoke:
        """Model turns and tool calls, following handoffs, until a final answer.

        In a team, a typed ``TransferTo`` ends the turn instead, for the team to route.
        """
        state = self.state
        self.scope.speaker_turn(team)
        blocked = input_block(self, agent)
        if blocked is not None:
            self.control.block(blocked)
            return Spoke(self.blocked_answer(agent, blocked), agent)
        resumed = self.views.take_remembered()  # for the agent the run starts with, only
        if resumed is None:
            self.views.show(agent.name)
        else:
            self.views.show(agent.name,
                            await self.filtered_view(agent, resumed, self.views.note), resumed)
        agent_span = state.trace.start("agent", agent.name, run_span)
        last_text = ""
        try:
            while True:  # a dispatcher over what each turn decides
                turn = await self.take_turn(agent, agent_span, pending, team)
                message, step = turn.message, turn.next
                pending = []
                if message is not None and message.content:
                    last_text = message.content
                match step:
                    case RunAgain():
                        continue
                    case Transfer() | Return() as route:
                        transfer = self._log_move(agent, route)
                        # The call's result and the move: one batch, so a crash cannot leave
                        # a persistent log with the old agent told "Transferred" (or
                        # "Returned") and still active. A memory log ends with the process:
                        # it takes them with its next write (before a tool runs, or the
                        # run's end), one write for a chain of handoffs, not one per move.
                        if self.log.session.persistent:
                            await self.flush()
                        agent, agent_span = self._switch(agent, route.target, agent_span,
                                                         run_span, transfer)
                        if agent.is_composite and self.control.blocked is None:
                            # A workflow target runs its steps, then its caller goes on.
                            final, agent, agent_span, ended = await self._through(
                                agent, agent_span, run_span, [])
                            if self.stopped or ended:
                                return Spoke(final, agent)
                    case Answer(text=text):
                        return Spoke(text, agent)
                    case Blocked(answer=answer):
                        return Spoke(self.blocked_answer(agent, answer), agent)
                    case Finished(text=text, route=end):
                        return Spoke(text or guard_text(self, agent, last_text), agent, end)
                    case TeamRoute(route=routed):
                        return Spoke(last_text, agent, routed)
                    case HandBack(target=target, text=text):
                        person, (agent, agent_span) = agent, self._handed_back(
                            agent, target, agent_span, run_span)
                        if text:  # the person answered this turn; the agent takes the next
                            return Spoke(text, person)
                    case Yield(caller=caller):
                        self.returned(agent, caller, "answered")
                        self.note(caller, f"[{agent.name} answered and returned control to "
                                          f"{caller.name}]")
                        agent, agent_span = self._switch(agent, caller, agent_span, run_span)
                if self.control.blocked is not None:  # the new agent's input guardrails
                    return Spoke(self.blocked_answer(agent, self.control.blocked), agent)
        except BaseException as exc:
            state.trace.end(agent_span, exc)
            raise
        finally:
            if not agent_span.end_ns:
                state.trace.end(agent_span)

    async def take_turn(self, agent: Agent[Any], agent_span: Span, pending: list[ToolCall],
                        team: bool) -> TurnResult:
        """One turn of ``agent``: a model request (or the calls an earlier run left pending),
        every tool call answered, and what happens next."""
        message: Message | None = None
        answer: str | None
        if pending:
            calls = pending
            output = agent.output
            if output is not None and any(c.name == OUTPUT_TOOL for c in calls):
                # A final output logged before a crash, never answered: checked now.
                answer, given = check_output(self, agent, output,
                                             model_of(agent, self.state.model_override),
                                             Message("assistant", "", tuple(calls)))
                if answer is not None:
                    return TurnResult(None, Answer(answer))
                if not given:
                    await self.flush()
                    return TurnResult(None, RUN_AGAIN)
                calls = list(given)
            offer = await self.offer(agent)
        elif agent.is_human:  # a person's turn: no model call
            return await human_turn(self, agent)
        else:
            if self.control.turns >= self.control.max_turns:
                raise MaxTurnsExceeded(self.control.max_turns)
            if agent.input_guardrails or self.scope.team_input:
                # What arrived during its own turn (tool results) is checked too.
                known = len(self.views.redact.get(agent.name, ()))
                blocked = input_block(self, agent)
                if blocked is not None:
                    self.control.block(blocked)
                    return TurnResult(None, Blocked(blocked))
                if len(self.views.redact.get(agent.name, ())) != known:
                    source = self.views.filter
                    if source is None:
                        self.views.show(agent.name)
                    else:
                        self.views.show(agent.name, await self.filtered_view(
                            agent, source, self.views.note), source)
            self.control.count_turn(agent.name, agent.max_turns
                                    if agent is not self.place.entry else None)
            offer = await self.offer(agent)
            message = await model_turn(self, agent, offer, agent_span)
            if message is None:  # calls written as text: the model was told to make them
                return TurnResult(None, RUN_AGAIN)
            answer = message.content
            given = message.tool_calls
            if agent.output is not None and self.control.blocked is None:
                answer, given = check_output(self, agent, agent.output,
                                             model_of(agent, self.state.model_override),
                                             message)
                if answer is None and not given:  # the model was told what to fix
                    await self.flush()
                    return TurnResult(message, RUN_AGAIN)
            if not given:
                assert answer is not None
                caller = self.caller() if agent.mode == "single_turn" else None
                if caller is not None and not self.control.blocked:
                    return TurnResult(message, Yield(caller))
                return TurnResult(message, Answer(answer))
            calls = list(given)
        if team:  # routing rules look at what the speaker called
            self.scope.called.update([c.name for c in calls])
        route = await run_tools(self, agent, calls, agent_span, offer)
        blocked = self.control.blocked
        if blocked is not None:
            await self.flush()
            return TurnResult(message, Blocked(blocked))
        match route:
            case None:
                if self.log.session.persistent:  # a memory log is written before tools run
                    await self.flush()
                return TurnResult(message, RUN_AGAIN)
            case Transfer() | Return():  # its result is written with the move (``turns_of``)
                return TurnResult(message, route)
            case End(summary=summary):
                await self.flush()
                return TurnResult(message, Finished(summary, route))
            case RouteTo():  # in a team; elsewhere it became a transfer by name
                await self.flush()
                return TurnResult(message, TeamRoute(route))

    def _log_move(self, agent: Agent[Any], route: Transfer | Return) -> Transfer | None:
        """Log a transfer or a task's return that ``agent``'s turn confirmed (the call's
        result is logged already); returns the transfer, if it is one."""
        match route:
            case Return(target=target, summary=summary):
                self.returned(agent, target, summary)
                return None
            case Transfer(target=target, handoff=h):
                # A task, single-turn or workflow target gives control back when it is done.
                returns_to = agent.name if target.mode in ("task", "single_turn") \
                    or target.is_composite else None
                if returns_to:
                    self.transfers.returns.append(returns_to)
                event = HandoffEvent(
                    agent=agent.name, path=self.path(agent), to_agent=target.name,
                    reason=route.reason or f"requested by {agent.name}",
                    tool_call_id=route.call.id, returns_to=returns_to)
                if h is not None and h.input_type is not None:
                    event.input = h.input_data(route.input)
                self.log.add(event)
                return route

    async def _through(self, workflow: Agent[Any], span: Span, run_span: Span,
                       pending: list[ToolCall]) -> tuple[str, Agent[Any], Span, bool]:
        """Run a workflow a handoff brought control to, then give control back to the agent
        that transferred (logged like a task's return): (its answer, who is active, span,
        whether the run ends with the workflow's answer).

        With ``ends_turn`` and an answer in text, the run ends there and the agent that
        transferred takes the next user turn; otherwise that agent goes on now.
        """
        final, last, _ = await self.drive(workflow, span, pending)
        caller = self.caller()
        if self.stopped or caller is None:
            return final, last, span, False
        self.returned(workflow, caller, final)
        flow: Composite = workflow  # type: ignore[assignment]
        if flow.ends_turn and _answered(self.views.transcript, last):
            self.state.trace.end(span)
            return final, last, self.state.trace.start("agent", caller.name, run_span), True
        self.note(caller, f"[{workflow.name} finished its steps and returned control to "
                          f"{caller.name}]")
        agent, span = self._switch(workflow, caller, span, run_span)
        return final, agent, span, False

    def _handed_back(self, person: Agent[Any], target: Agent[Any], span: Span,
                     run_span: Span) -> tuple[Agent[Any], Span]:
        """A person hands the conversation back to ``target``, which holds it from now on."""
        self.log.add(HandoffEvent(agent=person.name, path=self.path(person),
                                  to_agent=target.name,
                                  reason=f"{person.name} handed the conversation back"))
        self.note(target, f"[{person.name} handed the conversation back to {target.name}]")
        return self._switch(person, target, span, run_span)

    def _switch(self, agent: Agent[Any], target: Agent[Any], agent_span: Span, run_span: Span,
                route: Transfer | None = None) -> tuple[Agent[Any], Span]:
        """Make ``target`` the active agent: its guardrails, its view, and its span.

        A transfer's target was checked, and its filtered view made, before the transfer was
        confirmed; a return is checked here, and a block there ends the run
        (``control.blocked``).
        """
        trace = self.state.trace
        trace.end(agent_span)
        if target.input_guardrails or self.scope.team_input:  # else nothing to check
            blocked = input_block(self, target)
            if blocked is not None:
                self.control.block(blocked)
        if route is not None and route.note is not None:
            self.views.keep_note(route.note)
        if route is None or route.view is None:
            self.views.show(target.name)
        else:
            self.views.show(target.name, route.view, route.handoff)
        return target, trace.start("agent", target.name, run_span)


def _answered(transcript: Sequence[Message], agent: Agent[Any]) -> bool:
    """Whether the conversation ends with ``agent``'s answer (not a call, nor a tool result)."""
    last = transcript[-1] if transcript else None
    return last is not None and last.role == "assistant" and last.name == agent.name and \
        not last.tool_calls
