"""The server's runs: each a task streaming a run's events into a buffer clients follow.

A client that reconnects with ``Last-Event-ID`` gets every event after that id, then follows
live, so it misses nothing. A run's events stay in memory while it runs and for the
``keep`` most recent finished runs; the session log (the store) keeps them for good.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from ..agents.agent import Agent
from ..core.events import AgentEvent, RunStartedEvent, dump_events
from ..core.exceptions import SessionInUseError
from ..runner import Runner, RunResult, StreamArgs
from ..sessions import Session
from ..tracing import Span, add_trace_processor

__all__ = ["ENDED_WITHOUT_RESULT", "RunEvents", "RunManager", "RunRecord", "TraceStore"]

ENDED_WITHOUT_RESULT = ("failed", "cancelled", "busy")
"""The statuses of a run that ended with no answer to give its request."""


Event = AgentEvent | dict[str, Any]


class RunEvents:
    """A run's events in order (the last, how it ended, a dict), for the clients that follow
    it: an event's SSE id is its position + 1. Adding one wakes only the clients waiting for
    it: a follower waits for the next, a stream that shows only the answer for the last."""

    __slots__ = ("_ending", "_events", "_lines", "_waiting", "closed")

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lines: list[str | None] = []  # their JSON, made when first asked
        self._waiting: list[asyncio.Future[None]] = []  # followers, for the next event
        self._ending: list[asyncio.Future[None]] = []  # waiters for the last
        self.closed = False
        """Whether the run has ended (no event comes after the last)."""

    def __len__(self) -> int:
        return len(self._events)

    def add(self, event: Event, *, last: bool = False) -> None:
        """Append ``event`` (``last``: the run's end) and wake who waits for it."""
        self._events.append(event)
        self._lines.append(None)
        self.closed = self.closed or last
        if self._waiting:
            _wake(self._waiting)
            self._waiting = []
        if last and self._ending:
            _wake(self._ending)
            self._ending = []

    def line(self, number: int) -> str:
        """The JSON of event ``number`` (1-based, as its SSE id)."""
        line = self._lines[number - 1]
        if line is None:
            event = self._events[number - 1]
            line = json.dumps(event, ensure_ascii=False) if isinstance(event, dict) \
                else dump_events([event])[0]
            self._lines[number - 1] = line
        return line

    async def ended(self) -> None:
        """Return once the run has ended (its last event added)."""
        if not self.closed:
            await _waiter(self._ending)

    async def follow(self, after: int = 0) -> AsyncIterator[list[tuple[int, Event]]]:
        """The events after the ``after``-th, as (id, event), live until the run ends: in
        batches of what has arrived, so a stream writes once per burst, not once per event."""
        position = max(0, after)
        events = self._events
        while True:
            if position < len(events):
                batch = list(enumerate(events[position:], position + 1))
                position += len(batch)
                yield batch
            elif self.closed:
                return
            else:  # checked and waited for with no await between: nothing is missed
                await _waiter(self._waiting)


def _waiter(waiters: list[asyncio.Future[None]]) -> asyncio.Future[None]:
    """A future in ``waiters``, to await until they are woken."""
    future = asyncio.get_running_loop().create_future()
    waiters.append(future)
    return future


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    for future in waiters:
        if not future.done():  # a waiter that was cancelled
            future.set_result(None)


@dataclass(slots=True, eq=False)
class RunRecord:
    """One run the server started: who and what, how it ended, and its events."""

    run_id: str
    session_id: str
    owner: str
    agent: str
    status: str = "running"
    """``running``, then ``finished``, ``waiting`` (for a person), ``failed``, ``cancelled`` or
    ``busy`` (refused: another process's run holds the session; nothing ran)."""
    result: dict[str, Any] | None = None
    error: str | None = None
    trace_id: str = ""
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    task: asyncio.Task[None] | None = None
    events: RunEvents = field(default_factory=RunEvents)

    @property
    def done(self) -> bool:
        """Whether the run has ended."""
        return self.status != "running"

    def summary(self) -> dict[str, Any]:
        """The run as the API shows it."""
        return {"run_id": self.run_id, "session_id": self.session_id, "agent": self.agent,
                "status": self.status, "result": self.result, "error": self.error,
                "trace_id": self.trace_id, "created_at": self.created_at,
                "finished_at": self.finished_at, "event_count": len(self.events)}


class TraceStore:
    """The spans of recent traces, by trace id (a process-wide trace processor)."""

    def __init__(self, keep: int = 500) -> None:
        self.keep = keep
        self._traces: OrderedDict[str, list[Span]] = OrderedDict()

    def on_span_start(self, span: Span) -> None:
        spans = self._traces.get(span.trace_id)
        if spans is None:
            spans = self._traces[span.trace_id] = []
            while len(self._traces) > self.keep:
                self._traces.popitem(last=False)
        spans.append(span)

    def on_span_end(self, span: Span) -> None:
        """Spans are kept from their start; their end is set on the same object."""

    def tree(self, trace_id: str) -> list[dict[str, Any]]:
        """The trace's spans, each with its parent, timing (ms from the trace's start) and
        tokens, in start order."""
        spans = self._traces.get(trace_id, [])
        if not spans:
            return []
        origin = min(s.start_ns for s in spans)
        now = time.time_ns()
        out = []
        for s in spans:
            attributes = {k: v for k, v in s.attributes.items()
                          if isinstance(v, str | int | float | bool)}
            out.append({"span_id": s.span_id, "parent_id": s.parent_id, "kind": s.kind,
                        "name": s.name, "start_ms": (s.start_ns - origin) / 1e6,
                        "duration_ms": ((s.end_ns or now) - s.start_ns) / 1e6,
                        "open": not s.end_ns, "error": s.error, "attributes": attributes})
        return out


def result_summary(result: RunResult[Any]) -> dict[str, Any]:
    """A run's result as the API shows it."""
    output = result.final_output
    usage = result.usage.total
    pending = result.pending
    return {
        "final_output": output if isinstance(output, str) else to_jsonable_python(
            output, fallback=str),
        "last_agent": result.last_agent.name, "reason": result.reason,
        "usage": {"requests": usage.requests, "input_tokens": usage.input_tokens,
                  "output_tokens": usage.output_tokens, "total_tokens": usage.total_tokens},
        "pending": None if pending is None else pending_summary(pending),
    }


def pending_summary(pending: Any) -> dict[str, Any]:
    """What a stopped run waits for: approvals (by call id), questions (by id), and the
    reply of a person who holds the conversation (``takeover``)."""
    return {
        "approvals": [{"call_id": a.call_id, "tool": a.tool_name, "arguments": a.arguments,
                       "agent": a.agent, "path": a.path, "note": a.note}
                      for a in pending.approvals],
        "questions": [{"id": q.id, "question": q.question, "choices": q.choices,
                       "agent": q.agent, "path": q.path} for q in pending.questions],
        "takeover": None if pending.takeover is None else {
            "agent": pending.takeover.agent, "path": pending.takeover.path,
            "from_agent": pending.takeover.from_agent},
    }


class RunManager:
    """Starts runs as tasks and keeps their events for the clients that follow them."""

    def __init__(self, *, keep: int = 200, model: Any = None,
                 max_turns: int | None = None) -> None:
        self.keep = keep
        self.model = model
        self.max_turns = max_turns
        self.runs: dict[str, RunRecord] = {}
        self.active: dict[str, RunRecord] = {}  # session id -> its running run
        self._finished: deque[str] = deque()  # finished runs' ids, oldest first
        self.traces = TraceStore()
        add_trace_processor(self.traces)
        self.durable: dict[str, Any] = {}
        """With ``relayrace serve --durable``: each served agent's `DurableRunner`, which
        queues the API's runs for workers."""
        self.follow_interval = 0.25
        """Seconds between reads of a queued run's session log, for its events."""

    def get(self, run_id: str, owner: str) -> RunRecord | None:
        """The run, if it is ``owner``'s."""
        run = self.runs.get(run_id)
        return run if run is not None and run.owner == owner else None

    def start(self, agent: Agent[Any], session: Session, owner: str, input: Any, *,
              approvals: dict[str, bool] | None = None,
              answers: dict[str, str] | None = None, reply: str | None = None,
              hand_back: str | bool = False, named: bool = False) -> RunRecord:
        """Start a run of ``agent`` on ``session`` in the background (``named``: the request
        chose it, so the run starts with it, not with whoever the conversation was left
        with)."""
        run = RunRecord(run_id="run-" + secrets.token_hex(8), session_id=session.session_id,
                        owner=owner, agent=agent.name)
        self.runs[run.run_id] = run
        self.active[session.session_id] = run
        options: StreamArgs = {"session": session, "model": self.model,
                               "max_turns": self.max_turns}
        if named and agent.parent is None and not agent.is_composite:
            options["start_agent"] = agent  # a sub-agent run is started with by the Runner
        if approvals or answers or reply is not None or hand_back:
            options |= {"approvals": approvals or {}, "answers": answers or {},
                        "reply": reply, "hand_back": hand_back}
        run.task = asyncio.ensure_future(self._drive(run, agent, input, options))
        return run

    def queue(self, durable: Any, session: Session, owner: str, input: Any, *,
              approvals: dict[str, bool] | None = None,
              answers: dict[str, str] | None = None, reply: str | None = None,
              hand_back: str | bool = False) -> RunRecord:
        """Put a run on ``durable``'s queue (a `relayrace.durable.DurableRunner`) for its
        workers, and follow it: its events as the session log gets them, then its end."""
        run = RunRecord(run_id="run-" + secrets.token_hex(8), session_id=session.session_id,
                        owner=owner, agent=durable.agent.name)
        self.runs[run.run_id] = run
        self.active[session.session_id] = run
        decided = {"approvals": approvals, "answers": answers, "reply": reply,
                   "hand_back": hand_back}
        run.task = asyncio.ensure_future(self._follow(run, durable, session, input, decided))
        return run

    async def _follow(self, run: RunRecord, durable: Any, session: Session, input: Any,
                      decided: dict[str, Any]) -> None:
        try:
            seen = len(await session.get_events())
            if input is None:  # resumed with a person's decisions, answers or reply
                await durable.resume(session.session_id, run_id=run.run_id, **decided)
            else:
                await durable.submit(input, session_id=session.session_id, run_id=run.run_id)
            ending = asyncio.ensure_future(durable.result(run.run_id))
            try:
                while True:  # a worker writes the log: its new events are the run's events
                    await asyncio.wait({ending}, timeout=self.follow_interval)
                    events = await session.get_events()
                    for event in events[seen:]:
                        self._record(run, event)
                    seen = len(events)
                    if ending.done():
                        break
            except asyncio.CancelledError:
                ending.cancel()
                await durable.cancel(run.run_id)
                raise
            ended = ending.result()
            usage = ended.usage
            run.result = {
                "final_output": ended.output, "last_agent": ended.last_agent,
                "reason": ended.reason,
                "usage": {"requests": usage.requests, "input_tokens": usage.input_tokens,
                          "output_tokens": usage.output_tokens,
                          "total_tokens": usage.total_tokens},
                "pending": None if ended.pending is None else pending_summary(ended.pending)}
            run.status = {"completed": "finished", "interrupted": "waiting"}.get(
                ended.status, "failed")
            run.error = ended.error or None
        except BaseException as exc:
            self._failed(run, exc)
        finally:
            self._end(run)

    async def _drive(self, run: RunRecord, agent: Agent[Any], input: Any,
                     options: StreamArgs) -> None:
        stream = Runner.stream(agent, input, **options)
        try:
            async for event in stream:
                self._record(run, event)
            result = stream.result
            assert result is not None
            run.result = result_summary(result)
            run.status = "waiting" if result.pending is not None else "finished"
        except BaseException as exc:
            self._failed(run, exc)
        finally:
            self._end(run)

    @staticmethod
    def _failed(run: RunRecord, exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            run.status, run.error = "cancelled", "cancelled by a client"
        elif isinstance(exc, SessionInUseError):
            run.status, run.error = "busy", str(exc)
        elif isinstance(exc, Exception):  # a tool or model bug too: reported, the server goes on
            run.status, run.error = "failed", f"{type(exc).__name__}: {exc}"
        else:
            raise exc

    def _end(self, run: RunRecord) -> None:
        run.finished_at = time.time()
        if self.active.get(run.session_id) is run:
            del self.active[run.session_id]
        run.events.add(_end_event(run), last=True)
        self._finished.append(run.run_id)
        while len(self._finished) > self.keep:  # the oldest finished runs go
            self.runs.pop(self._finished.popleft(), None)

    def _record(self, run: RunRecord, event: AgentEvent) -> None:
        if isinstance(event, RunStartedEvent):
            if not run.trace_id:
                run.trace_id = event.trace_id
            if not event.run_id:  # a copy: the session log's event stays as it was
                event = dataclasses.replace(event, run_id=run.run_id)
        run.events.add(event)

    async def cancel(self, run: RunRecord) -> None:
        """Cancel the run and wait until its session is left valid."""
        task = run.task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the runs still going (each leaves its session valid)."""
        for run in list(self.active.values()):
            await self.cancel(run)


def _end_event(run: RunRecord) -> dict[str, Any]:
    """The stream's last event: how the run ended."""
    return {"kind": "run_end", "run_id": run.run_id, "status": run.status,
            "result": run.result, "error": run.error}
