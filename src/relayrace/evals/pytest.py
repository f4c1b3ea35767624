"""Eval cases in a project's own pytest suite, with the same matchers and messages.

.. code-block:: python

    from relayrace.evals.pytest import assert_case, parametrize_cases

    @parametrize_cases("evals.yaml")
    def test_support(case):
        assert_case(triage, case, model=scripted(case))

Needs pytest (imported here only).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from relayrace import Agent, Model

from .cases import Case
from .loading import load_cases
from .results import CaseRun
from .runner import ModelChoice, run_case

__all__ = ["assert_case", "assert_case_async", "describe_run", "parametrize_cases"]

F = TypeVar("F", bound=Callable[..., Any])


def describe_run(case: Case, run: CaseRun) -> str:
    """A case run's outcome as the failure message of a test: every failed check, in full."""
    lines = [f"eval case {case.label}: {run.status}"
             + (f" (session {run.session_id})" if run.session_id else "")]
    if run.error:
        lines.append(f"  error: {run.error}")
    for check in run.checks:
        if not check.passed:
            lines.append(f"  {check.name}:")
            lines.extend(f"    {line}" for line in check.detail.splitlines())
    lines.append(f"  path: {' → '.join(run.path) or '(none)'}")
    return "\n".join(lines)


async def assert_case_async(team: Agent[Any], case: Case, *, model: ModelChoice = None,
                            judge: Model | str | None = None, **options: Any) -> CaseRun:
    """Run ``case`` on ``team`` and fail the test (``AssertionError``) unless it passes;
    takes `run_case`'s options."""
    run = await run_case(team, case, model=model, judge=judge, **options)
    if not run.passed:
        raise AssertionError(describe_run(case, run))
    return run


def assert_case(team: Agent[Any], case: Case, *, model: ModelChoice = None,
                judge: Model | str | None = None, **options: Any) -> CaseRun:
    """`assert_case_async` for a test without an event loop."""
    return asyncio.run(assert_case_async(team, case, model=model, judge=judge, **options))


def parametrize_cases(path: str | Path, *, argname: str = "case") -> Callable[[F], F]:
    """``pytest.mark.parametrize`` over the cases of a case file, one test per case id."""
    cases = load_cases(path)
    mark: Callable[[F], F] = pytest.mark.parametrize(argname, cases, ids=[c.id for c in cases])
    return mark
