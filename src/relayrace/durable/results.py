"""What a durable run comes to: where it stands, how it ended, and waiting for its end."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from dbos import DBOSClient
from pydantic_core import to_json

from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..core.exceptions import DurableRunError
from ..core.usage import Usage
from ..runner import RunResult
from ..sessions.store import SessionStore

__all__ = ["DBOS_STATUS", "DurableResult", "RunInfo", "RunStatus", "SubmittedRun", "output_of",
           "result_of"]


RunStatus = Literal["queued", "running", "ended", "failed", "cancelled"]
"""Where a durable run stands (`RunInfo.status`)."""
DBOS_STATUS: dict[str, RunStatus] = {
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
_USAGE_NAMES = tuple(f.name for f in fields(Usage))  # its counts: plain numbers
_USAGE_FIELDS = frozenset(_USAGE_NAMES)


def output_of(result: RunResult[Any]) -> dict[str, Any]:
    """``result`` as its workflow's output: JSON, for DBOS to record and any process to read."""
    output = result.final_output
    return {
        "status": "interrupted" if result.pending is not None else "completed",
        "output": output if isinstance(output, str) else to_json(output).decode(),
        "last_agent": result.last_agent.name, "reason": result.reason,
        "pending": result.pending.to_json() if result.pending is not None else None,
        "usage": {name: getattr(result.usage.total, name) for name in _USAGE_NAMES},
    }


def result_of(value: dict[str, Any], entry: Agent[Any], store: SessionStore) -> DurableResult:
    """A workflow's output as a `DurableResult` (fields a newer worker adds are left out:
    workers and submitters of different releases share a queue); its ``pending`` bound to
    ``entry`` and its session in ``store``, so that ``Runner.resume`` could also take it."""
    pending, used = value.get("pending"), value.get("usage")
    result = DurableResult(**{k: v for k, v in value.items() if k in _PLAIN_FIELDS})
    if used:
        result.usage = Usage(**{k: v for k, v in used.items() if k in _USAGE_FIELDS})
    if pending:
        result.pending = PendingRun.from_json(
            pending, entry=entry, session=store.session(result.session_id))
    return result


class _Results:
    """Waits for runs to end: one query per interval for every run waited for, not one each
    (a server may wait for thousands); a run that ends in this process hands over the outcome
    DBOS recorded, or is looked up at once, by its id alone. A run started in this process
    (``local``) is not polled at all while it runs: its end always comes from its task, and
    while only such runs are waited for, no poll runs."""

    def __init__(self, client: DBOSClient, interval: float = 0.05) -> None:
        self._client = client
        self._interval = interval
        self._loop = asyncio.get_running_loop()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ended: set[str] = set()  # runs of this process's workflows that ended
        self._local: set[str] = set()  # runs started in this process that have not ended
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def local(self, run_id: str) -> None:
        """``run_id`` was started in this process: its task's end says when it ends."""
        self._local.add(run_id)

    async def wait(self, run_id: str) -> dict[str, Any]:
        future = self._waiting.get(run_id)
        if future is None:
            future = self._waiting[run_id] = self._loop.create_future()
            # Read here, so that a run whose waiters all gave up raises no "never retrieved".
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
        if run_id not in self._local:  # a run started here ends from its task, unpolled
            self._polling()
        return await asyncio.shield(future)  # one waiter's timeout leaves the others waiting

    def _polling(self) -> None:
        """Make sure the poll runs (it ends when nothing is waited for)."""
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(self._poll())

    def ended(self, run_id: str, output: dict[str, Any] | None) -> None:
        """The workflow of ``run_id`` ended in this process, with DBOS's recorded ``output``
        (``None``: read how it ended); called from any thread."""
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._note, run_id, output)

    def _note(self, run_id: str, output: dict[str, Any] | None) -> None:
        self._local.discard(run_id)  # a wait from now on reads the database
        if run_id not in self._waiting:
            return
        if output is not None:
            self._waiting.pop(run_id).set_result(output)
            return
        self._ended.add(run_id)  # how it ended is read from the database
        self._wake.set()
        self._polling()

    async def _poll(self) -> None:
        try:
            sweep = 0.0
            while self._waiting:
                self._wake.clear()
                if self._loop.time() >= sweep:
                    self._ended.clear()
                    sweep = self._loop.time() + self._interval
                    await self._check([i for i in self._waiting if i not in self._local])
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

