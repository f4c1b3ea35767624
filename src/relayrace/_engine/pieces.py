"""The pieces of one loop, and the bookkeeping every step of a turn does with them.

`Pieces` holds what a loop keeps (``loopstate``: where it sits, its event log, the views,
the calls in flight, transfers, a team's scope, control) with the run's shared `RunState`, and
does the small things every engine step needs: an agent's path, a note, a tool call's result,
a run context, the tools an agent has and what a turn offers it. Engine helpers take the
pieces; only ``loop.AgentLoop``, the algorithm over them, drives a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..agents.context import RunContext
from ..agents.handoffs import filter_messages
from ..core.events import HandoffEvent, MessageEvent, ToolResultEvent
from ..core.messages import NOTE, Message, ToolCall
from .callkey import CallKey
from .loopstate import (
    DEFAULT_MAX_TURNS,
    Calls,
    Control,
    EventLog,
    Place,
    Scope,
    Transfers,
    Views,
)
from .offer import Offer, offer_of
from .plan import outcome_unknown
from .state import RunState, Toolset, listed_toolset_of, model_of, toolset_of, unanswered_calls

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.context import ChildRunner
    from ..agents.handoffs import Handoff
    from ..agents.tools import Tool
    from ..sessions.base import Session
    from ..tracing import Span

__all__ = ["Pieces"]


class Pieces:
    """A loop's pieces, shared by the steps of its turns (see the module's docstring)."""

    __slots__ = ("__weakref__", "calls", "children", "control", "log", "place", "scope", "state",
                 "transfers", "views")

    children: ChildRunner
    """What starts delegated children (``RunContext.children``); the loop sets it."""

    def __init__(
        self, state: RunState, entry: Agent[Any], session: Session, path_prefix: str,
        parent_span: Span | None, max_turns: int | None, max_handoffs: int | None, depth: int,
        instructions_suffix: str, variables: dict[str, Any] | None, extra_tools: tuple[Tool, ...],
    ) -> None:
        self.state = state
        self.place = Place(entry, path_prefix, parent_span, depth, instructions_suffix, variables,
                           extra_tools)
        # A durable run's log takes what its steps record with the next write that must be on
        # record; a run carrying a person's decisions writes as it goes (they are no step's).
        self.log = EventLog(session, state.emit,
                            state.steps is not None and state.approvals is None)
        self.views = Views()
        self.calls = Calls()
        swarm = entry.pattern == "swarm"
        self.transfers = Transfers(entry.max_handoffs if swarm else max_handoffs, swarm)
        self.scope = Scope()
        self.control = Control(max_turns or entry.max_turns or DEFAULT_MAX_TURNS)

    # -- bookkeeping -------------------------------------------------------------------------

    def path(self, agent: Agent[Any]) -> str:
        """The delegation path of ``agent`` in this loop."""
        return self.place.prefix + agent.name  # "" + name is name itself

    def push(self, message: Message) -> None:
        """Append a message to the conversation (and to the active agent's own view)."""
        self.views.push(message)

    def note(self, agent: Agent[Any], text: str) -> None:
        """Add a framework note to the conversation, as a user-role message named NOTE."""
        message = Message("user", text, name=NOTE)
        self.push(message)
        self.log.add(MessageEvent(agent=agent.name, path=self.path(agent), message=message))

    async def flush(self) -> None:
        """Write the pending events to the session in one batch."""
        await self.log.flush()

    def context_for(
        self, agent: Agent[Any], call: CallKey | None = None, span: Span | None = None
    ) -> RunContext[Any]:
        """A run context for ``agent`` (serving the tool ``call``, if given)."""
        state = self.state
        return RunContext(context=state.context, agent=agent, path=self.path(agent),
                          session=self.log.session, usage=state.budget.usage,
                          tool_call_id=call.call.id if call is not None else "",
                          call_key=call.context_key if call is not None else "",
                          messages=self.views.view, depth=self.place.depth, span=span,
                          children=self.children)

    def call_key(self, call: ToolCall) -> CallKey:
        """The identity of ``call``, of the batch of calls running now."""
        return CallKey(self.log.session.session_id, self.calls.batch_at, call)

    def toolset(self, agent: Agent[Any]) -> Toolset:
        """The tools ``agent`` is offered now: its own (kept on the agent, made anew when its
        transfers or permissions change, so a change applies from its next turn) with the
        tools every agent of this loop gets; for an agent with toolsets, as this loop's offer
        last listed them (``offer``)."""
        place = self.place
        if agent.toolsets:
            ts = place.toolsets.get(agent.name)
            if ts is not None:
                return ts
        own = toolset_of(agent)
        extra = place.extra_tools
        if not extra:
            return own
        ts = place.toolsets.get(agent.name)
        if ts is None or ts.source is not own.source or ts.permissions is not own.permissions:
            ts = place.toolsets[agent.name] = self.offered(own)
        return ts

    def offered(self, ts: Toolset) -> Toolset:
        """``ts`` with the tools every agent of this loop gets besides its own, if any."""
        extra = self.place.extra_tools
        return Toolset(ts.agent, ts.listed, extra) if extra else ts

    async def offer(self, agent: Agent[Any]) -> Offer:
        """What ``agent`` is offered this turn, its gates asked once: the request carries it,
        and the turn's calls are checked against it. Its toolsets are listed now: a server may
        have changed its tools since the last turn."""
        if agent.toolsets:
            ts = self.place.toolsets[agent.name] = self.offered(await listed_toolset_of(agent))
        else:
            ts = self.toolset(agent)
        transfers = self.transfers
        owes = bool(transfers.returns)
        used_up = transfers.used_up()
        spec = agent.output
        return await offer_of(
            ts, finish_task=agent.mode == "task" and owes, refuse_handoffs=used_up,
            hide_handoffs=used_up or (agent.mode == "single_turn" and owes),
            context=lambda: self.context_for(agent), spec=spec,
            model=model_of(agent, self.state.model_override) if spec is not None else None)

    def caller(self) -> Agent[Any] | None:
        """The agent a ``task``/``single_turn`` agent returns to."""
        returns = self.transfers.returns
        return self.place.entry.find_agent(returns[-1]) if returns else None

    def tool_result(self, agent: Agent[Any], call: ToolCall, content: str, *,
                    is_error: bool = False, tb: str | None = None,
                    full: str | None = None) -> ToolResultEvent:
        """The result event for ``call`` (``full``: the whole result ``content`` was cut from)."""
        name = call.name
        return ToolResultEvent(agent=agent.name, path=self.path(agent),
                               message=Message("tool", content, (), call.id, name),
                               tool_name=name, is_error=is_error, traceback=tb,
                               full_content=full)

    def hold(self, results: Sequence[ToolResultEvent | None]) -> None:
        """Keep finished results of a turn the run's end interrupts, for ``answer_dangling``.

        A later call may finish before an earlier one is cut short; logged there, each result
        takes its call's place.
        """
        self.calls.hold(results)

    def answer_dangling(self, agent: Agent[Any], why: str) -> None:
        """Give every unanswered call a result, in order, so the session stays valid."""
        held = self.calls.held or {}
        for call in unanswered_calls(self.views.transcript):
            ev = held.pop(call.id, None)
            if ev is None:
                started = self.calls.unknown.get(call.id)
                if started is not None and call.id in self.calls.asked:  # new input came
                    text = ("Not finished: this call was waiting for a person's answer or "
                            "decision, and the conversation went on without it. What it did "
                            "before it stopped may have taken effect.")
                elif started is not None:
                    text = outcome_unknown(started, why)
                elif call.id in self.calls.running:
                    text = (f"Outcome unknown: {why} while this call was running; check its "
                            "effect before retrying.")
                else:
                    text = f"Not executed: {why} before this call started."
                ev = self.tool_result(agent, call, text, is_error=True)
            self.push(ev.message)
            if id(ev) in self.log.logged:  # recorded when its call finished
                self.log.logged.discard(id(ev))
            else:
                self.log.add(ev)

    # -- views --------------------------------------------------------------------------

    async def filtered_view(self, agent: Agent[Any], source: Handoff, note: Message | None,
                            extra: Sequence[Message] = ()) -> list[Message]:
        """What the input filter of ``source`` keeps of the conversation, plus ``extra``
        (results about to be logged), redacted for ``agent``; the transfer's ``note`` stays
        visible. A failing filter raises ``UserError``."""
        redact = self.views.redact.get(agent.name)
        base = [*self.views.transcript, *extra]
        if redact:
            base = [redact.get(id(m), m) for m in base]
        view = await filter_messages(source, base)
        if note is not None:
            note = redact.get(id(note), note) if redact else note
            if not view or view[-1] is not note:
                # Keep the reason visible, as a note: a system message mid-conversation is
                # refused by some servers' chat templates.
                view.append(Message("user", note.content, name=NOTE))
        return view

    def say(self, agent: Agent[Any], text: str) -> str:
        """Add ``agent``'s answer ``text`` to the conversation (a guardrail's, ending a turn;
        a team member's); returns it."""
        message = Message.assistant(text, name=agent.name)
        self.push(message)
        self.log.add(MessageEvent(agent=agent.name, path=self.path(agent), message=message))
        return text

    def returned(self, agent: Agent[Any], caller: Agent[Any], result: str) -> None:
        """Log that ``agent`` returned control (and ``result``) to ``caller``, which it owed
        a return."""
        if self.transfers.returns:
            self.transfers.returns.pop()
        self.log.add(HandoffEvent(agent=agent.name, path=self.path(agent), to_agent=caller.name,
                                  reason=f"returned: {result}"[:500], is_return=True))
