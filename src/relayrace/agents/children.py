"""What a delegated child run takes (`ChildOptions`) and gives back (`ChildResult`): the data
that crosses `RunContext.children`, the engine's port for child runs (see ``.delegation``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.messages import Message
from ..core.reports import DEFAULT_REPORT_SUFFIX, EMPTY_ANSWER, DelegationReport
from ..core.usage import Usage

__all__ = ["ChildOptions", "ChildResult"]


@dataclass(slots=True, kw_only=True, frozen=True)
class ChildOptions:
    """How a delegated child runs (see ``run_child``)."""

    report: bool = True
    """Whether the child ends with a structured report."""
    audience: str = ""
    """Who reads the report, for its wording."""
    report_template: str = DEFAULT_REPORT_SUFFIX
    """The Jinja2 text that asks for the report."""
    suffix: str = ""
    """More text for the child's instructions."""
    max_turns: int | None = None
    """The child's own turn limit."""
    timeout: float | None = None
    """Seconds the child may take."""
    variables: dict[str, Any] | None = None
    """Template variables for the child's instructions."""
    history: tuple[Message, ...] = ()
    """Parent messages the child sees before its task."""
    key: str | None = None
    """Which child of the parent's call this is (numbered by default)."""


@dataclass(slots=True, kw_only=True)
class ChildResult:
    """How one delegated child run ended."""

    agent: str
    """The child agent's name."""
    path: str
    """Its delegation path, e.g. ``coordinator/researcher``."""
    ok: bool
    """Whether it finished with an answer."""
    output: str = ""
    """Its final answer (empty if it failed)."""
    report: DelegationReport | None = None
    """Its parsed report, when a report was asked for (never for a child with an
    ``output_type``: its value is the result)."""
    value: Any = None
    """Its validated structured output, when it has an ``output_type`` (``output`` holds it
    as JSON, which is what its parent's model receives)."""
    error: str | None = None
    """Why it failed."""
    session_id: str = ""
    """Its child session."""
    usage: Usage
    """What it used, its own children included."""

    def render(self) -> str:
        """The compact text its parent's model receives."""
        if not self.ok:
            return f"{self.agent} failed: {self.error}"
        if self.report is not None:
            return self.report.render()
        return self.output or EMPTY_ANSWER
