"""Comparing an eval run with a baseline run, case by case: pass rate, path, tokens,
latency. This is how a prompt change or a model swap is judged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .results import CaseSummary, EvalResult

__all__ = ["CaseDelta", "compare"]

Verdict = Literal["better", "worse", "same", "new", "gone"]


@dataclass(slots=True, frozen=True)
class CaseDelta:
    """One case in both runs."""

    case_id: str
    """The case."""
    verdict: Verdict
    """Its pass rate went up (``better``), down (``worse``) or not; or it is in one run only."""
    pass_rate: tuple[float | None, float | None]
    """Baseline, current."""
    path: tuple[list[str], list[str]]
    """The usual path, baseline and current."""
    tokens: tuple[float | None, float | None]
    """Mean tokens per run, baseline and current."""
    seconds: tuple[float | None, float | None]
    """Mean seconds per run, baseline and current."""

    @property
    def path_changed(self) -> bool:
        """Whether the usual path differs."""
        return bool(self.path[0] and self.path[1] and self.path[0] != self.path[1])


def _figures(c: CaseSummary | None) -> tuple[float | None, list[str], float | None,
                                            float | None]:
    if c is None:
        return None, [], None, None
    return c.pass_rate, c.usual_path, c.mean("tokens"), c.mean("seconds")


def compare(baseline: EvalResult, current: EvalResult) -> list[CaseDelta]:
    """Per case (current run's order, then cases only the baseline has), what changed."""
    before = {c.case_id: c for c in baseline.cases}
    after = {c.case_id: c for c in current.cases}
    ids = list(after) + [k for k in before if k not in after]
    deltas = []
    for case_id in ids:
        rate0, path0, tokens0, seconds0 = _figures(before.get(case_id))
        rate1, path1, tokens1, seconds1 = _figures(after.get(case_id))
        verdict: Verdict
        if rate0 is None:
            verdict = "new"
        elif rate1 is None:
            verdict = "gone"
        else:
            verdict = "better" if rate1 > rate0 else "worse" if rate1 < rate0 else "same"
        deltas.append(CaseDelta(case_id, verdict, (rate0, rate1), (path0, path1),
                                (tokens0, tokens1), (seconds0, seconds1)))
    return deltas
