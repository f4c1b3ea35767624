"""The routing confusion matrix: which agent each case should have ended with, against the
agent it reached.

A case run that stopped early (for a person, on a limit, on an error) is routed by the path
it took, once it left its first agent; one that never did is counted in the ``stopped`` or
``error`` column, apart from misrouting, and left out of the accuracy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .results import CaseRun

__all__ = ["ERROR", "STOPPED", "ConfusionMatrix", "reached"]

STOPPED = "stopped"
"""The column of case runs that stopped for a person before any routing."""
ERROR = "error"
"""The column of case runs that ended in an error before any routing."""
_APART = (STOPPED, ERROR)


def reached(run: CaseRun) -> str:
    """The agent ``run`` reached: the one that answered; for a run that stopped early, the
    last of its path once it left its first agent (or reached the agent expected); else
    ``stopped`` or ``error``."""
    if run.status != "error" and not run.stopped and run.last_agent:
        return run.last_agent
    if run.path and (len(run.path) > 1 or run.path[-1] == run.expected_agent):
        return run.path[-1]
    return ERROR if run.status == "error" else STOPPED


@dataclass(slots=True)
class ConfusionMatrix:
    """Counts of case runs by expected agent (rows) and the agent reached (columns)."""

    expected: list[str] = field(default_factory=list)
    """The row labels."""
    reached: list[str] = field(default_factory=list)
    """The column labels: agents, then ``stopped`` and ``error`` if any run is there."""
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    """(expected, reached) -> case runs."""

    @classmethod
    def of(cls, runs: Sequence[CaseRun]) -> ConfusionMatrix:
        """The matrix of the runs whose case names an expected agent."""
        matrix = cls()
        for run in runs:
            if run.expected_agent is None:
                continue
            key = (run.expected_agent, reached(run))
            matrix.counts[key] = matrix.counts.get(key, 0) + 1
        labels = sorted({a for pair in matrix.counts for a in pair} - set(_APART))
        matrix.expected = [a for a in labels if any(k[0] == a for k in matrix.counts)]
        matrix.reached = labels + [c for c in _APART if any(k[1] == c for k in matrix.counts)]
        return matrix

    def count(self, expected: str, reached: str) -> int:
        """Case runs that should have ended with ``expected`` and ended with ``reached``."""
        return self.counts.get((expected, reached), 0)

    def row_total(self, expected: str) -> int:
        """Case runs that should have ended with ``expected``."""
        return sum(n for (e, _), n in self.counts.items() if e == expected)

    def apart(self, column: str) -> int:
        """Case runs in the ``stopped`` or ``error`` column."""
        return sum(n for (_, r), n in self.counts.items() if r == column)

    @property
    def accuracy(self) -> float:
        """The share of routed case runs (``stopped`` and ``error`` left out) that ended
        where they should have."""
        total = sum(n for (_, r), n in self.counts.items() if r not in _APART)
        right = sum(n for (e, r), n in self.counts.items() if e == r)
        return right / total if total else 0.0

    def summary(self) -> str:
        """``100% right`` with the runs left out named: ``(1 stopped, 2 errors apart)``."""
        parts = [f"{n} {label}" for label, n in (("stopped", self.apart(STOPPED)),
                                                 ("error(s)", self.apart(ERROR))) if n]
        return f"{self.accuracy:.0%} right" + (f" ({', '.join(parts)} counted apart)"
                                               if parts else "")
