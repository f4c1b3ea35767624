"""Running cases: each case run is an ordinary conversation with the team, in a session of
its own; a stop for a person is resumed with the case's decisions; then every expectation of
the case is checked against what happened.

A case run that raises, takes longer than its timeout, or whose judge fails is an ``error``
of that case run; the eval run goes on. A case run that stops early (for a person the case
has no decision for, on a limit, on an error) keeps what it did so far: its path, tool
calls, usage and cost.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from relayrace import Agent, Model, Runner, UserError
from relayrace.core.events import AgentEvent, HandoffEvent, ToolResultEvent
from relayrace.core.usage import Usage
from relayrace.sessions import MemorySession, Session, SessionStore

from .cases import EXPECT_ADAPTER, Case
from .decisions import CaseDecisions, Stop, check_decisions
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


@dataclass(slots=True)
class _Talk:
    """A case run's conversation so far: kept when it stops early, so that a partial run
    counts for what it did."""

    session: Session
    decisions: CaseDecisions
    usage: Usage = field(default_factory=Usage)
    """What the runs that returned used (a run cut short: its log says)."""
    events: list[AgentEvent] = field(default_factory=list)
    """The events of the runs that returned (a run cut short: the session's log has them)."""
    output: Any = None
    finished: bool = False
    """Whether every message was answered (or the run stopped where the case expects)."""
    stop: Stop | None = None
    """Where the run waits for a person that the case gives no decision for."""
    read: bool = False
    """Whether the case run took what the conversation did (``_keep``)."""


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


async def _converse(settings: _Settings, case: Case, talk: _Talk) -> None:
    """Have the case's conversation in ``talk``'s session, resuming each stop for a person
    with the case's decisions (``Runner.resume``, as the command line and the server do)."""
    model = _model_for(settings.model, case)
    for i, said in enumerate(case.messages):
        result = await Runner.run(settings.team, said, session=talk.session,
                                  context=case.context, model=model,
                                  start_agent=case.start_agent if i == 0 else None)
        talk.usage.add(result.usage.total)
        talk.events.extend(result.new_events)
        while result.pending is not None:
            given = talk.decisions.for_stop(result.pending)
            if isinstance(given, Stop):
                talk.stop = given
                return
            approvals, answers = given
            result = await Runner.resume(result.pending, approvals=approvals, answers=answers)
            talk.usage.add(result.usage.total)
            talk.events.extend(result.new_events)
        talk.output = result.final_output
    talk.finished = True


async def _what_happened(settings: _Settings, talk: _Talk, seconds: float,
                         ) -> tuple[Trajectory, Metrics]:
    """The trajectory and metrics of the conversation: whole, from its runs' events, or as
    far as it went, from its session's log."""
    whole = talk.finished or talk.stop is not None
    events = talk.events if whole else await talk.session.get_events()
    trajectory = read_trajectory(events, handoffs=settings.handoffs,
                                 final_output=talk.output if talk.finished else None)
    # A run that returned counts as its result says; one cut short, as its log does.
    total = talk.usage if whole else trajectory.usage
    handoffs = sum(type(e) is HandoffEvent for e in events)
    tool_calls = total.tool_calls or sum(
        type(e) is ToolResultEvent and e.tool_name not in settings.handoffs
        for e in events)
    metrics = Metrics(total.requests, total.input_tokens, total.output_tokens, tool_calls,
                      handoffs, seconds, _cost(trajectory, total, settings.prices))
    return trajectory, metrics


def _pending_check(case: Case, stop: Stop | None) -> Check | None:
    """Whether the run stopped for a person where the case says it should (or did not stop)."""
    want = case.expect.pending
    if stop is None:
        if want is None:
            return None
        return Check("pending", False, f"the run did not stop for a person; expected it to "
                                       f"wait on {', '.join(want)}")
    if want is None:
        return Check("pending", False, f"stopped for {stop.reason}; {stop.fix}")
    if sorted(stop.tools) != sorted(want):
        return Check("pending", False, f"stopped for {stop.reason}, waiting on "
                                       f"{', '.join(stop.tools)}; expected "
                                       f"{', '.join(want) or 'nothing'}")
    return Check("pending", True)


async def _check(settings: _Settings, case: Case, trajectory: Trajectory, metrics: Metrics,
                 stop: Stop | None) -> tuple[list[Check], int | None]:
    expect = case.expect
    checks: list[Check] = []
    pending = _pending_check(case, stop)
    if pending is not None:
        checks.append(pending)
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


def _keep(run: CaseRun, trajectory: Trajectory, metrics: Metrics, talk: _Talk) -> None:
    """What the conversation did, on the case run: also for one that stopped or failed."""
    run.path, run.last_agent, run.metrics = trajectory.path, trajectory.last_agent, metrics
    run.steps = trajectory.steps
    run.calls = [[str(c) for c in turn] for turn in trajectory.turns]
    run.answer = _shown(trajectory.final) if talk.finished else ""
    run.decisions = list(talk.decisions.made)
    if talk.stop is not None:
        run.stopped, run.pending = talk.stop.reason, list(talk.stop.tools)
    talk.read = True


def _shown(value: Any, limit: int = 2000) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


async def _run_one(settings: _Settings, case: Case, repeat: int,
                   session: Session | None) -> CaseRun:
    talk = _Talk(session if session is not None else MemorySession(), CaseDecisions(case))
    run = CaseRun(case.id, repeat, "error", expected_agent=case.expect.expected_agent(),
                  session_id=talk.session.session_id)
    started = time.perf_counter()

    async def whole() -> None:
        await _converse(settings, case, talk)
        trajectory, metrics = await _what_happened(settings, talk,
                                                   time.perf_counter() - started)
        _keep(run, trajectory, metrics, talk)
        run.checks, run.score = await _check(settings, case, trajectory, metrics, talk.stop)
        run.status = "passed" if all(c.passed for c in run.checks) else "failed"

    try:
        if settings.timeout is not None:
            await asyncio.wait_for(whole(), settings.timeout)
        else:
            await whole()
        return run
    except TimeoutError:
        run.error = f"the case run took longer than {settings.timeout:g} s (--timeout)"
    except JudgeError as exc:
        run.error = str(exc)
    except Exception as exc:  # the team's failure is this case run's result
        run.error = f"{type(exc).__name__}: {exc}"
    run.status, run.checks, run.score = "error", [], None
    if not talk.read:  # cut short before its checks: what its log shows so far
        try:
            trajectory, metrics = await _what_happened(settings, talk,
                                                       time.perf_counter() - started)
        except Exception as exc:  # a store that cannot be read: the error says so
            run.error += f" (and its log could not be read: {type(exc).__name__}: {exc})"
            return run
        _keep(run, trajectory, metrics, talk)
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

    ``run_timeout`` bounds the case run's seconds (conversation and checks), ``judge_timeout``
    the judge's. A tool in ``approvals:`` the team lacks raises `CaseFileError`."""
    check_decisions(team, [case])
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
    check_decisions(team, cases)  # a mistake in a case is found before any case runs
    settings = _settings(team, model, judge, judge_timeout, run_timeout, prices)
    shown_model = model if isinstance(model, str) else "" if model is None else \
        getattr(model, "name", "") or getattr(model, "__name__", "custom")
    result = EvalResult(run_id=f"eval-{secrets.token_hex(6)}", team=label or team.name,
                        cases_file=cases_file, model=shown_model, repeat=repeat,
                        started=time.time(),
                        expected={c.id: EXPECT_ADAPTER.dump_python(
                            c.expect, mode="json", exclude_defaults=True) for c in cases})
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
