"""The options a front-end chooses for its shape, as values: `Shape` (what it runs and how a
failure is handled), `ChildPolicy` (how its delegated children run) and `StepFailed`.

Every name that runs agents in order, at once, in a loop, by a plan or in a debate is a thin
front-end over one implementation per shape (this package); what used to be invisible
differences between them (which cancels on error, which returns reports, which shares the
session) are the values of these options, listed on each front-end's ``shape`` attribute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ...agents.delegation import ChildResult, run_child
from ...core.exceptions import RelayraceError
from ...core.reports import DEFAULT_REPORT_SUFFIX

if TYPE_CHECKING:
    from ...agents.agent import Agent
    from ...agents.context import RunContext
    from ...core.messages import Message

__all__ = ["ChildPolicy", "Failure", "OnError", "Sessions", "Shape", "ShapeKind", "StepFailed"]

ShapeKind = Literal["sequence", "fan_out", "loop", "plan", "debate", "routing"]
Sessions = Literal["shared", "child"]
OnError = Literal["stop", "continue", "cancel", "collect", "per_step"]
Failure = Literal["error", "tool_result", "in_answer"]


@dataclass(slots=True, frozen=True, kw_only=True)
class Shape:
    """Which shape a front-end runs and the options it chose (see docs/orchestration.md)."""

    kind: ShapeKind
    """sequence, fan_out (parallel), loop, plan (plan-then-execute), debate or routing."""
    sessions: Sessions
    """Where the steps run: ``"shared"``, in the run's own session, each step seeing what the
    earlier ones wrote; ``"child"``, each in a delegated child session of its own."""
    on_error: OnError
    """When a step fails: ``"stop"`` (a sequence ends there), ``"continue"`` (the failure is
    passed on with the results), ``"cancel"`` (a fan-out cancels the other branches),
    ``"collect"`` (a fan-out lets them finish and returns every result), ``"per_step"``
    (each step chooses, e.g. ``ChainLink.on_error``)."""
    failure: Failure
    """How a failure that stops the shape surfaces: ``"error"``, the run ends with it
    (``PatternStepFailed`` for a child step); ``"tool_result"``, the calling model receives it
    as a tool result it can correct; ``"in_answer"``, nothing stops (the failure is part of the
    answer)."""
    reports: bool
    """Whether each child ends with a structured report (``submit_report``) rather than just
    its answer."""


class StepFailed(RelayraceError):
    """A step failed where the shape's ``on_error`` says to stop (or cancel).

    Raised by the shapes to their front-end, which turns it into the failure it documents
    (``Shape.failure``): ``PatternStepFailed``, or a ``ToolRetry`` for a meta-tool's model.
    """

    def __init__(self, index: int, result: ChildResult,
                 done: Sequence[ChildResult] = ()) -> None:
        super().__init__(f"step {index + 1} ({result.agent}) failed: {result.error}")
        self.index = index
        """Which step failed, from 0."""
        self.result = result
        """Its result."""
        self.done = tuple(done)
        """The results of the steps before it (a sequence's)."""


@dataclass(slots=True, frozen=True, kw_only=True)
class ChildPolicy:
    """How a shape runs each delegated child: the options its front-end chose.

    ``reports``: the child ends with a structured report; ``max_turns`` and ``timeout`` bound
    each child (the run's ``UsageLimits`` and ``max_agent_calls`` bound them all, whatever is
    chosen here); ``max_concurrency`` bounds the children of one fan-out running at once.
    """

    reports: bool = False
    report_template: str = DEFAULT_REPORT_SUFFIX
    max_turns: int | None = None
    timeout: float | None = None
    max_concurrency: int | None = None

    async def run(self, ctx: RunContext[Any], agent: Agent[Any], task: str, *,
                  key: str | None = None, history: Sequence[Message] = (),
                  audience: str = "", suffix: str = "") -> ChildResult:
        """Run ``agent`` on ``task`` as a delegated child of the agent ``ctx`` serves."""
        return await run_child(ctx, agent, task, report=self.reports, audience=audience,
                               report_template=self.report_template, suffix=suffix,
                               max_turns=self.max_turns, timeout=self.timeout,
                               history=history, key=key)
