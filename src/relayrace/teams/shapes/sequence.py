"""The sequence shape: steps one after another.

Two ways to run a step, chosen by the front-end (``Shape.sessions``):
- in the run's own session (``steps_in_session``): each step sees what the earlier ones wrote,
  and a step's error ends the run; front-ends: ``SequentialAgent``, YAML ``workflow:
  sequential``, and each iteration of the loop shape;
- as delegated children (``steps_as_children``): each step in a child session of its own,
  given what the front-end makes of the earlier results; front-ends: Astromesh's ``Pipeline``,
  the ``agent_pipeline`` meta-tool, a chain's sequential links and the execution of a plan.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ...agents.agent import Agent
from ...agents.delegation import ChildResult
from ...core.messages import NOTE, ToolCall
from .driver import Driver
from .options import StepFailed

if TYPE_CHECKING:
    from ...tracing import Span

__all__ = ["SequenceOnError", "steps_as_children", "steps_in_session"]

SequenceOnError = Literal["stop", "continue"]


async def steps_as_children(
    count: int, step: Callable[[int, list[ChildResult]], Awaitable[ChildResult]], *,
    on_error: SequenceOnError | Sequence[SequenceOnError],
) -> list[ChildResult]:
    """Run ``count`` delegated children in order: ``step(i, done)`` runs step ``i`` (from 0)
    given the results so far, which the front-end turns into the step's input.

    A failed step raises ``StepFailed`` (with the earlier results) where ``on_error`` (one
    value, or one per step) says ``"stop"``; ``"continue"`` goes on with the failed result
    among the results.
    """
    done: list[ChildResult] = []
    for i in range(count):
        result = await step(i, done)
        policy = on_error if isinstance(on_error, str) else on_error[i]
        if not result.ok and policy == "stop":
            raise StepFailed(i, result, done)
        done.append(result)
    return done


def _resume_index(driver: Driver, steps: Sequence[Agent[Any]], label: str,
                  pending: list[ToolCall]) -> int:
    """Where a resumed workflow stopped: the step whose agent's calls await, or else the
    last step this workflow announced (a step waiting inside a delegated child)."""
    if pending:
        last = next((m for m in reversed(driver.transcript) if m.role == "assistant"), None)
        for i, step in enumerate(steps):
            if last is not None and last.name and any(a.name == last.name for a in step.walk()):
                return i
    marker = f"[{label}: step "
    for m in reversed(driver.transcript):
        if m.role == "user" and m.name == NOTE and m.content.startswith(marker):
            number = m.content[len(marker):].split(" ", 1)[0]
            return int(number) - 1 if number.isdigit() else 0
        if m.role == "user" and m.name != NOTE:
            break  # the workflow's current run started here
    return 0


async def steps_in_session(driver: Driver, owner: Agent[Any], steps: Sequence[Agent[Any]],
                           span: Span, label: str,
                           pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
    """Run ``steps`` in the run's own session, each announced by a note naming ``label``; a
    resumed run goes on with the step it stopped in. Returns (answer, last agent, reason)."""
    final, last, reason = "", owner, ""
    first = _resume_index(driver, steps, label, pending) if driver.resuming else 0
    for i in range(first, len(steps)):
        step = steps[i]
        if i > first:
            driver.note(step, f"[{label}: step {i + 1} of {len(steps)}, {step.name} continues]")
        final, last, reason = await driver.drive(step, span, pending if i == first else [])
        if driver.stopped or driver.leaving_loop:
            # A Finish or a guardrail's block ends every enclosing workflow; leaving a loop
            # ends the workflows inside the loop.
            return final, last, reason
    return final, last, reason
