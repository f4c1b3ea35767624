"""Eval runs in the session store: an eval run is a session, each case run its child.

The eval run's log reads like a delegation: a user message naming what is evaluated, then
per case run a ``DelegationEvent`` to the team (``ok`` when the case run passed, its result
as the ``output``, its conversation in the child session), and a ``RunFinishedEvent`` with
the run's settings. ``relayrace sessions show`` and the console open both as they are, and
`load_eval_run` reads the results back (for ``--baseline RUN_ID``).
"""

from __future__ import annotations

import json

from relayrace import Message, UserError
from relayrace.core.events import DelegationEvent, MessageEvent, RunFinishedEvent
from relayrace.core.usage import Usage
from relayrace.sessions import Session, SessionStore

from .results import CaseRun, EvalResult

__all__ = ["EVAL_AGENT", "begin_eval_run", "case_session", "finish_eval_run", "load_eval_run",
           "record_case_run"]

EVAL_AGENT = "eval"
"""The name the eval run's own events carry."""

_SETTINGS = ("team", "cases_file", "model", "repeat", "started", "seconds", "expected")


async def begin_eval_run(store: SessionStore, result: EvalResult, cases: int) -> Session:
    """The eval run's session, its first message saying what is evaluated."""
    session = store.session(result.run_id)
    what = (f"eval {result.team} on {result.cases_file or 'cases'}: {cases} case(s) x "
            f"{result.repeat}" + (f", model {result.model}" if result.model else ""))
    await session.append([MessageEvent(agent=EVAL_AGENT, path=EVAL_AGENT,
                                       message=Message("user", what))])
    return session


def case_session(eval_session: Session, case_id: str, repeat: int) -> Session:
    """A new session, the eval run's child, for one case run's conversation."""
    return eval_session.child(path=f"{EVAL_AGENT}/{case_id}", tool_call_id=f"{case_id}#{repeat}",
                              key=f"{case_id}#{repeat}")


async def record_case_run(eval_session: Session, run: CaseRun, team: str) -> None:
    """Append one finished case run to the eval run's log."""
    failure = run.first_failure()
    error = run.error or (f"{failure.name}: {failure.detail}" if failure else "")
    m = run.metrics
    await eval_session.append([DelegationEvent(
        agent=EVAL_AGENT, path=EVAL_AGENT, child_agent=team, child_session_id=run.session_id,
        tool_call_id=f"{run.case_id}#{run.repeat}", ok=run.passed, error=error or None,
        usage=Usage(m.requests, m.input_tokens, m.output_tokens, m.tool_calls),
        output=run.to_dict())])


async def finish_eval_run(eval_session: Session, result: EvalResult) -> None:
    """Close the eval run's log with its settings and pass rate."""
    settings = {k: getattr(result, k) for k in _SETTINGS} | {
        "pass_rate": result.pass_rate, "order": [c.case_id for c in result.cases]}
    await eval_session.append([RunFinishedEvent(agent=EVAL_AGENT, path=EVAL_AGENT,
                                                output=json.dumps(settings))])


async def load_eval_run(store: SessionStore, run_id: str) -> EvalResult:
    """The eval run ``run_id`` as stored (`UserError` if the store holds no such run)."""
    if not await store.exists(run_id):
        raise UserError(f"No eval run {run_id!r} in {store.url}; the run id is printed by "
                        "`relayrace eval run`, or give a results file (--json) instead.")
    events = await store.session(run_id).get_events()
    runs = [CaseRun.from_dict(e.output) for e in events
            if isinstance(e, DelegationEvent) and e.agent == EVAL_AGENT
            and isinstance(e.output, dict)]
    finished = next((e for e in reversed(events) if isinstance(e, RunFinishedEvent)
                     and e.agent == EVAL_AGENT), None)
    if not runs and finished is None:
        raise UserError(f"Session {run_id!r} is not an eval run (it holds no case runs).")
    settings = json.loads(finished.output) if finished is not None else {}
    # Logged as they finished; read back in the cases' order (unknown for an unfinished run).
    order = {case_id: i for i, case_id in enumerate(settings.get("order", []))}
    runs.sort(key=lambda r: (order.get(r.case_id, len(order)), r.repeat))
    return EvalResult(run_id=run_id, runs=runs, team=settings.get("team", ""),
                      **{k: settings[k] for k in _SETTINGS[1:] if k in settings})
