"""``relayrace worker`` and ``relayrace submit``: durable runs on DBOS (``relayrace.durable``)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from ._common import EXIT_APPROVAL, MODEL_HELP, errors, fail, parse_answers, parse_context
from ._run import handoff_tools
from ._target import resolve_model, resolve_target

if TYPE_CHECKING:  # imported when used: DBOS is an extra
    from ..durable.runs import DurableRunner
    from ._render import EventPrinter

__all__ = ["submit", "worker"]

_DB_HELP = ("The database: a SQLite file (default: .relayrace/sessions.db, DBOS's records "
            "beside it) or postgresql://USER@HOST/DB, shared by every worker.")
_QUEUE_HELP = "The DBOS queue (default: relayrace-<agent name>); submitters use the same."


def worker(
    target: Annotated[str, typer.Argument(
        help="The team: path/to/team.py:variable, or a YAML team (one entry point needs no "
        "variable nor --agent).")],
    agent_name: Annotated[str | None, typer.Option(
        "--agent", "-a", help="The agent to run, by name (when the team has several entry "
        "points).")] = None,
    db: Annotated[str | None, typer.Option("--db", envvar="RELAYRACE_DB", help=_DB_HELP)] = None,
    queue: Annotated[str | None, typer.Option("--queue", help=_QUEUE_HELP)] = None,
    concurrency: Annotated[int, typer.Option(
        "--concurrency", min=1, help="Runs this worker runs at a time.")] = 8,
    queue_concurrency: Annotated[int | None, typer.Option(
        "--queue-concurrency", min=1, help="Runs of the whole queue at a time, across "
        "workers (default: no bound).")] = None,
    heartbeat: Annotated[float, typer.Option(
        "--heartbeat", min=0.05, help="Seconds between this worker's heartbeats.")] = 2.0,
    dead_after: Annotated[float, typer.Option(
        "--dead-after", help="Seconds of silence after which a worker is dead and a live one "
        "takes its runs over.")] = 15.0,
    drain: Annotated[float, typer.Option(
        "--drain", min=0, help="On SIGTERM or Ctrl-C, seconds to let running runs finish "
        "before handing the rest back to the queue.")] = 30.0,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help=MODEL_HELP)] = None,
    max_turns: Annotated[int | None, typer.Option(
        "--max-turns", min=1, help="Model turns allowed per run.")] = None,
    context: Annotated[list[str] | None, typer.Option(
        "--context", "-c", help="A context variable KEY=VALUE every run gets (repeatable).")
    ] = None,
    executor_id: Annotated[str | None, typer.Option(
        "--id", help="This worker's id (default: host-pid-random); a worker started again "
        "with the same id recovers its own runs at once.")] = None,
) -> None:
    """Work a team's durable runs from its queue until SIGTERM or Ctrl-C, then drain."""
    durable_runner = _durable_runner()

    with errors():
        agent = resolve_target(target, agent_name)
        runner = durable_runner(
            agent, db=db, queue=queue, worker_concurrency=concurrency,
            concurrency=queue_concurrency, heartbeat=heartbeat, dead_after=dead_after,
            executor_id=executor_id, model=resolve_model(model) if model else None,
            max_turns=max_turns, context=parse_context(context))
        asyncio.run(_work(runner, drain))


def _durable_runner() -> type[DurableRunner]:
    try:  # imported here: DBOS is an extra
        from ..durable.runs import DurableRunner
    except ImportError as exc:
        raise fail(f"Durable runs need DBOS: pip install 'relayrace[durable]' ({exc}).") \
            from None
    return DurableRunner


async def _work(runner: DurableRunner, drain: float) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # The runs it takes, and the dead workers' runs it takes over, as they happen.
    said = logging.StreamHandler(sys.stderr)
    said.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    log = logging.getLogger("relayrace.durable")
    log.addHandler(said)
    log.setLevel(logging.INFO)
    log.info("worker %s starts on queue %s (%d at a time), database %s", runner.executor_id,
             runner.queue, runner.worker_concurrency, runner.dbos_url)
    await runner.start()
    log.info("worker %s works queue %s", runner.executor_id, runner.queue)
    try:
        await stop.wait()
    finally:
        log.info("worker %s drains: up to %g s for its runs to finish, the rest back to the "
                 "queue", runner.executor_id, drain)
        await runner.stop(drain=drain)
        log.info("worker %s stopped", runner.executor_id)
        log.removeHandler(said)


def submit(
    target: Annotated[str, typer.Argument(
        help="The team: path/to/team.py:variable, or a YAML team (one entry point needs no "
        "variable nor --agent).")],
    prompt: Annotated[str | None, typer.Argument(
        help="The user message ('-' reads stdin); leave it out to resume with --approve, "
        "--reject or --answer.")] = None,
    agent_name: Annotated[str | None, typer.Option(
        "--agent", "-a", help="The agent to run, by name (when the team has several entry "
        "points).")] = None,
    session: Annotated[str | None, typer.Option(
        "--session", "-s", help="Run in (or resume) this session.")] = None,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", help="The run's id: submitting the same id again starts nothing.")] = None,
    approve: Annotated[list[str] | None, typer.Option(
        "--approve", help="A pending call id to approve (repeatable).")] = None,
    reject: Annotated[list[str] | None, typer.Option(
        "--reject", help="A pending call id to reject (repeatable).")] = None,
    answer: Annotated[list[str] | None, typer.Option(
        "--answer", help="ID=TEXT: the answer to a pending question (repeatable).")] = None,
    db: Annotated[str | None, typer.Option("--db", envvar="RELAYRACE_DB", help=_DB_HELP)] = None,
    queue: Annotated[str | None, typer.Option("--queue", help=_QUEUE_HELP)] = None,
    wait: Annotated[bool, typer.Option(
        "--wait/--no-wait", help="Wait for the run to end and print how it ended.")] = True,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", min=0, help="Seconds to wait at most.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON instead.")] = False,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Print the run's events as the workers log them: messages, "
        "tool calls, handoffs, the answer.")] = False,
) -> None:
    """Put a run on a team's queue for its workers (`relayrace worker`); with --approve,
    --reject or --answer, put on the run that goes on from where --session stopped."""
    from ._render import EventPrinter

    durable_runner = _durable_runner()

    if prompt == "-":
        prompt = sys.stdin.read()
    decisions = dict.fromkeys(approve or [], True) | dict.fromkeys(reject or [], False)
    answers = parse_answers(answer)
    resuming = bool(decisions or answers)
    if resuming and (prompt is not None or session is None):
        raise fail("To resume, give --session and the decisions, without a prompt.")
    if not resuming and not prompt:
        raise fail("Give the user message (or --session with --approve, --reject or "
                    "--answer to resume).")
    with errors():
        agent = resolve_target(target, agent_name)
        runner = durable_runner(agent, db=db, queue=queue, work=False)
        shown = EventPrinter(Console(highlight=False), handoff_tools=handoff_tools(agent)) \
            if follow and not json_output else None
        ended = asyncio.run(_submit(runner, prompt, session, run_id, decisions, answers,
                                    wait or follow, timeout, shown))
    if json_output:
        typer.echo(json.dumps(ended))
    else:
        _show(ended, answered=shown is None)  # a followed run's answer was printed with it
    status = ended.get("status")
    if status == "failed":
        raise typer.Exit(1)
    if status == "interrupted":
        raise typer.Exit(EXIT_APPROVAL)


async def _submit(runner: DurableRunner, prompt: str | None, session: str | None,
                  run_id: str | None, decisions: dict[str, bool], answers: dict[str, str],
                  wait: bool, limit: float | None,
                  shown: EventPrinter | None) -> dict[str, Any]:
    async with runner:
        if prompt is None:
            assert session is not None
            run = await runner.resume(session, approvals=decisions, answers=answers,
                                      run_id=run_id)
        else:
            run = await runner.submit(prompt, session_id=session, run_id=run_id)
        if not wait:
            return {"run_id": run.run_id, "session_id": run.session_id, "status": "queued"}
        Console(stderr=True, highlight=False).print(Text(
            f"queued run {run.run_id} in session {run.session_id}; waiting for a worker "
            f"(relayrace worker) to run it. Ctrl-C stops waiting; the run stays queued.",
            style="dim"), soft_wrap=True)
        if shown is not None:
            try:
                async with asyncio.timeout(limit):
                    async for event in runner.follow(run.run_id):
                        shown.print(event)
            finally:
                shown.close()
        result = await runner.result(run.run_id, wait=limit)
        ended: dict[str, Any] = {
            "run_id": result.run_id, "session_id": result.session_id, "status": result.status,
            "output": result.output, "last_agent": result.last_agent, "error": result.error}
        if result.pending is not None:
            ended["pending"] = json.loads(result.pending.to_json())
        return ended


def _show(ended: dict[str, Any], *, answered: bool = True) -> None:
    out = Console(highlight=False)
    where = f"run {ended['run_id']} · session {ended['session_id']}"
    status = ended["status"]
    if status == "queued":
        out.print(Text(f"queued {where}", style="dim"), soft_wrap=True)
    elif status == "completed":
        if answered:
            out.print(ended["output"], soft_wrap=True)
        out.print(Text.assemble(("✓ ", "bold green"), ("answered by ", "dim"),
                                (ended["last_agent"], "bold"), (f" · {where}", "dim")))
    elif status == "failed":
        out.print(Text(f"✗ {where} failed: {ended['error']}", style="bold red"), soft_wrap=True)
    else:
        pending = ended.get("pending") or {}
        out.print(Text(f"⏸ {where} waits for a person:", style="bold yellow"))
        for a in pending.get("approvals", []):
            out.print(Text(f"  {a['path']} {a['tool_name']}({a['arguments']}) "
                           f"[call {a['call_id']}]", style="yellow"), soft_wrap=True)
        for q in pending.get("questions", []):
            out.print(Text(f"  {q['path']} asks: {q['question']} [question {q['id']}]",
                           style="yellow"), soft_wrap=True)
        out.print(Text(f"Go on with: relayrace submit TARGET --session {ended['session_id']} "
                       "--approve ID (or --reject ID, --answer ID=TEXT)", style="dim"),
                  soft_wrap=True)
