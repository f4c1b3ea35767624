"""The DBOS side of a durable run: the workflow every run is, and its steps.

A worker's DBOS takes a run from the queue and runs `WORKFLOW`, which hands it to this
process's working `DurableRunner` (`serve`). Each model request and tool call of the run is a
DBOS step named by its key (the `StepRunner` on DBOS), so an attempt after a crash
takes what the steps of earlier attempts recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from dbos import DBOS, DBOSClient
from dbos import error as dbos_error

from ..core.exceptions import DurableRunError
from ..sessions.steps import StepRunner

__all__ = ["RECORDS_VERSION", "WORKFLOW", "Worker", "run_workflow", "serve", "serving"]

WORKFLOW = "relayrace.run"
"""The DBOS workflow every durable run is."""
RECORDS_VERSION = "relayrace-steps-1"
"""The DBOS application version of every worker: workers of any relayrace release take any
run, since steps are found by key, not by the code's shape; it changes only if the keys do."""


class Worker(Protocol):
    """What this process's workflows run on: the working `DurableRunner`."""

    async def _execute(self, run_id: str, spec: dict[str, Any]) -> dict[str, Any]:
        """One attempt of the run ``run_id``, as ``spec`` submitted it."""

    def _ended(self, run_id: str, output: dict[str, Any] | None) -> None:
        """The workflow of ``run_id`` ended in this process with DBOS's recorded ``output``
        (``None``: it raised or was cancelled; the database says how it ended)."""


_worker: Worker | None = None  # DBOS runs one instance per process, so one worker per process


def serve(worker: Worker | None) -> None:
    """Make ``worker`` the one this process's workflows run on (``None``: none any more)."""
    global _worker
    _worker = worker


def serving() -> Worker | None:
    """The worker this process's workflows run on, if one works here."""
    return _worker


@DBOS.workflow(name=WORKFLOW)
async def run_workflow(spec: dict[str, Any]) -> dict[str, Any]:
    worker, run_id = _worker, DBOS.workflow_id or ""
    if worker is None:
        raise DurableRunError("this process runs DBOS without a working DurableRunner; start "
                              "one with work=True (or `relayrace worker`).", run_id=run_id)
    # DBOS records a workflow's outcome in the task running it, and the task's value is what it
    # recorded (another execution's, if one owned the run): this process's waiters take it
    # then, without a read; one that raised or was cancelled is read from the database.
    task = asyncio.current_task()
    if task is not None:
        task.add_done_callback(lambda t: worker._ended(run_id, _output(t)))
    return await worker._execute(run_id, spec)


def _output(task: asyncio.Task[Any]) -> dict[str, Any] | None:
    if task.cancelled() or task.exception() is not None:
        return None
    value = task.result()
    return dict(value) if isinstance(value, dict) else None


_GAP = "relayrace.unfinished"  # the no-op step in the place of one a dead process left running


async def _never() -> str:  # a recorded step is replayed, never run
    raise AssertionError("a replayed step ran")


async def _nothing() -> str:
    return ""


class _DbosSteps(StepRunner):
    """Steps as DBOS steps named by their keys, with what earlier attempts recorded."""

    __slots__ = ("_client", "_done", "_lost", "began", "lost", "run_id")

    def __init__(self, client: DBOSClient, run_id: str,
                 lost: Callable[[str], Awaitable[bool]] | None = None) -> None:
        self._client = client
        self._done: dict[str, str] = {}
        self._lost = lost  # asks, before a step runs, whether another worker took the run
        self.run_id = run_id
        self.began = False  # whether this execution went through DBOS's step numbers yet
        self.lost = False  # the run was taken over: this attempt stops, writing nothing

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
        if self.began:  # an attempt again in this execution: its steps are in ``_done``
            return
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

        if self._lost is not None and await self._lost(self.run_id):
            raise dbos_error.DBOSWorkflowConflictIDError(self.run_id)

        async def call() -> str:
            return await fn()

        done: str = await DBOS.run_step_async({"name": key, "retries_allowed": False}, call)
        self._done[key] = done  # for another attempt in this execution (see _attempts)
        return done

    def recorded(self, key: str) -> str | None:
        return self._done.get(key)

    def superseded(self, exc: BaseException) -> bool:
        # DBOS's word that another execution owns the workflow now (this worker was taken
        # for dead): DBOS parks this one and takes the owner's outcome, when it comes.
        return self.lost or isinstance(exc, dbos_error.DBOSWorkflowConflictIDError)

