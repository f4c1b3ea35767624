"""The console's workbench API: a session's runs as its log records them, and forks (time
travel: a new session from any event of another, to run on from there)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from ..core.events import (
    AgentEvent,
    DelegationEvent,
    HandoffEvent,
    MessageEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ._api import _session
from ._errors import ApiError
from ._prices import PriceTable
from ._sessions import _count
from ._spans import ReadLog, run_spans, usage_of

__all__ = ["router", "runs_of"]

router = APIRouter(prefix="/api")


class Fork(BaseModel):
    """Where to fork a session."""

    model_config = ConfigDict(extra="forbid")
    at: int = Field(description="The event seq (from 1) the fork's log ends with.")


def runs_of(events: list[AgentEvent], *, running: bool = False) -> list[dict[str, Any]]:
    """The runs a log records, oldest first: each one's input, status, agent path, tokens,
    time and the seqs of its first and last events (``running``: the last one is live)."""
    runs: list[dict[str, Any]] = []
    run: dict[str, Any] | None = None
    for seq, e in enumerate(events, 1):
        top = "/" not in e.path
        if isinstance(e, RunStartedEvent) and top:
            run = {"first_seq": seq, "last_seq": seq, "run_id": e.run_id, "input": None,
                   "status": "incomplete", "agents": [e.agent], "started_at": e.time,
                   "duration_s": 0.0, "usage": {"requests": 0, "input_tokens": 0,
                                                "output_tokens": 0, "total_tokens": 0}}
            runs.append(run)
            continue
        if run is None:
            continue
        run["last_seq"], run["duration_s"] = seq, round(e.time - run["started_at"], 3)
        if isinstance(e, MessageEvent):
            if top and e.message.role == "user" and run["input"] is None:
                run["input"] = e.message.content
            _count(run["usage"], e.usage)
        elif isinstance(e, DelegationEvent):
            _count(run["usage"], e.usage)
        elif isinstance(e, HandoffEvent) and top:
            run["agents"].append(e.to_agent)
        elif isinstance(e, RunFinishedEvent) and top:
            run["status"] = e.status
    if running and runs and runs[-1]["status"] == "incomplete":
        runs[-1]["status"] = "running"
    return runs


@router.get("/sessions/{session_id}/runs", summary="A session's runs, as its log records them")
async def session_runs(request: Request, session_id: str) -> dict[str, Any]:
    session, made = await _session(request, session_id)
    events = [] if made is not None else await session.get_events()
    running = session_id in request.app.state.relayrace.runs.active
    return {"session_id": session_id, "runs": runs_of(events, running=running)}


@router.post("/sessions/{session_id}/fork", status_code=201,
             summary="Fork a session: a new one whose log is this one's up to an event")
async def fork_session(request: Request, session_id: str, body: Fork) -> dict[str, Any]:
    session, _ = await _session(request, session_id)
    fork = await session.fork(at=body.at)  # out of the log's range: 400, saying the range
    return {"session_id": fork.session_id, "forked_from": session_id, "forked_at": body.at}


@router.get("/sessions/{session_id}/runs/{number}/trace",
            summary="A run's trace from the session log: spans, their detail, and usage")
async def run_trace(request: Request, session_id: str, number: int) -> dict[str, Any]:
    session, made = await _session(request, session_id)
    events = [] if made is not None else await session.get_events()
    runs = runs_of(events)
    if not 1 <= number <= len(runs):
        raise ApiError(404, f"Session {session_id!r} has runs 1 to {len(runs)}; no run "
                       f"{number}.", "not_found")
    run = runs[number - 1]
    spans = await run_spans(events, run["first_seq"], run["last_seq"], _reader(request))
    return {"run": run, "spans": spans, "usage": _priced(request, usage_of(spans))}


def _reader(request: Request) -> ReadLog:
    store = request.app.state.relayrace.store

    async def read(child_id: str) -> list[AgentEvent]:
        found: list[AgentEvent] = await store.session(child_id).get_events()
        return found
    return read


def _priced(request: Request, usage: dict[str, Any]) -> dict[str, Any]:
    """``usage`` with its cost, when the server was given a price table."""
    prices: PriceTable | None = getattr(request.app.state, "prices", None)
    usage["cost"] = prices.cost(usage["by_model"]) if prices is not None else None
    return usage


@router.get("/sessions/{session_id}/usage",
            summary="A session's usage and cost, per run, agent and model, children included")
async def session_usage(request: Request, session_id: str) -> dict[str, Any]:
    session, made = await _session(request, session_id)
    events = [] if made is not None else await session.get_events()
    read, every, runs = _reader(request), [], []
    for number, run in enumerate(runs_of(events), 1):
        spans = await run_spans(events, run["first_seq"], run["last_seq"], read)
        every.extend(spans)
        runs.append({"number": number, "input": run["input"], "status": run["status"],
                     "duration_s": run["duration_s"], "usage": _priced(request, usage_of(spans))})
    return {"session_id": session_id, "usage": _priced(request, usage_of(every)), "runs": runs}
