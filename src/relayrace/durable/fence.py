"""A worker taken for dead lets go of its runs, quietly.

A worker that stops for longer than ``dead_after`` (the process paused: SIGSTOP, a frozen
VM, a long swap) is taken for dead, and a live worker takes its runs over (``workers``). When
it wakes, its attempts of those runs must not go on: a step, a side effect or a session write
of theirs would race the attempt that now owns the run. DBOS refuses an old execution's step
records, but only after the step ran; so this worker asks DBOS whom each run belongs to, and
lets go of those it lost (they end without writing anything; DBOS parks the execution until
the owner's outcome is recorded, which becomes this one's):

- when the process is continued (SIGCONT), in the signal handler itself, before any
  coroutine of this process resumes: a tool halfway through its work stops at the await it
  was paused in;
- before each step, when this worker's last good heartbeat is older than ``dead_after`` less
  one heartbeat (a pause no signal told of), for that run;
- when a heartbeat finds this worker was taken for dead, for every run it is attempting.

In the normal case none of these asks anything: a step compares two clock readings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

from dbos import DBOSClient

__all__ = ["Fence"]

_log = logging.getLogger("relayrace.durable")


class Fence:
    """The runs this worker is attempting, each with its task and steps, and the letting go of
    those another worker took over."""

    def __init__(self, executor_id: str, client: Callable[[], DBOSClient],
                 stale: Callable[[], bool]) -> None:
        self.executor_id = executor_id
        self._client = client
        self._stale = stale
        self._attempts: dict[str, tuple[asyncio.Task[Any], Any]] = {}
        self._previous: Any = None
        self._installed = False

    def add(self, run_id: str, steps: Any) -> None:
        """The attempt of ``run_id`` running in the current task, with its ``steps`` (whose
        ``lost`` is set when the run is let go of)."""
        task = asyncio.current_task()
        if task is not None:
            self._attempts[run_id] = (task, steps)

    def discard(self, run_id: str) -> None:
        self._attempts.pop(run_id, None)

    def _taken(self, found: list[Any], asked: list[str]) -> list[str]:
        mine = {wf.workflow_id for wf in found
                if wf.status == "PENDING" and wf.executor_id == self.executor_id}
        return [run_id for run_id in asked if run_id not in mine]

    def _let_go(self, run_ids: list[str], *, cancel: bool = True) -> None:
        for run_id in run_ids:
            entry = self._attempts.get(run_id)
            if entry is None:
                continue
            task, steps = entry
            if not steps.lost:
                _log.warning("worker %s: run %s was taken over while this worker was "
                             "stopped; its attempt here stops", self.executor_id, run_id)
                steps.lost = True
                if cancel:
                    task.cancel()

    async def check(self, run_ids: list[str] | None = None) -> None:
        """Let go of the runs (of ``run_ids``, or all attempted here) now another worker's."""
        asked = list(self._attempts) if run_ids is None else run_ids
        if not asked:
            return
        found = await self._client().list_workflows_async(
            workflow_ids=asked, load_input=False, load_output=False)
        self._let_go(self._taken(found, asked))

    async def lost(self, run_id: str) -> bool:
        """Whether the run ``run_id`` is no longer this worker's, asked only when this worker
        may have been taken for dead (its heartbeat is stale)."""
        if not self._stale():
            return False
        found = await self._client().list_workflows_async(
            workflow_ids=[run_id], load_input=False, load_output=False)
        taken = self._taken(found, [run_id])
        self._let_go(taken, cancel=False)  # the asking step raises instead
        return bool(taken)

    def _continued(self, signum: int, frame: Any) -> None:
        """SIGCONT: ask at once, in the main thread, before the event loop runs again."""
        try:
            asked = list(self._attempts)
            if asked:
                found = self._client().list_workflows(workflow_ids=asked, load_input=False,
                                                      load_output=False)
                self._let_go(self._taken(found, asked))
        except Exception:  # the database is unreachable: the steps' own checks remain
            _log.exception("worker %s: could not check its runs after a pause",
                           self.executor_id)
        previous = self._previous
        if callable(previous):
            previous(signum, frame)

    def install(self) -> None:
        """Listen for SIGCONT (in the main thread only, where Python runs signal handlers)."""
        if self._installed or threading.current_thread() is not threading.main_thread() or \
                not hasattr(signal, "SIGCONT"):
            return
        self._previous = signal.signal(signal.SIGCONT, self._continued)
        self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signal.SIGCONT, self._previous or signal.SIG_DFL)
            self._installed = False
