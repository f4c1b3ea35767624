"""The results of an eval run: per check, per case run, per case, and the whole run, as data
that round-trips through JSON (``--json``, the session store, a baseline)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "CaseRun",
    "CaseSummary",
    "Check",
    "Distribution",
    "EvalResult",
    "Metrics",
    "Status",
]

Status = Literal["passed", "failed", "error"]
"""A case run passed every check, failed one, or could not be judged (the team raised, the
judge failed)."""


@dataclass(slots=True)
class Check:
    """One expectation, checked."""

    name: str
    """What was checked: ``path``, ``tools``, ``delegations``, ``final``, ``limits``,
    ``rubric``."""
    passed: bool
    """Whether it held."""
    detail: str = ""
    """Why not (for a path, the first divergence as a diff); for a rubric, the reasons."""


@dataclass(slots=True)
class Metrics:
    """What one case run used."""

    requests: int = 0
    """Model requests, children included."""
    input_tokens: int = 0
    """Input tokens, children included."""
    output_tokens: int = 0
    """Output tokens, children included."""
    tool_calls: int = 0
    """Tool calls executed."""
    handoffs: int = 0
    """Handoffs."""
    seconds: float = 0.0
    """Wall-clock time of the conversation (not the judge's)."""
    cost: float | None = None
    """What it cost, when prices were given for every model it used."""

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(slots=True)
class CaseRun:
    """One run of one case."""

    case_id: str
    """The case."""
    repeat: int
    """Which repetition (from 0)."""
    status: Status
    """passed, failed or error."""
    checks: list[Check] = field(default_factory=list)
    """Each expectation, checked."""
    error: str = ""
    """For an error: what went wrong."""
    session_id: str = ""
    """The session holding the conversation (``relayrace sessions show``)."""
    path: list[str] = field(default_factory=list)
    """The agents that held the conversation."""
    last_agent: str = ""
    """The agent that answered."""
    expected_agent: str | None = None
    """The agent the case should end with, if it says."""
    metrics: Metrics = field(default_factory=Metrics)
    """What it used."""
    score: int | None = None
    """The judge's score (1-5), for a case with a rubric."""
    steps: list[str] = field(default_factory=list)
    """The trajectory as lines, in order: each agent taking over, each tool call and
    delegation, and who answered (as far as the run went)."""
    calls: list[list[str]] = field(default_factory=list)
    """The tool calls, per model turn that made any, as ``name({args})``."""
    answer: str = ""
    """The final answer (a typed agent's: its JSON), cut at 2,000 characters."""
    decisions: list[str] = field(default_factory=list)
    """The case's decisions given to the run, in order: ``approve issue_refund (call_1)``."""
    stopped: str = ""
    """What the run stopped for without a decision in the case (``""``: it did not)."""
    pending: list[str] = field(default_factory=list)
    """The tools it stopped on, waiting for a person."""

    @property
    def passed(self) -> bool:
        """Whether every check held."""
        return self.status == "passed"

    def first_failure(self) -> Check | None:
        """The first check that failed."""
        return next((c for c in self.checks if not c.passed), None)

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseRun:
        """Back from `to_dict`'s data."""
        data = dict(data)
        data["checks"] = [Check(**c) for c in data.get("checks", [])]
        data["metrics"] = Metrics(**data.get("metrics", {}))
        return cls(**data)


@dataclass(slots=True, frozen=True)
class Distribution:
    """A few figures of a sample: count, mean, median, 90th percentile, min and max."""

    count: int
    """How many values."""
    mean: float
    """Their mean."""
    p50: float
    """Their median."""
    p90: float
    """The value 90% of them are at or below (nearest rank)."""
    min: float
    """The smallest."""
    max: float
    """The largest."""

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution | None:
        """The figures of ``values`` (``None`` when empty)."""
        if not values:
            return None
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
        return cls(len(ordered), statistics.fmean(ordered), statistics.median(ordered), p90,
                   ordered[0], ordered[-1])


@dataclass(slots=True)
class CaseSummary:
    """A case over its repetitions."""

    case_id: str
    """The case."""
    runs: list[CaseRun]
    """Its runs, in repetition order."""

    @property
    def pass_rate(self) -> float:
        """The share of runs that passed."""
        return sum(r.passed for r in self.runs) / len(self.runs) if self.runs else 0.0

    @property
    def errors(self) -> int:
        """Runs that ended in an error."""
        return sum(r.status == "error" for r in self.runs)

    @property
    def usual_path(self) -> list[str]:
        """The path most runs took."""
        counts = Counter(tuple(r.path) for r in self.runs)
        return list(counts.most_common(1)[0][0]) if counts else []

    def mean(self, metric: str) -> float:
        """The mean of a metric (``tokens``, ``seconds``, ``requests``...) over the runs that
        did not end in an error (0 if every one did)."""
        values = [float(getattr(r.metrics, metric)) for r in self.runs if r.status != "error"]
        return statistics.fmean(values) if values else 0.0

    def first_failed(self) -> CaseRun | None:
        """The first run that did not pass."""
        return next((r for r in self.runs if not r.passed), None)

    def failed(self) -> list[CaseRun]:
        """Every run that did not pass, in repetition order."""
        return [r for r in self.runs if not r.passed]


@dataclass(slots=True)
class EvalResult:
    """An eval run: where it ran, and every case run."""

    run_id: str
    """Its id: the session holding it in the store."""
    team: str
    """The team evaluated (as named on the command line, or its entry agent)."""
    cases_file: str = ""
    """Where the cases came from."""
    model: str = ""
    """The model override, if any."""
    repeat: int = 1
    """Runs per case."""
    started: float = 0.0
    """When it started (seconds since the epoch)."""
    seconds: float = 0.0
    """How long it took."""
    runs: list[CaseRun] = field(default_factory=list)
    """Every case run, in case order then repetition."""
    expected: dict[str, Any] = field(default_factory=dict)
    """Each case's expectations (its ``expect`` as JSON data), by case id: what the report
    shows each run against."""

    @property
    def cases(self) -> list[CaseSummary]:
        """Per case, in the order the cases came."""
        by_case: dict[str, list[CaseRun]] = {}
        for run in self.runs:
            by_case.setdefault(run.case_id, []).append(run)
        return [CaseSummary(k, sorted(v, key=lambda r: r.repeat)) for k, v in by_case.items()]

    @property
    def pass_rate(self) -> float:
        """The share of all case runs that passed."""
        return sum(r.passed for r in self.runs) / len(self.runs) if self.runs else 0.0

    def distribution(self, metric: str) -> Distribution | None:
        """The figures of a metric (``tokens``, ``seconds``, ``cost``...) over the case runs;
        runs that ended in an error, and runs without the figure (a cost without prices), are
        left out of every metric alike."""
        values = [getattr(r.metrics, metric) for r in self.runs if r.status != "error"]
        return Distribution.of([float(v) for v in values if v is not None])

    def to_dict(self) -> dict[str, Any]:
        """As JSON data, with the per-case summary and distributions for readers."""
        data = {k: getattr(self, k) for k in ("run_id", "team", "cases_file", "model",
                                              "repeat", "started", "seconds")}
        data["pass_rate"] = self.pass_rate
        data["summary"] = [{"case_id": c.case_id, "pass_rate": c.pass_rate,
                            "errors": c.errors, "path": c.usual_path,
                            "mean_tokens": c.mean("tokens"),
                            "mean_seconds": c.mean("seconds")} for c in self.cases]
        data["distributions"] = {m: (asdict(d) if (d := self.distribution(m)) else None)
                                 for m in ("tokens", "seconds", "requests", "cost")}
        data["runs"] = [r.to_dict() for r in self.runs]
        data["expected"] = self.expected
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        """Back from `to_dict`'s data (the derived parts are computed again)."""
        keys = ("run_id", "team", "cases_file", "model", "repeat", "started", "seconds")
        return cls(**{k: data[k] for k in keys if k in data},
                   runs=[CaseRun.from_dict(r) for r in data.get("runs", [])],
                   expected=data.get("expected", {}))
