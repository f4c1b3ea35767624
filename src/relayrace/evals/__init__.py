"""Evaluate a team: cases as data, matchers on what happened, eval runs, replay.
Layer: an entry point. Runs teams through the runner; may import it, config and
everything below.


A case says what to tell a team and what should happen: the handoff path, the tool calls
(in ``agentevals``' strict / unordered / subset / superset modes), delegations and their
reports, the final answer and who gave it, limits, and a rubric for a judge model.

.. code-block:: python

    from relayrace.evals import load_cases, run_eval

    cases = load_cases("examples/support/evals.yaml")
    result = await run_eval(triage, cases, repeat=3)
    print(result.pass_rate)

``relayrace eval run TEAM CASES`` is the command line over the same; ``relayrace.evals.pytest``
runs cases in a project's own tests.
"""

from .cases import (
    ArgsMode,
    Case,
    Expect,
    ExpectCall,
    ExpectDelegation,
    ExpectFinal,
    ExpectLimits,
    ExpectPath,
    ExpectTools,
    Match,
    PathMode,
    Rubric,
    ToolsMode,
    case_schema,
)
from .judge import JudgeError, Verdict
from .loading import CaseFileError, load_cases, parse_case
from .matchers import match_delegations, match_final, match_limits, match_path, match_tools
from .results import CaseRun, CaseSummary, Check, Distribution, EvalResult, Metrics
from .runner import ModelChoice, Prices, run_case, run_eval
from .storage import load_eval_run
from .trajectory import CallMade, Trajectory, read_trajectory

__all__ = [
    "ArgsMode",
    "CallMade",
    "Case",
    "CaseFileError",
    "CaseRun",
    "CaseSummary",
    "Check",
    "Distribution",
    "EvalResult",
    "Expect",
    "ExpectCall",
    "ExpectDelegation",
    "ExpectFinal",
    "ExpectLimits",
    "ExpectPath",
    "ExpectTools",
    "JudgeError",
    "Match",
    "Metrics",
    "ModelChoice",
    "PathMode",
    "Prices",
    "Rubric",
    "ToolsMode",
    "Trajectory",
    "Verdict",
    "case_schema",
    "load_cases",
    "load_eval_run",
    "match_delegations",
    "match_final",
    "match_limits",
    "match_path",
    "match_tools",
    "parse_case",
    "read_trajectory",
    "run_case",
    "run_eval",
]
