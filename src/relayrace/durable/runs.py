"""Durable, distributed runs on DBOS: a queue of runs, workers, and steps that happen once.

A `DurableRunner` turns each run of a team into a DBOS workflow on a DBOS queue. Workers
(``relayrace worker``, or a ``DurableRunner`` started with ``work=True``) take runs from the
queue; anyone with the database's URL submits them (``submit``, ``resume``, the CLI's
``relayrace submit``). Inside a run, each model request and each tool call is a DBOS step under
a key stable across attempts (``sessions.steps``): when a worker dies, another one continues
the run from its session log, and a step that finished before the crash returns its recorded
value instead of running again (a tool's side effect is not repeated, a model call is not paid
for twice). A run that stops for a person ends its workflow: it holds no process while it
waits, and ``resume`` (from any process, days later) enqueues the run that goes on.

Everything lives in one database: SQLite files by default (``.relayrace/sessions.db`` and, for
DBOS, ``.relayrace/sessions.dbos.sqlite``), or one PostgreSQL database for many machines
(``db="postgresql://..."``: relayrace's tables and DBOS's ``dbos`` schema).

This module is the `DurableRunner`: starting and stopping, submitting, waiting, and a worker's
taking of a run. ``workflow`` holds the DBOS workflow and steps, ``attempts`` a worker's
attempts of a run, ``results`` what a run comes to (and the waiting for it), ``workers`` the
heartbeats that hand a dead worker's runs over, ``fence`` the letting go of runs a worker lost
while it was stopped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, DBOSClient, DBOSConfig, SetWorkflowID, WorkflowHandleAsync
from dbos import error as dbos_error

from .._engine.decisions import Decisions
from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..core.events import AgentEvent, RunFinishedEvent, RunStartedEvent
from ..core.exceptions import DurableRunError, UserError
from ..core.usage import UsageLimits
from ..models.interface import Model
from ..runner import RunOptions
from ..sessions.base import new_session_id
from ..sessions.store import MemoryStore, SessionStore, SQLiteStore, open_store
from .attempts import attempts
from .fence import Fence
from .results import (
    DBOS_STATUS,
    DurableResult,
    RunInfo,
    RunStatus,
    SubmittedRun,
    _Results,
    result_of,
)
from .workers import Heartbeat, engine_url
from .workflow import RECORDS_VERSION, WORKFLOW, _DbosSteps, run_workflow, serve, serving

__all__ = ["DurableRunner"]

_log = logging.getLogger("relayrace.durable")


def _dbos_url(store: SessionStore) -> str:
    """Where DBOS keeps its records: beside a SQLite store's file, in a PostgreSQL store's
    database (its ``dbos`` schema)."""
    if isinstance(store, SQLiteStore):
        path = store.path.absolute()
        return f"sqlite:///{path.with_name(path.stem + '.dbos.sqlite')}"
    url: str = getattr(store, "url")  # noqa: B009 - PostgresStore, imported only with psycopg
    return url



class DurableRunner:
    """Runs ``agent``'s team durably on DBOS: submit runs from anywhere, work them anywhere.

    ``db`` names the database as ``open_store`` does (``None``: SQLite files under
    ``.relayrace/``; ``postgresql://...``: one PostgreSQL database for every machine). Every
    process that submits or works runs of a team uses the same ``db`` and ``queue`` (default
    ``relayrace-<agent name>``). ``worker_concurrency`` bounds the runs one worker runs at a
    time; ``concurrency`` the runs of the whole queue (``None``: no bound). A worker writes a
    heartbeat every ``heartbeat`` seconds; one silent for ``dead_after`` seconds is dead, and
    a live worker takes its runs over (``relayrace.durable.workers``). A worker looks for new
    runs on the queue every ``poll_interval`` seconds. On PostgreSQL a worker holds about
    ``2 * pool_size + 5`` connections (DBOS's pool, the session store's, a client's two, the
    heartbeat's and DBOS's notification listener); a submitter ``pool_size + 2``.
    ``context``, ``model`` (every agent's, as for ``Runner.run``), ``max_turns`` and
    ``usage_limits`` apply to every run this worker runs.

    DBOS runs one instance per process, so one ``DurableRunner`` works per process; any number
    may submit. Use it as ``async with DurableRunner(team, ...) as durable:`` (``work=False``
    to only submit and wait), or call ``start`` and ``stop``.
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        db: str | os.PathLike[str] | None = None,
        queue: str | None = None,
        work: bool = True,
        worker_concurrency: int = 8,
        concurrency: int | None = None,
        heartbeat: float = 2.0,
        dead_after: float = 15.0,
        poll_interval: float = 0.2,
        pool_size: int = 10,
        executor_id: str | None = None,
        context: Any = None,
        model: Model | str | None = None,
        max_turns: int | None = None,
        usage_limits: UsageLimits | None = None,
        log_level: str = "WARNING",
    ) -> None:
        if not isinstance(agent, Agent):
            raise UserError(f"DurableRunner runs an Agent's team, got {type(agent).__name__}.")
        if worker_concurrency < 1 or (concurrency is not None and concurrency < 1):
            raise UserError(f"worker_concurrency and concurrency count runs: at least 1, got "
                            f"{worker_concurrency} and {concurrency}.")
        if pool_size < 1 or poll_interval <= 0:
            raise UserError(f"pool_size counts connections (at least 1) and poll_interval is "
                            f"seconds (above 0); got {pool_size} and {poll_interval}.")
        if heartbeat <= 0 or dead_after < 2 * heartbeat:
            raise UserError(f"dead_after must be at least two heartbeats (a worker is dead only "
                            f"after missing some); got heartbeat={heartbeat}, "
                            f"dead_after={dead_after}.")
        self.agent = agent
        self.store = open_store(db)
        if isinstance(self.store, MemoryStore):
            raise UserError("A durable run needs a database that outlives the process: a SQLite "
                            "file or a postgresql:// URL, not memory://.")
        # A dead worker's session leases lapse as soon as a live worker may take its runs.
        self.store.lease_ttl = dead_after  # type: ignore[attr-defined]
        self.dbos_url = _dbos_url(self.store)
        self.queue = queue or f"relayrace-{agent.name}"
        self.work = work
        self.worker_concurrency = worker_concurrency
        self.concurrency = concurrency
        self.heartbeat = heartbeat
        self.dead_after = dead_after
        self.poll_interval = poll_interval
        self.pool_size = pool_size
        if hasattr(self.store, "pool_size"):  # PostgreSQL: one pool of this size per process
            self.store.pool_size = pool_size
        self.executor_id = executor_id or \
            f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.context = context
        self.model = model
        self.max_turns = max_turns
        self.usage_limits = usage_limits
        self.log_level = log_level
        self._client: DBOSClient | None = None
        self._beat: Heartbeat | None = None
        self._results: _Results | None = None
        self._engine: sa.Engine | None = None
        self._slots: asyncio.Semaphore | None = None  # a worker's free places for runs
        self._placed: set[str] = set()  # runs started here, their places already taken
        self._fence: Fence | None = None  # a worker's runs, let go of if taken over

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the database; a worker also launches DBOS and starts taking runs."""
        if self._client is not None:
            return
        if self.work and serving() is not None:
            raise UserError("A DurableRunner already works in this process (DBOS runs one "
                            "instance per process); start this one with work=False to submit.")
        # Created or migrated by whoever comes first, so a submitter may start before any
        # worker has (a client alone never migrates).
        if isinstance(self.store, SQLiteStore):  # `.relayrace/` on a first run
            self.store.path.absolute().parent.mkdir(parents=True, exist_ok=True)
        try:
            await asyncio.to_thread(DBOS.migrate, self.dbos_url)
        except sa.exc.OperationalError as exc:
            reason = str(exc.orig or exc).strip().splitlines()[0]
            raise DurableRunError(f"The durable runs' database could not be reached ({reason}); "
                                  "check that it is up and that --db (db=) names it.") from None
        if not self.dbos_url.startswith("sqlite"):
            # Without a ping before each checkout (DBOS's default): a round trip less per
            # operation; a dropped connection fails its operation, which DBOS retries.
            self._engine = sa.create_engine(
                engine_url(self.dbos_url), pool_size=2, max_overflow=0, pool_pre_ping=False,
                connect_args={"application_name": "relayrace", "connect_timeout": 10})
        self._client = await asyncio.to_thread(DBOSClient, system_database_url=self.dbos_url,
                                               system_database_engine=self._engine,
                                               system_database_pool_size=2)
        if not self.work:
            return
        serve(self)
        try:
            # The first heartbeat is written before DBOS hands this worker any run.
            beat = self._beat = Heartbeat(
                self.dbos_url, self.executor_id, every=self.heartbeat,
                dead_after=self.dead_after, take_over=self._take_over,
                taken=lambda: fence.check())
            fence = self._fence = Fence(self.executor_id, self._need_client, beat.stale)
            fence.install()
            await beat.start()
            config: DBOSConfig = {
                "name": "relayrace", "system_database_url": self.dbos_url,
                "executor_id": self.executor_id, "log_level": self.log_level,
                "sys_db_pool_size": self.pool_size,
                "db_engine_kwargs": {"pool_pre_ping": False},  # as the client's, below
                "application_version": RECORDS_VERSION,
            }
            DBOS(config=config)
            DBOS.launch()
            await DBOS.register_queue_async(
                self.queue, worker_concurrency=self.worker_concurrency,
                global_concurrency=self.concurrency, polling_interval_sec=self.poll_interval)
            self._slots = asyncio.Semaphore(self.worker_concurrency) \
                if self.concurrency is None else None
        except BaseException:
            await self.stop()
            raise

    async def stop(self, *, drain: float = 0.0) -> None:
        """Stop: a worker waits up to ``drain`` seconds for the runs it is running, then hands
        what is left back to the queue (another worker continues them) and removes its
        heartbeat."""
        if self._beat is not None:
            await self._beat.stop()
        if self._fence is not None:
            self._fence.uninstall()
            self._fence = None
        if serving() is self:
            # Off this loop, whose runs may be finishing meanwhile. DBOS made its thread pool
            # this loop's default executor, and shuts it down: the loop gets a new one.
            loop = asyncio.get_running_loop()
            with ThreadPoolExecutor(1) as pool:
                await loop.run_in_executor(pool, lambda: DBOS.destroy(
                    workflow_completion_timeout_sec=int(drain)))
            loop.set_default_executor(ThreadPoolExecutor())
            serve(None)
            self._slots = None
            if self._client is not None:
                left = await self._client.list_workflows_async(
                    status="PENDING", executor_id=self.executor_id, load_input=False,
                    load_output=False)
                for wf in left:
                    await self._client.resume_workflow_async(wf.workflow_id,
                                                             queue_name=self.queue)
        if self._beat is not None:
            await asyncio.to_thread(self._beat.leave)
            self._beat.close()
            self._beat = None
        if self._results is not None:
            await self._results.aclose()
            self._results = None
        if self._client is not None:
            await asyncio.to_thread(self._client.destroy)
            self._client = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        await self.store.aclose()

    async def __aenter__(self) -> DurableRunner:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _take_over(self, dead: str) -> int:
        """Hand the runs of the dead worker ``dead`` back to the queue."""
        client = self._need_client()
        runs = await client.list_workflows_async(status="PENDING", executor_id=dead,
                                                 load_input=False, load_output=False)
        for wf in runs:
            await client.resume_workflow_async(wf.workflow_id, queue_name=self.queue)
        return len(runs)

    def _ended(self, run_id: str, output: dict[str, Any] | None) -> None:
        """This process's workflow of ``run_id`` ended with DBOS's recorded ``output``."""
        results = self._results
        if results is not None:
            results.ended(run_id, output)

    def _need_client(self) -> DBOSClient:
        if self._client is None:
            raise UserError("This DurableRunner is not started: use `async with "
                            "DurableRunner(...)` or await start() first.")
        return self._client

    # -- submitting and waiting -------------------------------------------------------------

    async def submit(self, input: str, *, session_id: str | None = None,
                     run_id: str | None = None, user_id: str | None = None,
                     start_agent: str | None = None) -> SubmittedRun:
        """Put a run of the team on ``input`` on the queue, in ``session_id`` (a new session if
        none). Submitting a ``run_id`` again starts nothing: the first submission's run is
        the run (wait for it with ``result``)."""
        if type(input) is not str or not input:
            raise UserError(f"A durable run's input is non-empty text, got {input!r}.")
        session_id = session_id or new_session_id()
        return await self._enqueue(run_id, {
            "kind": "run", "agent": self.agent.name, "session_id": session_id, "input": input,
            "user_id": user_id, "start_agent": start_agent})

    async def resume(self, session_id: str, *, approvals: dict[str, bool] | None = None,
                     answers: dict[str, str] | None = None, reply: str | None = None,
                     hand_back: str | bool = False,
                     run_id: str | None = None) -> SubmittedRun:
        """Put the run that goes on from the stop of ``session_id``'s run on the queue, with
        the person's ``approvals`` and ``answers``, or the ``reply``/``hand_back`` of a person
        who holds the conversation (as for ``Runner.resume``, checked now: a wrong one raises
        ``AnswerError`` or ``UserError`` and nothing is queued)."""
        session = self.store.session(session_id)
        pending = await PendingRun.from_session(session, entry=self.agent)
        if pending is None:
            raise DurableRunError(f"Session {session_id!r} waits for no approval, answer or reply; "
                                  "submit a new run instead.", run_id=run_id)
        await Decisions.bind(session, self.agent, approvals or {}, pending, answers or {},
                             reply, hand_back)
        return await self._enqueue(run_id, {
            "kind": "resume", "agent": self.agent.name, "session_id": session_id,
            "approvals": approvals or {}, "answers": answers or {}, "reply": reply,
            "hand_back": hand_back})

    async def _enqueue(self, run_id: str | None, spec: dict[str, Any]) -> SubmittedRun:
        client = self._need_client()
        given = run_id is not None
        run_id = run_id or f"run-{secrets.token_hex(8)}"
        if not given and self._slots is not None and not self._slots.locked():
            # A new run this worker has room for starts here at once, not at the queue's next
            # poll, in a place taken now. It is a PENDING workflow of this worker like one it
            # took from the queue: a restart of it recovers it, a live worker takes it over if
            # it dies. A bound on the whole queue (``concurrency``) leaves every run to it.
            await self._slots.acquire()
            self._placed.add(run_id)
            try:
                with SetWorkflowID(run_id):
                    await DBOS.start_workflow_async(run_workflow, spec)
            except BaseException:
                self._placed.discard(run_id)
                self._slots.release()
                raise
            if self._results is None:
                self._results = _Results(client)
            self._results.local(run_id)
            return SubmittedRun(run_id, spec["session_id"])
        handle: WorkflowHandleAsync[dict[str, Any]] = await client.enqueue_async(
            {"workflow_name": WORKFLOW, "queue_name": self.queue, "workflow_id": run_id}, spec)
        if not given:
            return SubmittedRun(run_id, spec["session_id"])
        status = await handle.get_status()  # the run id may be an earlier submission's
        first: dict[str, Any] = status.input["args"][0] if status.input else spec
        return SubmittedRun(run_id, first["session_id"])

    async def result(self, run_id: str, *, wait: float | None = None) -> DurableResult:
        """Wait for the run ``run_id`` to end (at most ``wait`` seconds; ``None``: as long as
        it takes, a run waiting for a person included)."""
        if self._results is None:
            self._results = _Results(self._need_client())
        try:
            value = await asyncio.wait_for(self._results.wait(run_id), wait)
        except TimeoutError:
            raise DurableRunError(f"still running after {wait} s.", run_id=run_id) from None
        return result_of(value, self.agent, self.store)

    async def runs(self, run_ids: Sequence[str] | None = None, *, worker: str | None = None,
                   status: RunStatus | None = None) -> list[RunInfo]:
        """The durable runs of the database (of every team), oldest first: those named, those
        a ``worker`` has (its ``executor_id``), those in a ``status``; all of them if none of
        these is given."""
        if status is not None and status not in DBOS_STATUS.values():
            raise UserError(f"A run's status is one of {sorted(set(DBOS_STATUS.values()))}; got "
                            f"{status!r}.")
        found = await self._need_client().list_workflows_async(
            workflow_ids=list(run_ids) if run_ids is not None else None, executor_id=worker,
            status=None if status is None else [k for k, v in DBOS_STATUS.items() if v == status],
            name=WORKFLOW, load_input=False, load_output=False)
        return [RunInfo(wf.workflow_id, DBOS_STATUS.get(wf.status, "failed"), wf.executor_id or "")
                for wf in found]

    async def follow(self, run_id: str, *, poll: float = 0.2) -> AsyncIterator[AgentEvent]:
        """The events of the run ``run_id`` as its workers log them in its session (messages,
        tool calls and results, handoffs, the answer), from its start: an async iterator that
        waits while the run is queued and ends with its ``RunFinishedEvent``. A run whose
        workflow ends without logging its end (cancelled) raises `DurableRunError`. The log
        is read every ``poll`` seconds."""
        client = self._need_client()
        found = await client.list_workflows_async(workflow_ids=[run_id], load_output=False)
        if not found:
            raise DurableRunError("no run has this id; submit one first.", run_id=run_id)
        spec: dict[str, Any] = found[0].input["args"][0] if found[0].input else {}
        session = self.store.session(spec.get("session_id") or "")
        seen, inside = 0, False
        while True:
            wf = await client.list_workflows_async(workflow_ids=[run_id], load_input=False,
                                                   load_output=False)
            events = await session.get_events()  # read after the status: an end is in it
            for event in events[seen:]:
                top = "/" not in event.path
                inside = inside or (isinstance(event, RunStartedEvent) and top
                                    and event.run_id == run_id)
                if inside:
                    yield event
                    if isinstance(event, RunFinishedEvent) and top:
                        return
            seen = len(events)
            if wf and wf[0].status not in ("PENDING", "ENQUEUED", "DELAYED"):
                raise DurableRunError(f"its workflow ended {wf[0].status} without logging "
                                      "its end.", run_id=run_id)
            await asyncio.sleep(poll)

    async def cancel(self, run_id: str) -> None:
        """Cancel the run ``run_id``: a queued run never starts; a running one stops at its
        next step (its session keeps what it did, and a new run on it continues)."""
        await self._need_client().cancel_workflow_async(run_id)

    # -- a worker's run ---------------------------------------------------------------------

    async def _execute(self, run_id: str, spec: dict[str, Any]) -> dict[str, Any]:
        """One attempt of the run ``run_id``: continue it from its session log."""
        session_id = spec["session_id"]
        _log.info("worker %s took run %s (session %s)", self.executor_id, run_id, session_id)
        # One session object: each read of its view takes in what was appended since.
        session = self.store.session(session_id)
        fence = self._fence
        steps = _DbosSteps(self._need_client(), run_id, fence.lost if fence else None)
        wait = 2 * self.dead_after  # a dead worker's lease on the session lapses by then
        # ``worker_concurrency`` bounds the runs attempted here, those started here included
        # (the queue counts only those it handed over).
        slots = self._slots
        if slots is not None and run_id not in self._placed:
            await slots.acquire()  # one started here had its place taken by its submitter
        self._placed.discard(run_id)
        if fence is not None:
            fence.add(run_id, steps)
        try:
            options = RunOptions(context=self.context, max_turns=self.max_turns,
                                 model=self.model, usage_limits=self.usage_limits,
                                 wait_for_session=wait, steps=steps)
            return await attempts(self.agent, options, run_id, spec, session)
        except asyncio.CancelledError:
            if not steps.lost:
                raise
            # Let go of: DBOS parks this execution and takes the new owner's outcome.
            raise dbos_error.DBOSWorkflowConflictIDError(run_id) from None
        finally:
            if fence is not None:
                fence.discard(run_id)
            if slots is not None:
                slots.release()
