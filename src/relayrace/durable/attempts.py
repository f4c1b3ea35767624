"""A worker's attempts of a durable run: the team run (or resumed) from its session log,
again after a stale attempt's conflict, until one ends the run; and what the run came to."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from .._engine.steps import AttemptEnded
from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..core.events import RunFinishedEvent
from ..core.exceptions import (
    DurableRunError,
    RelayraceError,
    SessionConflictError,
    SessionInUseError,
)
from ..runner import RunOptions, run_with
from ..sessions.base import Session
from .results import output_of
from .workflow import _DbosSteps

__all__ = ["attempts"]

_log = logging.getLogger("relayrace.durable")
_CONFLICTS = 3  # an attempt goes on after a stale writer's conflict this many times at most


async def attempts(agent: Agent[Any], options: RunOptions, run_id: str,
                   spec: dict[str, Any], session: Session) -> dict[str, Any]:
    """Attempts of the run ``run_id`` (as ``spec`` submitted it) on ``session``, until one
    ends it; ``options`` carry the worker's settings and the run's DBOS steps."""
    conflicts = 0
    while True:
        try:
            return await _attempt(agent, options, run_id, spec, session)
        except SessionInUseError:
            # Renewed all along: its holder lives. A worker taken for dead by mistake
            # finishes the step it is in, learns it lost the run and lets go; nothing of
            # this attempt ran yet (the lease comes first), so it waits again.
            _log.warning("run %s: session %s is still held by a live run; waiting "
                         "again", run_id, spec["session_id"])
        except SessionConflictError as exc:
            # This worker holds the run and its session's lease, so the write that came
            # first was an old attempt's, woken after the run was taken over, before it
            # learned so: this attempt goes on from the log as it now is (its steps
            # keep their values, and nothing of its own was written).
            conflicts += 1
            if conflicts > _CONFLICTS:
                return {"run_id": run_id, "session_id": spec["session_id"],
                        "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            _log.warning("run %s: another attempt wrote to session %s; going on from "
                         "its log", run_id, spec["session_id"])


async def _attempt(agent: Agent[Any], options: RunOptions, run_id: str,
                   spec: dict[str, Any], session: Session) -> dict[str, Any]:
    session_id = spec["session_id"]
    base: dict[str, Any] = {"run_id": run_id, "session_id": session_id}
    steps = options.steps
    assert isinstance(steps, _DbosSteps)
    try:
        if spec["agent"] != agent.name:
            raise DurableRunError(f"the run is for team {spec['agent']!r}, but this worker "
                                  f"runs {agent.name!r}; give each team its own "
                                  "queue.", run_id=run_id)
        if spec["kind"] == "run":
            # The engine continues the run instead if the log shows an attempt began it.
            result = await run_with(agent, spec["input"], session, replace(
                options, start_agent=spec["start_agent"], user_id=spec["user_id"]))
        else:
            # Decisions are taken once: by the attempt that finds the stop still open.
            began = (await session.view()).run_id == run_id
            pending = None if began else \
                await PendingRun.from_session(session, entry=agent)
            if not began and pending is None:
                raise DurableRunError(f"Session {session_id!r} waits for no approval or "
                                      "answer any more.", run_id=run_id)
            if pending is not None:
                options = replace(
                    options, approvals=spec["approvals"], answers=spec["answers"],
                    reply=spec.get("reply"), hand_back=spec.get("hand_back"),
                    given_for=pending)
            result = await run_with(agent, None, session, options)
    except AttemptEnded as done:  # the log has the outcome; DBOS had not taken it yet
        return base | await _outcome(agent, session, done.ended)
    except RelayraceError as exc:
        if isinstance(exc, SessionInUseError) and not steps.began:
            raise  # nothing of this attempt ran: it waits again
        if isinstance(exc, SessionConflictError) and not steps.lost:
            raise  # a stale attempt wrote first: this one goes on from the log
        return base | {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    return base | output_of(result)


async def _outcome(agent: Agent[Any], session: Session,
                   ended: RunFinishedEvent) -> dict[str, Any]:
    """What a run that an earlier attempt ended came to, from its ``RunFinishedEvent``."""
    if ended.status == "failed":
        return {"status": "failed", "error": ended.output}
    pending = await PendingRun.from_session(session, entry=agent) \
        if ended.status == "interrupted" else None
    return {"status": ended.status, "output": "" if pending else ended.output,
            "last_agent": ended.agent, "reason": ended.reason,
            "pending": pending.to_json() if pending is not None else None}

