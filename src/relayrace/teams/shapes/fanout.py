"""The fan-out shape: delegated children at once, results in the order given.

Front-ends: ``ParallelAgent``, Astromesh's ``ParallelFanOut`` (``parallel_fan_out``), the
``war_room`` meta-tool, a chain's parallel links and each round of ``debate_ensemble``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Sequence
from typing import Literal

from ...agents.approvals import Interrupted, Pending
from ...agents.delegation import ChildResult
from .options import StepFailed

__all__ = ["DEFAULT_ON_ERROR", "FanOutOnError", "fan_out"]

FanOutOnError = Literal["cancel", "collect"]


DEFAULT_ON_ERROR: FanOutOnError = "collect"
"""What a fan-out does when a branch fails, unless told: every branch finishes, the failure
is a failed result (``ParallelAgent``, ``ParallelFanOut``; a config's ``parallel_fan_out``
says ``cancel``, Astromesh's behaviour)."""


async def fan_out(runs: Sequence[Awaitable[ChildResult]], *, on_error: FanOutOnError,
                  limit: int | None = None) -> list[ChildResult]:
    """Run ``runs`` at once (at most ``limit`` at a time), results in the order given.

    ``on_error="collect"``: every branch finishes; a failed branch is a failed result.
    ``"cancel"``: the first failed branch cancels the others and raises ``StepFailed``.
    Either way a branch that stops for a person (an approval, a question) does not cancel its
    siblings: they finish, and every request then surfaces together on the outer run.
    """
    gate = asyncio.Semaphore(limit or max(1, len(runs)))
    stopped: list[Pending] = []

    async def one(i: int, run: Awaitable[ChildResult]) -> ChildResult | None:
        try:
            async with gate:
                result = await run
        except Interrupted as stop:
            stopped.extend(stop.pending)
            return None
        finally:  # a branch cancelled before its turn at the gate never started: close it
            if inspect.iscoroutine(run):
                run.close()
        if not result.ok and on_error == "cancel":
            raise StepFailed(i, result)
        return result

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(i, run)) for i, run in enumerate(runs)]
    except BaseExceptionGroup as raised:
        first = next((e for e in raised.exceptions if isinstance(e, StepFailed)), None)
        raise (first or raised.exceptions[0]) from None
    if stopped:
        raise Interrupted(stopped)
    return [r for r in (t.result() for t in tasks) if r is not None]
