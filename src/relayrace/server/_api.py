"""The sessions and runs API (``/api/...``): JSON, with runs' events as Server-Sent Events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from .._engine.decisions import bind_reply
from ..agents.approvals import PendingRun
from ..core.events import ApprovalDecidedEvent, RunStartedEvent
from ..sessions import Session, SessionInfo
from ._conversations import check_session_id
from ._errors import ApiError, run_failed
from ._idempotency import Claim
from ._runs import ENDED_WITHOUT_RESULT, RunRecord, pending_summary
from ._sessions import SummaryCache, event_dicts, listed, log_summary, summarize
from ._stream import EventStream, Piece

__all__ = ["router"]

router = APIRouter(prefix="/api")

CREATED_KEPT = 10_000
"""Sessions created and not yet run that the server remembers (the oldest go first)."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewSession(_Body):
    """A session to create."""

    agent: str | None = Field(default=None, description="The agent it talks to: a served "
                              "one or any agent of their teams (default: the first served).")


class NewRun(_Body):
    """A run to start on a session."""

    input: str = Field(min_length=1, description="The user's message.")
    agent: str | None = Field(default=None, description="The agent the run starts with: a "
                              "served one, or any agent of their teams (default: the one the "
                              "session's conversation is with).")
    background: bool = Field(default=False, description="Answer at once with the run's id "
                             "(202) instead of waiting for its result.")


class Decisions(_Body):
    """Decisions on a session's pending approvals, answers to its questions, and the reply of
    a person who holds the conversation."""

    approvals: dict[str, bool] = Field(default_factory=dict,
                                       description="Call id -> run it (true) or not.")
    answers: dict[str, str] = Field(default_factory=dict, description="Question id -> answer.")
    reply: str | None = Field(default=None, min_length=1, description=(
        "When a person holds the conversation (pending takeover): their message, added as "
        "the human agent's answer."))
    hand_back: str | bool = Field(default=False, description=(
        "When a person holds the conversation: the agent to hand it back to (true: the agent "
        "that transferred to the person)."))
    background: bool = Field(default=True, description="Answer at once with the run's id.")


def _server(request: Request) -> Any:
    return request.app.state.relayrace


def _owner(request: Request) -> str:
    owner: str = request.state.owner
    return owner


async def _session(request: Request, session_id: str) -> tuple[Session, dict[str, Any] | None]:
    """The caller's session (404 for a missing one and for another key's: never a leak; 400
    for an id no session can have)."""
    check_session_id(session_id)
    server = _server(request)
    info = await server.store.get_info(session_id)
    owner = _owner(request)
    if info is None:
        made = server.created.get(session_id)
        if made is None or made["owner"] != owner:
            raise ApiError(404, f"No session {session_id!r}.", "not_found")
        return server.store.session(session_id, owner=owner), made
    if info.owner != owner:
        raise ApiError(404, f"No session {session_id!r}.", "not_found")
    server.created.pop(session_id, None)  # written now: the store knows it
    return server.store.session(session_id, owner=owner), None


def _agent_of(request: Request, name: str | None, events: list[Any] | None = None) -> Any:
    """The agent named ``name`` (a served one, or any agent of their teams: a run of it starts
    with it, in its team), else the one the session's log first ran, else the default."""
    server = _server(request)
    members = server.members
    if name:
        agent = members.get(name)
        if agent is None:
            raise ApiError(404, f"No agent {name!r} is served; the agents are: "
                           f"{', '.join(members)}.", "not_found")
        return agent
    for e in events or ():
        if isinstance(e, RunStartedEvent) and "/" not in e.path and e.agent in members:
            return members[e.agent]
    return server.default


def _decider(request: Request) -> str:
    """Who makes a request's decisions: its API key's name; on a server without keys, the
    ``X-Relayrace-User`` header, else the server's ``user``."""
    server = _server(request)
    if server.keys.required:
        name: str = server.keys.name(_owner(request))
        return name
    given = (request.headers.get("x-relayrace-user") or "").strip()
    return given[:200] if given else str(server.user)


@router.get("/agents", summary="The served agents")
async def agents(request: Request) -> dict[str, Any]:
    return {"agents": [{"name": a.name, "description": a.description,
                        "sub_agents": [s.name for s in a.sub_agents],
                        "tools": [t.name for t in a.tools]}
                       for a in _server(request).agents.values()]}


@router.post("/sessions", status_code=201, summary="Create a session")
async def create_session(request: Request, body: NewSession) -> dict[str, Any]:
    server = _server(request)
    agent = _agent_of(request, body.agent)
    session = server.store.session(owner=_owner(request))
    server.created[session.session_id] = {"owner": _owner(request), "agent": agent.name,
                                          "at": time.time()}  # and "ran", once run
    while len(server.created) > CREATED_KEPT:
        server.created.popitem(last=False)
    return {"session_id": session.session_id, "agent": agent.name}


@router.get("/sessions", summary="List sessions, newest first")
async def list_sessions(request: Request, limit: int = Query(50, ge=1, le=500),
                        offset: int = Query(0, ge=0),
                        q: str | None = Query(None, description="Text in the id or any "
                                              "message."),
                        status: str | None = Query(None, pattern="^(running|waiting|finished|"
                                                   "failed|idle)$")) -> dict[str, Any]:
    server = _server(request)
    owner = _owner(request)
    # Sessions created and not run yet are not in the store: listed by when they were made.
    made = await _made(server, owner, q.lower() if q else None, status)
    # Filtering reads each session: it looks at the 1,000 most recent. Merged with the
    # sessions made, the page is within the first offset + limit the store lists.
    filtering = bool(q or status or made)
    infos = await server.store.list_sessions(
        owner=owner, limit=1000 if q or status else offset + limit if made else limit,
        offset=0 if filtering else offset)
    logs = await _log_summaries(server, infos, q.lower() if q else None)
    out = []
    for info, log in zip(infos, logs, strict=True):
        if log is None:  # not mentioning q
            continue
        row = listed(info, log, server.runs.active.get(info.session_id))
        if status and row["status"] != status:
            continue
        out.append(row)
    if filtering:
        stored = {r["session_id"] for r in out}
        out = sorted([*(r for r in made if r["session_id"] not in stored), *out],
                     key=lambda r: -r["updated_at"])[offset:offset + limit]
    return {"sessions": out, "limit": limit, "offset": offset}


async def _made(server: Any, owner: str, q: str | None,
                status: str | None) -> list[dict[str, Any]]:
    """The rows of ``owner``'s sessions created and not in the store yet (matching ``q`` and
    ``status``): made and not run, or run and not written yet."""
    rows = []
    for sid, made in reversed(list(server.created.items())):
        if made["owner"] != owner or (q is not None and q not in sid.lower()):
            continue
        if "ran" in made and await server.store.get_info(sid) is not None:
            del server.created[sid]  # the store lists it now
            continue
        row = listed(SessionInfo(session_id=sid, created_at=made["at"], updated_at=made["at"],
                                 owner=owner), log_summary([], made["agent"]),
                     server.runs.active.get(sid))
        if status is None or row["status"] == status:
            rows.append(row)
    return rows


async def _log_summaries(server: Any, infos: list[SessionInfo],
                         q: str | None) -> list[dict[str, Any] | None]:
    """Each session's log summary, read (concurrently) only where the server's cache has none
    for its event count; with ``q`` (a search), None for the sessions not mentioning it."""
    cache: SummaryCache = server.summaries

    async def one(info: SessionInfo) -> dict[str, Any] | None:
        log = cache.get(info)
        if log is not None and (q is None or q in info.session_id.lower()):
            return log
        events = await server.store.session(info.session_id).get_events()
        log = log_summary(events, server.default.name)
        cache.put(info, log)
        return log if q is None or _mentions(q, info.session_id, events) else None
    return list(await asyncio.gather(*(one(info) for info in infos)))


def _mentions(q: str, session_id: str, events: list[Any]) -> bool:
    """Whether the session's id or any of its messages holds ``q`` (lower case)."""
    return q in session_id.lower() or any(
        q in e.message.content.lower() for e in events if e.kind == "message")


@router.get("/sessions/{session_id}", summary="A session and its events")
async def get_session(request: Request, session_id: str) -> dict[str, Any]:
    server = _server(request)
    session, made = await _session(request, session_id)
    events = [] if made is not None else await session.get_events()
    running = server.runs.active.get(session_id)
    row = summarize(session.info, events, running,
                    made["agent"] if made is not None else server.default.name)
    row["events"] = event_dicts(events)
    row["run_id"] = running.run_id if running is not None else None
    row["runs"] = [r.summary() for r in server.runs.runs.values()
                   if r.session_id == session_id][-20:]
    return row


@router.get("/sessions/{session_id}/export", summary="A session's log as JSON lines",
            response_class=PlainTextResponse)
async def export_session(request: Request, session_id: str) -> PlainTextResponse:
    session, _ = await _session(request, session_id)
    return PlainTextResponse(await session.export_jsonl(), media_type="application/x-ndjson")


@router.delete("/sessions/{session_id}", summary="Delete a session and its children")
async def delete_session(request: Request, session_id: str) -> dict[str, Any]:
    server = _server(request)
    await _session(request, session_id)
    if session_id in server.runs.active:
        raise ApiError(409, f"Session {session_id!r} has a run going; cancel it first.",
                       "conflict")
    server.created.pop(session_id, None)
    return {"deleted": await server.store.delete(session_id)}


@router.get("/sessions/{session_id}/children", summary="A session's delegated children")
async def children(request: Request, session_id: str) -> dict[str, Any]:
    server = _server(request)
    await _session(request, session_id)
    infos = await server.store.list_sessions(parent_id=session_id, limit=500)
    return {"children": [{"session_id": i.session_id, "path": i.path, "key": i.key,
                          "parent_tool_call_id": i.parent_tool_call_id,
                          "event_count": i.event_count} for i in infos]}


async def _start(request: Request, claim: Claim, session: Session, agent: Any, input: Any, *,
                 background: bool, approvals: dict[str, bool] | None = None,
                 answers: dict[str, str] | None = None, reply: str | None = None,
                 hand_back: str | bool = False, named: bool = False) -> Response:
    server = _server(request)
    if session.session_id in server.runs.active:
        raise ApiError(409, f"Session {session.session_id!r} has a run going; wait for it or "
                       "cancel it.", "conflict")
    durable = server.runs.durable.get(agent.name)
    if server.runs.durable and durable is None:
        raise ApiError(400, f"A durable server queues runs of its served agents only "
                       f"({', '.join(server.runs.durable)}); {agent.name!r} is not one: serve "
                       f"it (--agent {agent.name}) to run it.", "invalid")
    if durable is not None:  # queued for the workers, followed through the session log
        run = server.runs.queue(durable, session, _owner(request), input,
                                approvals=approvals, answers=answers, reply=reply,
                                hand_back=hand_back)
    else:
        run = server.runs.start(agent, session, _owner(request), input, approvals=approvals,
                                answers=answers, reply=reply, hand_back=hand_back,
                                named=named)
    made = server.created.get(session.session_id)
    if made is not None:  # its run writes it: the store lists it from now on
        made["ran"] = True
    if background:
        return await claim.record(JSONResponse(run.summary(), status_code=202))
    return await asyncio.shield(claim.settle(run, _ended))


async def _ended(run: RunRecord) -> Response:
    """A run's answer once it has ended: its summary, or (failed) an error that says so."""
    if run.status in ENDED_WITHOUT_RESULT:
        return run_failed(run.status, run.error, run=run.summary())
    return JSONResponse(run.summary())


@router.post("/sessions/{session_id}/runs", summary="Start a run on a session")
async def start_run(request: Request, session_id: str, body: NewRun) -> Any:
    claim = await _server(request).idempotency.enter(request, _owner(request), body)
    if isinstance(claim, Response):  # the same request again: the first one's response
        return claim
    async with claim:
        session, made = await _session(request, session_id)
        events = [] if made is not None else await session.get_events()
        agent = _agent_of(request, body.agent or (made or {}).get("agent"), events)
        stopped = None if made is not None else \
            await PendingRun.from_session(session, entry=agent)
        # A person holding the conversation takes the user's messages: only decisions and
        # answers must come first.
        if stopped is not None and (stopped.approvals or stopped.questions):
            raise ApiError(409, f"Session {session_id!r} waits for decisions; answer them at "
                           f"/api/sessions/{session_id}/pending first.", "conflict")
        return await _start(request, claim, session, agent, body.input,
                            background=body.background, named=bool(body.agent))


@router.get("/sessions/{session_id}/pending", summary="What a session's run waits for")
async def pending(request: Request, session_id: str) -> dict[str, Any]:
    session, made = await _session(request, session_id)
    nothing: dict[str, Any] = {"approvals": [], "questions": [], "takeover": None}
    if made is not None:
        return nothing
    agent = _agent_of(request, None, await session.get_events())
    stopped = await PendingRun.from_session(session, entry=agent)
    return nothing if stopped is None else pending_summary(stopped)


@router.post("/sessions/{session_id}/pending",
             summary="Decide approvals, answer questions, reply as the person holding it")
async def decide(request: Request, session_id: str, body: Decisions) -> Any:
    claim = await _server(request).idempotency.enter(request, _owner(request), body)
    if isinstance(claim, Response):
        return claim
    async with claim:
        session, made = await _session(request, session_id)
        agent = _agent_of(request, None, [] if made else await session.get_events())
        stopped = None if made else await PendingRun.from_session(session, entry=agent)
        if stopped is None:
            raise ApiError(409, f"Session {session_id!r} waits for nothing.", "conflict")
        questions = {q.id: q for q in stopped.questions}
        for qid, answer in body.answers.items():  # checked here: a bad answer writes nothing
            if qid not in questions:
                raise ApiError(400, f"No pending question {qid!r}; pending: "
                               f"{', '.join(questions) or 'none'}.", "invalid")
            questions[qid].check(answer)
        bind_reply(stopped, None, agent, body.reply, body.hand_back)  # a mistake writes nothing
        calls = {a.call_id: a for a in stopped.approvals}
        unknown = sorted(set(body.approvals) - set(calls))
        if unknown:
            raise ApiError(400, f"No pending call has the id(s) {unknown}; pending: "
                           f"{sorted(calls)}.", "invalid")
        if body.approvals and session.session_id not in _server(request).runs.active:
            await _record_decisions(session, [calls[c] for c in body.approvals],
                                    body.approvals, _decider(request))
        return await _start(request, claim, session, agent, None,
                            background=body.background, approvals=body.approvals,
                            answers=body.answers, reply=body.reply, hand_back=body.hand_back)


async def _record_decisions(session: Session, calls: list[Any], approvals: dict[str, bool],
                            by: str) -> None:
    """Write who decided each call, and when, to the log (under its lease: one writer)."""
    decided = [ApprovalDecidedEvent(
        agent=c.agent, path=c.path, tool_call_id=c.call_id, tool_name=c.tool_name,
        approved=approvals[c.call_id], decided_by=by,
        session_id="" if c.session_id == session.session_id else c.session_id) for c in calls]
    async with session.lease():
        await session.append(decided)


def _run(request: Request, run_id: str) -> RunRecord:
    run: RunRecord | None = _server(request).runs.get(run_id, _owner(request))
    if run is None:
        raise ApiError(404, f"No run {run_id!r} (runs are kept a while after they end; the "
                       "session keeps everything).", "not_found")
    return run


@router.get("/runs/{run_id}", summary="A run's status and result")
async def get_run(request: Request, run_id: str) -> dict[str, Any]:
    return _run(request, run_id).summary()


@router.post("/runs/{run_id}/cancel", summary="Cancel a run (its session stays valid)")
async def cancel_run(request: Request, run_id: str) -> dict[str, Any]:
    run = _run(request, run_id)
    await _server(request).runs.cancel(run)
    return run.summary()


@router.get("/runs/{run_id}/trace", summary="A run's trace: spans with timings and tokens")
async def trace(request: Request, run_id: str) -> dict[str, Any]:
    run = _run(request, run_id)
    spans = _server(request).runs.traces.tree(run.trace_id) if run.trace_id else []
    return {"run_id": run_id, "trace_id": run.trace_id, "spans": spans,
            "usage": (run.result or {}).get("usage")}


async def _sse(run: RunRecord, after: int) -> AsyncIterator[Piece]:
    prefix = "retry: 1000\n\n"  # written with the first events
    events = run.events
    async for batch in events.follow(after):
        yield prefix + "".join(f"id: {number}\ndata: {events.line(number)}\n\n"
                               for number, _ in batch), isinstance(batch[-1][1], dict)
        prefix = ""
    if prefix:  # resumed after the run's end: nothing more to send
        yield prefix, True


_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.get("/runs/{run_id}/events", summary="A run's events (Server-Sent Events)")
async def run_events(request: Request, run_id: str,
                     last_event_id: str | None = Header(None)) -> EventStream:
    run = _run(request, run_id)
    after = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0
    return EventStream(_sse(run, after), _SSE_HEADERS)


@router.get("/sessions/{session_id}/stream", summary="The live events of a session's run")
async def session_stream(request: Request, session_id: str,
                         last_event_id: str | None = Header(None)) -> EventStream:
    await _session(request, session_id)
    run = _server(request).runs.active.get(session_id)
    if run is None:
        async def idle() -> AsyncIterator[Piece]:
            yield 'event: idle\ndata: {"kind": "idle"}\n\n', True
        return EventStream(idle(), _SSE_HEADERS)
    after = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0
    return EventStream(_sse(run, after), {**_SSE_HEADERS, "X-Relayrace-Run": run.run_id})
