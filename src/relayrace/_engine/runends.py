"""How a run begins and ends in its session's log: the start and the input logged; the end
logged as the run completed, stopped for a person or failed (``loop.AgentLoop.run`` between).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.events import MessageEvent, RunFinishedEvent, RunStartedEvent
from ..core.messages import Message
from .context import remember, remembers
from .start import start
from .state import unanswered_calls
from .steps import begin_attempt

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.approvals import Interrupted
    from ..core.messages import ToolCall
    from ..tracing import Span
    from .pieces import Pieces

__all__ = ["Begun", "begin_run", "completed", "failed", "interrupted"]


@dataclass(frozen=True, slots=True)
class Begun:
    """A run that began: the agent it starts with, its span, and the calls the log left
    pending (to answer first)."""

    agent: Agent[Any]
    span: Span
    pending: list[ToolCall]


async def begin_run(pieces: Pieces, input: str | Sequence[Message] | None,
                    start_agent: Agent[Any] | None) -> Begun:
    """The run starts: the log read, the agent chosen, the run's span opened, its start
    and input logged."""
    state, place = pieces.state, pieces.place
    log = await pieces.log.session.view()
    run_id = ""
    if state.steps is not None and not place.depth:
        input, start_agent, run_id = await begin_attempt(state.steps, log, input,
                                                         start_agent)
    agent = start(pieces, log, input, start_agent)
    name, path = agent.name, pieces.path(agent)
    span = state.trace.start("run" if place.parent_span is None else "delegation", path,
                             place.parent_span, session_id=pieces.log.session.session_id,
                             agent=name)
    pieces.log.add(RunStartedEvent(agent=name, path=path, trace_id=state.trace.trace_id,
                                   run_id=run_id))
    pending = unanswered_calls(pieces.views.transcript)
    pieces.control.begin(resuming=input is None)
    if input is not None:
        if pending:
            pieces.answer_dangling(agent, "the run was interrupted")
            pending = []
        for message in [Message("user", input)] if isinstance(input, str) else input:
            pieces.push(message)
            pieces.log.add(MessageEvent(agent=name, path=path, message=message))
    return Begun(agent, span, pending)


async def interrupted(pieces: Pieces, stop: Interrupted, agent: Agent[Any], span: Span
                      ) -> None:
    """The run stopped for a person: what it waits for logged with its end."""
    if pieces.place.parent_span is None:  # the outer run lists its children's requests too
        for p in stop.pending:
            if p.session_id != pieces.log.session.session_id:
                pieces.log.add(p.event(here=False))
    pieces.log.add(RunFinishedEvent(agent=agent.name, path=pieces.path(agent),
                                    status="interrupted", reason=stop.reason))
    await pieces.flush()
    pieces.state.trace.end(span)

async def failed(pieces: Pieces, exc: BaseException, agent: Agent[Any], span: Span) -> None:
    """The run failed: every call answered, and its end logged (unless another attempt of
    a durable run took it over: then nothing of this one is)."""
    steps = pieces.state.steps
    if steps is None or not steps.superseded(exc):
        pieces.answer_dangling(agent, f"the run stopped ({type(exc).__name__})")
        pieces.log.add(RunFinishedEvent(agent=agent.name, path=pieces.path(agent),
                                        status="failed",
                                        output=f"{type(exc).__name__}: {exc}"))
        await asyncio.shield(pieces.flush())
    pieces.state.trace.end(span, exc)

async def completed(pieces: Pieces, final: str, agent: Agent[Any], reason: str,
                    span: Span) -> None:
    """The final answer (not written on its own) and the run's end, in one batch; then
    what agents with memory keep of the run."""
    pieces.log.add(RunFinishedEvent(agent=agent.name, path=pieces.path(agent),
                                    status="completed", output=final, reason=reason))
    await pieces.log.session.append(pieces.log.unwritten())  # never empty: the end is in
    if remembers(pieces.place.entry):  # the answer is safe in the log whatever happens here
        try:
            await remember(pieces, span)
        except BaseException as exc:
            pieces.state.trace.end(span, exc)
            raise
    pieces.state.trace.end(span)
