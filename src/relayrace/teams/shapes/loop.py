"""The loop shape: a sequence in the run's own session, repeated until a condition holds.

Front-ends: ``LoopAgent`` and YAML ``workflow: loop``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...agents.agent import Agent
from ...core.messages import ToolCall
from .driver import Driver
from .sequence import steps_in_session

if TYPE_CHECKING:
    from ...tracing import Span

__all__ = ["run_loop"]


async def run_loop(driver: Driver, owner: Agent[Any], steps: Sequence[Agent[Any]], span: Span,
                   pending: list[ToolCall], *, max_iterations: int,
                   until: Callable[[str], bool] | None) -> tuple[str, Agent[Any], str]:
    """Run ``steps`` up to ``max_iterations`` times, until ``until`` holds for the latest
    answer; a step's ``Finish(scope="loop")`` leaves the loop, and control goes on after it.
    Returns (answer, last agent, reason: ``"until"``, ``"max_iterations"`` or the step's)."""
    final, last = "", steps[0]
    with driver.loop_scope():
        for i in range(max_iterations):
            if i:
                driver.note(owner, f"[{owner.name}: iteration {i + 1} of {max_iterations}]")
            final, last, reason = await steps_in_session(driver, owner, steps, span, owner.name,
                                                         pending if i == 0 else [])
            if driver.stopped or driver.leaving_loop:  # a step left the loop: go on after it
                return final, last, reason
            if until is not None and until(final):
                return final, last, "until"
    return final, last, "max_iterations"
