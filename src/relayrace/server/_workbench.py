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
from ._api import _owner, _session
from ._errors import ApiError
from ._graph import tools_offered
from ._prices import PriceTable
from ._sessions import _count
from ._spans import ReadLog, ToolsOf, run_spans, usage_of

__all__ = ["router", "runs_of"]

router = APIRouter(prefix="/api")


class Fork(BaseModel):
    """Where to fork a session, and what to change in the context its next run sees."""

    model_config = ConfigDict(extra="forbid")
    at: int = Field(strict=True, description="The event seq (from 1) the fork's log ends "
                    "with (a JSON number: \"1\" and true are refused).")
    edits: dict[int, str] = Field(default_factory=dict, description=(
        "Seq of a message (a user, assistant or tool message, up to `at`) -> the text the "
        "fork's copy has instead."))


def runs_of(events: list[AgentEvent], *, running: bool = False) -> list[dict[str, Any]]:
    """The runs a log records, oldest first: each one's input, status, agent path, tokens,
    time and the seqs of its first and last events (``running``: the last one is live)."""
    runs: list[dict[str, Any]] = []
    run: dict[str, Any] | None = None
    for seq, e in enumerate(events, 1):
        top = "/" not in e.path
        if isinstance(e, RunStartedEvent) and top:
            run = {"first_seq": seq, "last_seq": seq, "run_id": e.run_id,
                   "trace_id": e.trace_id, "input": None,
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
    manager = request.app.state.relayrace.runs
    runs = runs_of(events, running=session_id in manager.active)
    # A run this server started has the id its POST answered (the log keeps it for durable
    # runs only): found by its trace, while the server keeps the run.
    started = {r.trace_id: r.run_id for r in manager.runs.values()
               if r.session_id == session_id and r.trace_id}
    for run in runs:
        run["run_id"] = run["run_id"] or started.get(run["trace_id"], "")
    return {"session_id": session_id, "runs": runs}


@router.post("/sessions/{session_id}/fork", status_code=201,
             summary="Fork a session: a new one whose log is this one's up to an event")
async def fork_session(request: Request, session_id: str, body: Fork) -> dict[str, Any]:
    session, _ = await _session(request, session_id)
    # Out of the log's range, or an edit of what is no message: 400, saying what may be.
    fork = await session.fork(at=body.at, edits=body.edits)
    return {"session_id": fork.session_id, "forked_from": session_id, "forked_at": body.at}


FORKS_SCANNED = 1000
"""The most recently active sessions of the caller's that the forks of one are looked for in."""


@router.get("/sessions/{session_id}/forks", summary="The sessions forked from a session")
async def forks(request: Request, session_id: str) -> dict[str, Any]:
    session, _ = await _session(request, session_id)
    store = request.app.state.relayrace.store
    infos = await store.list_sessions(owner=_owner(request), limit=FORKS_SCANNED)
    return {"forks": sorted(({"session_id": i.session_id, "forked_at": i.forked_at,
                              "created_at": i.created_at, "event_count": i.event_count}
                             for i in infos if i.forked_from == session_id),
                            key=lambda f: (f["forked_at"], f["created_at"]))}


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
    spans = await run_spans(events, run["first_seq"], run["last_seq"], _reader(request),
                            _tools(request))
    return {"run": run, "spans": spans, "usage": _priced(request, usage_of(spans))}


def _reader(request: Request) -> ReadLog:
    store = request.app.state.relayrace.store

    async def read(child_id: str) -> list[AgentEvent]:
        found: list[AgentEvent] = await store.session(child_id).get_events()
        return found
    return read


def _tools(request: Request) -> ToolsOf:
    """The tools each agent of the served teams is offered, by name (each listed once)."""
    members = request.app.state.relayrace.members
    known: dict[str, list[dict[str, Any]]] = {}

    def of(name: str) -> list[dict[str, Any]]:
        if name not in known:
            agent = members.get(name)
            known[name] = tools_offered(agent) if agent is not None else []
        return known[name]
    return of


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
    read, tools, every, runs = _reader(request), _tools(request), [], []
    for number, run in enumerate(runs_of(events), 1):
        spans = await run_spans(events, run["first_seq"], run["last_seq"], read, tools)
        every.extend(spans)
        runs.append({"number": number, "input": run["input"], "status": run["status"],
                     "duration_s": run["duration_s"], "usage": _priced(request, usage_of(spans))})
    return {"session_id": session_id, "usage": _priced(request, usage_of(every)), "runs": runs}
