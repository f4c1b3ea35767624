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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

import sqlalchemy as sa
from dbos import DBOS, DBOSClient, DBOSConfig, WorkflowHandleAsync
from dbos import error as dbos_error
from pydantic_core import to_json

from .._engine.decisions import Decisions
from .._engine.steps import AttemptEnded
from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..core.events import AgentEvent, RunFinishedEvent, RunStartedEvent
from ..core.exceptions import DurableRunError, RelayraceError, SessionInUseError, UserError
from ..core.usage import Usage, UsageLimits
from ..models.interface import Model
from ..runner import Runner, RunResult
from ..sessions.base import Session, new_session_id
from ..sessions.steps import StepRunner
from ..sessions.store import MemoryStore, SessionStore, SQLiteStore, open_store
from .workers import Heartbeat, engine_url

__all__ = ["DurableResult", "DurableRunner", "RunInfo", "RunStatus", "SubmittedRun"]

WORKFLOW = "relayrace.run"
"""The DBOS workflow every durable run is."""
RECORDS_VERSION = "relayrace-steps-1"
"""The DBOS application version of every worker: workers of any relayrace release take any
run, since steps are found by key, not by the code's shape; it changes only if the keys do."""

_log = logging.getLogger("relayrace.durable")
_worker: DurableRunner | None = None  # the runner whose team this process's workflows run


@DBOS.workflow(name=WORKFLOW)
async def _run_workflow(spec: dict[str, Any]) -> dict[str, Any]:
    worker, run_id = _worker, DBOS.workflow_id or ""
    if worker is None:
        raise DurableRunError("this process runs DBOS without a working DurableRunner; start "
                              "one with work=True (or `relayrace worker`).", run_id=run_id)
    # DBOS records a workflow's outcome before the task running it ends: then, not at their
    # next poll, this process's waiters look (a hint; the database stays the word).
    task = asyncio.current_task()
    if task is not None:
        task.add_done_callback(lambda _: worker._ended(run_id))
    return await worker._execute(run_id, spec)


_GAP = "relayrace.unfinished"  # the no-op step in the place of one a dead process left running


async def _never() -> str:  # a recorded step is replayed, never run
    raise AssertionError("a replayed step ran")


async def _nothing() -> str:
    return ""


class _DbosSteps(StepRunner):
    """Steps as DBOS steps named by their keys, with what earlier attempts recorded."""

    __slots__ = ("_client", "_done", "began", "run_id")

    def __init__(self, client: DBOSClient, run_id: str) -> None:
        self._client = client
        self._done: dict[str, str] = {}
        self.run_id = run_id
        self.began = False  # whether this attempt went through DBOS's step numbers yet

    async def start(self, again: bool) -> None:
        """Take in what earlier attempts of this run recorded (if one began).

        DBOS numbers a workflow's steps as they start and checks each number's name when the
        workflow runs again; this attempt asks for other steps, in another order. So every
        number an earlier attempt used goes through DBOS again first, in order: a recorded step
        returns its value, and a number whose step never finished (it was running when the
        process died) is filled with a no-op step. This attempt's own steps come after them.
        An attempt that finds no start of the run in the log needs none of this: the run's
        start is logged before its first step.
        """
        self.began = True
        if not again:
            return
        recorded = {info["function_id"]: info["function_name"]
                    for info in await self._client.list_workflow_steps_async(self.run_id)}
        for number in range(1, max(recorded, default=0) + 1):
            name = recorded.get(number)
            if name is None:
                await DBOS.run_step_async({"name": _GAP}, _nothing)
                continue
            try:
                value = await DBOS.run_step_async({"name": name}, _never)
            except Exception:  # a step that failed records no value: it runs again
                continue
            if isinstance(value, str) and name != _GAP:
                self._done[name] = value

    async def step(self, key: str, fn: Callable[[], Awaitable[str]]) -> str:
        value = self._done.get(key)
        if value is not None:
            return value

        async def call() -> str:
            return await fn()

        return await DBOS.run_step_async({"name": key, "retries_allowed": False}, call)

    def recorded(self, key: str) -> str | None:
        return self._done.get(key)

    def superseded(self, exc: BaseException) -> bool:
        # DBOS's word that another execution owns the workflow now (this worker was taken
        # for dead): DBOS parks this one and takes the owner's outcome, when it comes.
        return isinstance(exc, dbos_error.DBOSWorkflowConflictIDError)


class _Results:
    """Waits for runs to end: one query per interval for every run waited for, not one each
    (a server may wait for thousands); a run that ends in this process is looked up at once,
    by its id alone."""

    def __init__(self, client: DBOSClient, interval: float = 0.05) -> None:
        self._client = client
        self._interval = interval
        self._loop = asyncio.get_running_loop()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ended: set[str] = set()  # runs of this process's workflows that ended
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def wait(self, run_id: str) -> dict[str, Any]:
        future = self._waiting.get(run_id)
        if future is None:
            future = self._waiting[run_id] = self._loop.create_future()
            # Read here, so that a run whose waiters all gave up raises no "never retrieved".
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll())
        return await asyncio.shield(future)  # one waiter's timeout leaves the others waiting

    def ended(self, run_id: str) -> None:
        """The workflow of ``run_id`` ended in this process (called from any thread)."""
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._note, run_id)

    def _note(self, run_id: str) -> None:
        if run_id in self._waiting:
            self._ended.add(run_id)
            self._wake.set()

    async def _poll(self) -> None:
        try:
            sweep = 0.0
            while self._waiting:
                self._wake.clear()
                if self._loop.time() >= sweep:
                    self._ended.clear()
                    sweep = self._loop.time() + self._interval
                    await self._check(list(self._waiting))
                elif self._ended:
                    ended, self._ended = self._ended, set()
                    await self._check([i for i in ended if i in self._waiting])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(),
                                           max(0.0, sweep - self._loop.time()))
        except Exception as exc:  # the database failed: every waiter hears it, none hangs
            waiting, self._waiting = self._waiting, {}
            for run_id, future in waiting.items():
                future.set_exception(DurableRunError(
                    f"its state could not be read: {type(exc).__name__}: {exc}", run_id=run_id))

    async def _check(self, ids: list[str]) -> None:
        """Settle the runs of ``ids`` that ended (one query per 500 runs)."""
        found = set()
        for at in range(0, len(ids), 500):
            for wf in await self._client.list_workflows_async(
                    workflow_ids=ids[at:at + 500], load_input=False):
                found.add(wf.workflow_id)
                if wf.status in ("PENDING", "ENQUEUED", "DELAYED"):
                    continue
                future = self._waiting.pop(wf.workflow_id, None)
                if future is None:
                    continue
                if wf.status == "SUCCESS":
                    future.set_result(dict(wf.output or {}))
                else:
                    why = f"{type(wf.error).__name__}: {wf.error}" if wf.error else ""
                    future.set_exception(DurableRunError(
                        f"its workflow ended {wf.status} {why}".rstrip(),
                        run_id=wf.workflow_id))
        for run_id in set(ids) - found:
            future = self._waiting.pop(run_id, None)
            if future is not None:
                future.set_exception(
                    DurableRunError("no run has this id; submit one first.", run_id=run_id))

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for future in self._waiting.values():
            future.cancel()


RunStatus = Literal["queued", "running", "ended", "failed", "cancelled"]
_STATUS: dict[str, RunStatus] = {
    "ENQUEUED": "queued", "DELAYED": "queued", "PENDING": "running", "SUCCESS": "ended",
    "ERROR": "failed", "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed", "CANCELLED": "cancelled"}


@dataclass(slots=True, frozen=True)
class RunInfo:
    """Where a durable run stands (``DurableRunner.runs``)."""

    run_id: str
    """The run."""
    status: RunStatus
    """``queued`` (for a worker), ``running`` (a worker has it; one that died keeps it until a
    live worker takes it over), ``ended`` (``result`` has it), ``failed`` (its workflow
    failed) or ``cancelled``."""
    worker: str
    """The worker that runs it, or ran it last (``""``: none yet)."""


@dataclass(slots=True, frozen=True)
class SubmittedRun:
    """A run on the queue."""

    run_id: str
    """Its id (the DBOS workflow's): ``DurableRunner.result`` waits for it."""
    session_id: str
    """The session it runs in."""


@dataclass(slots=True, kw_only=True)
class DurableResult:
    """How a durable run ended."""

    run_id: str
    """The run."""
    session_id: str
    """Its session (the log of everything it did)."""
    status: Literal["completed", "interrupted", "failed"]
    """``completed``; ``interrupted``: it waits for a person (``pending``); ``failed``: the
    run raised (``error``)."""
    output: str = ""
    """The final answer: text, or the JSON of a typed agent's value."""
    last_agent: str = ""
    """The agent that gave it."""
    reason: str = ""
    """Why the run ended, when a rule, tool or guardrail ended it."""
    error: str = ""
    """For a failed run: the error's type and message."""
    pending: PendingRun | None = None
    """For an interrupted run: what it waits for; answer with ``DurableRunner.resume``."""
    usage: Usage = field(default_factory=Usage)
    """Requests and tokens of the run (delegated children included), as the attempt that
    ended it counted them."""


_PLAIN_FIELDS = frozenset(f.name for f in fields(DurableResult)) - {"pending", "usage"}
_USAGE_FIELDS = frozenset(f.name for f in fields(Usage))


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

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the database; a worker also launches DBOS and starts taking runs."""
        global _worker
        if self._client is not None:
            return
        if self.work and _worker is not None:
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
        _worker = self
        try:
            # The first heartbeat is written before DBOS hands this worker any run.
            self._beat = Heartbeat(self.dbos_url, self.executor_id, every=self.heartbeat,
                                   dead_after=self.dead_after, take_over=self._take_over)
            await self._beat.start()
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
        except BaseException:
            await self.stop()
            raise

    async def stop(self, *, drain: float = 0.0) -> None:
        """Stop: a worker waits up to ``drain`` seconds for the runs it is running, then hands
        what is left back to the queue (another worker continues them) and removes its
        heartbeat."""
        global _worker
        if self._beat is not None:
            await self._beat.stop()
        if _worker is self:
            # Off this loop, whose runs may be finishing meanwhile. DBOS made its thread pool
            # this loop's default executor, and shuts it down: the loop gets a new one.
            loop = asyncio.get_running_loop()
            with ThreadPoolExecutor(1) as pool:
                await loop.run_in_executor(pool, lambda: DBOS.destroy(
                    workflow_completion_timeout_sec=int(drain)))
            loop.set_default_executor(ThreadPoolExecutor())
            _worker = None
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

    def _ended(self, run_id: str) -> None:
        """This process's workflow of ``run_id`` ended (DBOS has its outcome)."""
        results = self._results
        if results is not None:
            results.ended(run_id)

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
        return self._result(value)

    def _result(self, value: dict[str, Any]) -> DurableResult:
        """A workflow's output as a `DurableResult` (fields a newer worker adds are left out:
        workers and submitters of different releases share a queue)."""
        pending, used = value.get("pending"), value.get("usage")
        result = DurableResult(**{k: v for k, v in value.items() if k in _PLAIN_FIELDS})
        if used:
            result.usage = Usage(**{k: v for k, v in used.items() if k in _USAGE_FIELDS})
        if pending:  # bound, so that Runner.resume could also take it in this process
            result.pending = PendingRun.from_json(
                pending, entry=self.agent, session=self.store.session(result.session_id))
        return result

    async def runs(self, run_ids: Sequence[str] | None = None, *, worker: str | None = None,
                   status: RunStatus | None = None) -> list[RunInfo]:
        """The durable runs of the database (of every team), oldest first: those named, those
        a ``worker`` has (its ``executor_id``), those in a ``status``; all of them if none of
        these is given."""
        if status is not None and status not in _STATUS.values():
            raise UserError(f"A run's status is one of {sorted(set(_STATUS.values()))}; got "
                            f"{status!r}.")
        found = await self._need_client().list_workflows_async(
            workflow_ids=list(run_ids) if run_ids is not None else None, executor_id=worker,
            status=None if status is None else [k for k, v in _STATUS.items() if v == status],
            name=WORKFLOW, load_input=False, load_output=False)
        return [RunInfo(wf.workflow_id, _STATUS.get(wf.status, "failed"), wf.executor_id or "")
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
        steps = _DbosSteps(self._need_client(), run_id)
        wait = 2 * self.dead_after  # a dead worker's lease on the session lapses by then
        while True:
            try:
                return await self._attempt(run_id, spec, session, steps, wait)
            except SessionInUseError:
                # Renewed all along: its holder lives. A worker taken for dead by mistake
                # finishes the step it is in, learns it lost the run and lets go; nothing of
                # this attempt ran yet (the lease comes first), so it waits again.
                _log.warning("run %s: session %s is still held by a live run; waiting "
                             "again", run_id, session_id)

    async def _attempt(self, run_id: str, spec: dict[str, Any], session: Session,
                       steps: _DbosSteps, wait: float) -> dict[str, Any]:
        session_id = spec["session_id"]
        base: dict[str, Any] = {"run_id": run_id, "session_id": session_id}
        try:
            if spec["agent"] != self.agent.name:
                raise DurableRunError(f"the run is for team {spec['agent']!r}, but this worker "
                                      f"runs {self.agent.name!r}; give each team its own "
                                      "queue.", run_id=run_id)
            if spec["kind"] == "run":
                # The engine continues the run instead if the log shows an attempt began it.
                result = await Runner._run(
                    self.agent, spec["input"], session, self.context, self.max_turns, None,
                    spec["start_agent"], self.model, self.usage_limits, None,
                    wait_for_session=wait, user_id=spec["user_id"], steps=steps)
            else:
                # Decisions are taken once: by the attempt that finds the stop still open.
                began = (await session.view()).run_id == run_id
                pending = None if began else \
                    await PendingRun.from_session(session, entry=self.agent)
                if not began and pending is None:
                    raise DurableRunError(f"Session {session_id!r} waits for no approval or "
                                          "answer any more.", run_id=run_id)
                result = await Runner._run(
                    self.agent, None, session, self.context, self.max_turns, None, None,
                    self.model, self.usage_limits, None,
                    approvals=None if pending is None else spec["approvals"],
                    given_for=pending, answers=None if pending is None else spec["answers"],
                    wait_for_session=wait, steps=steps,
                    reply=None if pending is None else spec.get("reply"),
                    hand_back=None if pending is None else spec.get("hand_back"))
        except AttemptEnded as done:  # the log has the outcome; DBOS had not taken it yet
            return base | await self._outcome(session, done.ended)
        except RelayraceError as exc:
            if isinstance(exc, SessionInUseError) and not steps.began:
                raise  # nothing of this attempt ran: it waits again
            return base | {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        return base | _ended(result)

    async def _outcome(self, session: Session, ended: RunFinishedEvent) -> dict[str, Any]:
        """What a run that an earlier attempt ended came to, from its ``RunFinishedEvent``."""
        if ended.status == "failed":
            return {"status": "failed", "error": ended.output}
        pending = await PendingRun.from_session(session, entry=self.agent) \
            if ended.status == "interrupted" else None
        return {"status": ended.status, "output": "" if pending else ended.output,
                "last_agent": ended.agent, "reason": ended.reason,
                "pending": pending.to_json() if pending is not None else None}


def _ended(result: RunResult[Any]) -> dict[str, Any]:
    output = result.final_output
    return {
        "status": "interrupted" if result.pending is not None else "completed",
        "output": output if isinstance(output, str) else to_json(output).decode(),
        "last_agent": result.last_agent.name, "reason": result.reason,
        "pending": result.pending.to_json() if result.pending is not None else None,
        "usage": asdict(result.usage.total),
    }
