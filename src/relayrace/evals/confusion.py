"""The routing confusion matrix: which agent each case should have ended with, against the
agent that answered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .results import CaseRun

__all__ = ["NO_ANSWER", "ConfusionMatrix"]

NO_ANSWER = "(none)"
"""The column of case runs that ended without an answer (an error)."""


@dataclass(slots=True)
class ConfusionMatrix:
    """Counts of case runs by expected agent (rows) and the agent reached (columns)."""

    expected: list[str] = field(default_factory=list)
    """The row labels."""
    reached: list[str] = field(default_factory=list)
    """The column labels."""
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    """(expected, reached) -> case runs."""

    @classmethod
    def of(cls, runs: Sequence[CaseRun]) -> ConfusionMatrix:
        """The matrix of the runs whose case names an expected agent."""
        matrix = cls()
        for run in runs:
            if run.expected_agent is None:
                continue
            got = run.last_agent or NO_ANSWER
            key = (run.expected_agent, got)
            matrix.counts[key] = matrix.counts.get(key, 0) + 1
        labels = sorted({a for pair in matrix.counts for a in pair} - {NO_ANSWER})
        matrix.expected = [a for a in labels if any(k[0] == a for k in matrix.counts)]
        matrix.reached = labels + ([NO_ANSWER] if any(k[1] == NO_ANSWER for k in matrix.counts)
                                   else [])
        return matrix

    def count(self, expected: str, reached: str) -> int:
        """Case runs that should have ended with ``expected`` and ended with ``reached``."""
        return self.counts.get((expected, reached), 0)

    def row_total(self, expected: str) -> int:
        """Case runs that should have ended with ``expected``."""
        return sum(n for (e, _), n in self.counts.items() if e == expected)

    @property
    def accuracy(self) -> float:
        """The share of case runs that ended where they should have."""
        total = sum(self.counts.values())
        right = sum(n for (e, r), n in self.counts.items() if e == r)
        return right / total if total else 0.0
