"""Replay: a stored conversation's user turns again, on another model or a changed team, and
where the new trajectory diverged from the stored one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from relayrace import Agent, Model, Runner
from relayrace.core.events import AgentEvent
from relayrace.sessions import Session

from .capture import user_turns
from .trajectory import Trajectory, handoff_tools, read_trajectory

__all__ = ["Divergence", "first_divergence", "replay"]


@dataclass(slots=True, frozen=True)
class Divergence:
    """Where two trajectories part: the step index and each one's step there."""

    step: int
    """The first step (from 0) that differs."""
    stored: str
    """The stored trajectory's step (``(end)`` past its last)."""
    replayed: str
    """The replayed trajectory's step."""
    shared: list[str]
    """The steps both took before."""


def first_divergence(stored: Trajectory, replayed: Trajectory) -> Divergence | None:
    """Where ``replayed`` first differs from ``stored`` (``None``: the same steps)."""
    a, b = stored.steps, replayed.steps
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    if i == len(a) == len(b):
        return None
    return Divergence(i, a[i] if i < len(a) else "(end)", b[i] if i < len(b) else "(end)",
                      a[:i])


async def replay(team: Agent[Any], stored: Sequence[AgentEvent], *,
                 model: Model | str | None = None, context: Any = None,
                 session: Session | None = None) -> tuple[Trajectory, Trajectory]:
    """Say the stored log's user turns to ``team`` again (in ``session``, else a new memory
    one); the stored and the replayed trajectory."""
    handoffs = handoff_tools(team)
    before = read_trajectory(stored, handoffs=handoffs)
    events: list[AgentEvent] = []
    output: Any = None
    for said in user_turns(stored):
        result = await Runner.run(team, said, session=session, model=model, context=context)
        session = result.session
        events.extend(result.new_events)
        output = result.final_output
    return before, read_trajectory(events, handoffs=handoffs, final_output=output)
