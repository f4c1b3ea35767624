"""`StepRunner`: where a durable-execution engine records a run.

A run's side effects and costs happen in two places: model requests and tool calls. A durable
run passes each through a ``StepRunner`` under a key that names it the same way in every
attempt of the run (its session, the conversation position, the agent or the call id), and
the runner may record what the step returned. A later attempt of the same run (after its
process died) asks for the same key and gets the recorded value back instead of calling the
model or the tool again.

Keys, not the order of calls, identify steps: a resumed run continues from its session log,
so it asks only for the steps the log does not hold yet, in whatever order its concurrent
calls reach them. Values are JSON text, so any engine can store them (DBOS checkpoints them;
a Temporal adapter would return them from activities). ``relayrace.durable`` holds the DBOS
adapter; ``docs/durable.md`` says what another engine's adapter takes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

__all__ = ["StepRunner"]


class StepRunner(ABC):
    """Runs and records the steps of one attempt of a durable run."""

    run_id: str
    """The durable run this is an attempt of: the engine writes it in the run's
    ``RunStartedEvent``, so a later attempt finds where the run began in the session log."""

    async def start(self, again: bool) -> None:  # noqa: B027 - most runners need nothing here
        """Called once, before the run's first step: ``again`` when the session log shows an
        earlier attempt of this run began (so it may have recorded steps)."""

    @abstractmethod
    async def step(self, key: str, fn: Callable[[], Awaitable[str]]) -> str:
        """The value of the step ``key``: recorded by an earlier attempt, or ``fn()``'s,
        recorded before it is returned. The run's session log takes the value only with its
        next write that must be on record (a tool call's start, the run's end), so until then
        the record is what a later attempt has of it."""

    def superseded(self, exc: BaseException) -> bool:
        """Whether ``exc`` says this attempt lost the run to another one (the engine took it
        for dead and gave it to another process): the attempt then stops without writing to
        the session log, whose run goes on with the attempt that owns it."""
        return False

    @abstractmethod
    def recorded(self, key: str) -> str | None:
        """The value an earlier attempt recorded for ``key`` (``None``: it recorded none), so
        a resumed run can tell a call that finished before the crash from one whose outcome
        is unknown."""
