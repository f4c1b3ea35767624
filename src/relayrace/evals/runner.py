"""Running cases: each case run is an ordinary conversation with the team, in a session of
its own; then every expectation of the case is checked against what happened.

A case run that raises, stops for a person or whose judge fails is an ``error`` of that
case run; the eval run goes on.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from relayrace import Agent, Model, Runner, UserError
from relayrace.core.events import AgentEvent
from relayrace.core.usage import Usage
from relayrace.sessions import Session, SessionStore

from .cases import Case
from .judge import JudgeError, judge
from .matchers import match_delegations, match_final, match_limits, match_path, match_tools
from .results import CaseRun, Check, EvalResult, Metrics
from .storage import begin_eval_run, case_session, finish_eval_run, record_case_run
from .trajectory import Trajectory, handoff_tools, read_trajectory

__all__ = ["ModelChoice", "Prices", "run_case", "run_eval"]

ModelChoice: TypeAlias = "Model | str | Callable[[Case], Model | str] | None"
"""The model for a case run: one model (or ``provider:model``) for every run, a function
that makes one per case run (e.g. a scripted model playing that case), or ``None`` for the
team's own models."""

Prices: TypeAlias = Mapping[str, tuple[float, float]]
"""USD per million input and output tokens, by model name (``*``: any other model)."""


class _Stopped(Exception):
    """A case run's conversation stopped for a person, which no eval case can be."""


@dataclass(slots=True, frozen=True)
class _Settings:
    """What every case run of an eval run shares."""

    team: Agent[Any]
    model: ModelChoice
    judge: Model | str | None
    judge_timeout: float
    timeout: float | None
    prices: Prices
    handoffs: frozenset[str]


def _model_for(choice: ModelChoice, case: Case) -> Model | str | None:
    if choice is None or isinstance(choice, Model | str):
        return choice
    return choice(case)


def _cost(trajectory: Trajectory, total: Usage, prices: Prices) -> float | None:
    """USD, when every model used has a price (children at ``*``, or the only model's)."""
    if not prices:
        return None
    cost, priced = 0.0, Usage()
    for name, usage in trajectory.models.items():
        price = prices.get(name) or prices.get("*")
        if price is None:
            return None
        cost += (usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1e6
        priced.add_tokens(usage)
    rest_in = total.input_tokens - priced.input_tokens
    rest_out = total.output_tokens - priced.output_tokens
    if rest_in or rest_out:  # delegated children's tokens
        only = next(iter(trajectory.models)) if len(trajectory.models) == 1 else None
        price = prices.get("*") or (prices.get(only) if only else None)
        if price is None:
            return None
        cost += (rest_in * price[0] + rest_out * price[1]) / 1e6
    return cost


async def _converse(settings: _Settings, case: Case, session: Session | None,
                    ) -> tuple[Trajectory, Metrics, str]:
    """Have the case's conversation; the trajectory, what it used, and its session."""
    model = _model_for(settings.model, case)
    events: list[AgentEvent] = []
    total, handoffs, output = Usage(), 0, None
    started = time.perf_counter()
    for i, said in enumerate(case.messages):
        result = await Runner.run(settings.team, said, session=session, context=case.context,
                                  model=model, start_agent=case.start_agent if i == 0 else None)
        session = result.session
        events.extend(result.new_events)
        total.add(result.usage.total)
        handoffs += len(result.handoffs)
        output = result.final_output
        if result.pending is not None:
            raise _Stopped(f"the run stopped for a person after message {i + 1} (an "
                           "approval or a question); an eval case cannot answer it")
    seconds = time.perf_counter() - started
    trajectory = read_trajectory(events, handoffs=settings.handoffs, final_output=output,
                                 steps=False)
    metrics = Metrics(total.requests, total.input_tokens, total.output_tokens, total.tool_calls,
                      handoffs, seconds, _cost(trajectory, total, settings.prices))
    assert session is not None
    return trajectory, metrics, session.session_id


async def _check(settings: _Settings, case: Case, trajectory: Trajectory, metrics: Metrics,
                 ) -> tuple[list[Check], int | None]:
    expect = case.expect
    checks: list[Check] = []
    path = expect.path_spec()
    if path is not None:
        checks.append(match_path(trajectory.path, path))
    if expect.tools is not None:
        checks.append(match_tools(trajectory.turns, expect.tools))
    if expect.delegations:
        checks.append(match_delegations(trajectory.delegations, expect.delegations))
    if expect.final is not None:
        checks.append(match_final(trajectory.final, trajectory.last_agent, expect.final))
    if expect.limits is not None:
        checks.append(match_limits(metrics, expect.limits))
    rubric, score = expect.rubric_spec(), None
    if rubric is not None:
        model = rubric.judge or settings.judge
        if model is None:
            raise JudgeError("the case has a rubric but no judge model: give --judge "
                             "provider:model (or the rubric's judge)")
        verdict = await judge(model, rubric, case.messages, trajectory.final,
                              seconds=settings.judge_timeout)
        score = verdict.score
        checks.append(Check("rubric", verdict.score >= rubric.min_score,
                            f"score {verdict.score}/5 (min {rubric.min_score}): "
                            f"{verdict.reasons}"))
    return checks, score


async def _run_one(settings: _Settings, case: Case, repeat: int,
                   session: Session | None) -> CaseRun:
    run = CaseRun(case.id, repeat, "error", expected_agent=case.expect.expected_agent(),
                  session_id=session.session_id if session is not None else "")
    try:
        conversation = _converse(settings, case, session)
        if settings.timeout is not None:
            trajectory, run.metrics, run.session_id = await asyncio.wait_for(
                conversation, settings.timeout)
        else:
            trajectory, run.metrics, run.session_id = await conversation
    except TimeoutError:
        run.error = f"the conversation took longer than {settings.timeout:g} s"
        return run
    except _Stopped as exc:
        run.error = str(exc)
        return run
    except Exception as exc:  # the team's failure is this case run's result
        run.error = f"{type(exc).__name__}: {exc}"
        return run
    run.path, run.last_agent = trajectory.path, trajectory.last_agent
    try:
        run.checks, run.score = await _check(settings, case, trajectory, run.metrics)
    except JudgeError as exc:
        run.error = str(exc)
        return run
    run.status = "passed" if all(c.passed for c in run.checks) else "failed"
    return run


def _settings(team: Agent[Any], model: ModelChoice, judge: Model | str | None,
              judge_timeout: float, timeout: float | None, prices: Prices | None) -> _Settings:
    return _Settings(team, model, judge, judge_timeout, timeout, prices or {},
                     handoff_tools(team))


async def run_case(team: Agent[Any], case: Case, *, model: ModelChoice = None,
                   judge: Model | str | None = None, judge_timeout: float = 60.0,
                   run_timeout: float | None = None, session: Session | None = None,
                   prices: Prices | None = None, repeat: int = 0) -> CaseRun:
    """Run ``case`` once on ``team`` and check it (in ``session``, else a new memory one).

    ``run_timeout`` bounds the conversation's seconds, ``judge_timeout`` the judge's."""
    settings = _settings(team, model, judge, judge_timeout, run_timeout, prices)
    return await _run_one(settings, case, repeat, session)


async def run_eval(team: Agent[Any], cases: Sequence[Case], *, repeat: int = 1,
                   concurrency: int = 4, model: ModelChoice = None,
                   judge: Model | str | None = None, judge_timeout: float = 60.0,
                   run_timeout: float | None = None, store: SessionStore | None = None,
                   prices: Prices | None = None, label: str = "", cases_file: str = "",
                   on_run: Callable[[CaseRun], None] | None = None) -> EvalResult:
    """Run every case ``repeat`` times, up to ``concurrency`` at once.

    With a ``store``, the eval run is a session there (its id is the result's ``run_id``)
    and each case run a child session of it; ``on_run`` hears of each case run as it ends.
    ``label`` names the team in the results (default: its entry agent).
    """
    if repeat < 1 or concurrency < 1:
        raise UserError(f"run_eval's repeat and concurrency are at least 1; got repeat={repeat}, "
                        f"concurrency={concurrency}.")
    settings = _settings(team, model, judge, judge_timeout, run_timeout, prices)
    shown_model = model if isinstance(model, str) else "" if model is None else \
        getattr(model, "name", "") or getattr(model, "__name__", "custom")
    result = EvalResult(run_id=f"eval-{secrets.token_hex(6)}", team=label or team.name,
                        cases_file=cases_file, model=shown_model, repeat=repeat,
                        started=time.time())
    parent = await begin_eval_run(store, result, len(cases)) if store is not None else None
    gate = asyncio.Semaphore(concurrency)
    started = time.perf_counter()

    async def one(case: Case, i: int) -> CaseRun:
        async with gate:
            session = case_session(parent, case.id, i) if parent is not None else None
            run = await _run_one(settings, case, i, session)
            if parent is not None:
                await record_case_run(parent, run, team.name)
            if on_run is not None:
                on_run(run)
            return run

    result.runs = list(await asyncio.gather(*(one(c, i) for c in cases for i in range(repeat))))
    result.seconds = time.perf_counter() - started
    if parent is not None:
        await finish_eval_run(parent, result)
    return result
