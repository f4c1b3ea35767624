"""``relayrace run`` and ``relayrace resume``: a team run live on the terminal, its events
printed as they happen, then its trace tree and usage; a run that stops for a person (an
approval, a question) is asked on the terminal or exits with ``EXIT_APPROVAL``."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from .. import sessions
from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..core.events import AgentEvent, RunStartedEvent, dump_events
from ..core.exceptions import RelayraceError, UserError
from ..runner import Runner, RunResult
from ..sessions import new_session_id
from ..tracing import (
    InMemoryTraceProcessor,
    add_trace_processor,
    get_trace_processors,
    set_trace_processors,
)
from ._common import (
    DEFAULT_DB,
    EXIT_APPROVAL,
    AgentOption,
    ContextOption,
    DbOption,
    JsonOption,
    ModelOption,
    TargetArgument,
    err_console,
    errors,
    fail,
    known,
    out_console,
    parse_answers,
    parse_context,
    sync,
    unknown_session,
)
from ._render import EventPrinter, trace_tree, truncate, usage_table
from ._target import check_credentials, describe_models, resolve_model, resolve_target

if TYPE_CHECKING:
    from ..sessions import SessionStore

__all__ = ["handoff_tools", "print_pending", "print_run", "resume", "run"]


def _interactive() -> bool:
    """Whether a person is at the terminal to answer questions."""
    return sys.stdin.isatty()


def _ask(console: Console, pending: PendingRun, given: dict[str, str]) -> dict[str, str]:
    """Ask the person at the terminal each pending question not answered in ``given``."""
    answers = dict(given)
    for q in pending.questions:
        if q.id in answers:
            continue
        console.print(Text(f"? {q.path} asks: {q.question}", style="bold cyan"), soft_wrap=True)
        label = f"Your answer ({' / '.join(q.choices)})" if q.choices else "Your answer"
        reply: str = typer.prompt(label)
        while q.choices and reply not in q.choices:
            reply = typer.prompt(f"Choose one of: {', '.join(q.choices)}")
        answers[q.id] = reply
    return answers


def handoff_tools(agent: Agent[Any]) -> set[str]:
    """The tool names that are transfers anywhere in ``agent``'s team."""
    names: set[str] = set()
    for a in agent.root.walk():
        try:
            names.update(a.handoff_set().by_tool)
        except RelayraceError:
            pass  # the run reports a broken team itself
    return names


def _stream(
    agent: Agent[Any], prompt: str | None, options: dict[str, Any],
    on_event: Callable[[AgentEvent], None], store: SessionStore,
) -> RunResult:
    async def go() -> RunResult:
        try:
            stream = Runner.stream(agent, prompt, **options)
            async for event in stream:
                on_event(event)
            assert stream.result is not None
            return stream.result
        finally:
            await store.aclose()

    return asyncio.run(go())


async def print_run(agent: Agent[Any], input: str | None, *, console: Console | None = None,
                    trace: bool = True, **options: Any) -> RunResult:
    """Run like ``Runner.stream``, printing events live as the CLI does, then the trace tree
    and the usage table (with ``trace=True``). Takes ``Runner.run``'s options."""
    out = console or out_console()
    printer = EventPrinter(out, handoff_tools=handoff_tools(agent), live=True)
    processor = InMemoryTraceProcessor()
    previous = get_trace_processors()
    add_trace_processor(processor)
    try:
        stream = Runner.stream(agent, input, **options)
        async for event in stream:
            printer.print(event)
    finally:
        printer.close()
        set_trace_processors(previous)
    result = stream.result
    assert result is not None
    if result.pending:
        print_pending(out, result.pending)
    if trace:
        out.print()
        out.print(trace_tree(processor.tree(result.trace_id), result.trace_id))
        out.print(usage_table(result.usage))
    return result


def print_pending(console: Console, pending: PendingRun, resume: str | None = None) -> None:
    """Say what a stopped run waits for, and how to go on: the ``resume`` command line that
    starts with ``resume`` (without one, the ``Runner.resume`` call)."""
    if pending.approvals:
        console.print(Text("⏸ The run is waiting for approval:", style="bold yellow"))
    for item in pending.approvals:
        line = (f"  {item.path} {item.tool_name}({truncate(item.arguments)}) "
                f"[call {item.call_id}]")
        console.print(Text(line, style="yellow"), soft_wrap=True)
    if pending.questions:
        console.print(Text("⏸ The run is waiting for an answer:", style="bold yellow"))
    for q in pending.questions:
        choices = f" (one of: {', '.join(q.choices)})" if q.choices else ""
        console.print(Text(f"  {q.path} asks: {q.question}{choices} [question {q.id}]",
                           style="yellow"), soft_wrap=True)
    if pending.takeover is not None:
        console.print(Text(f"⏸ {pending.takeover.agent} (a person) holds the conversation: "
                           "they reply or hand it back with Runner.resume(pending, reply=..., "
                           "hand_back=...), the server's /api/sessions/{id}/pending or its "
                           "console.", style="bold yellow"), soft_wrap=True)
        if not pending.approvals and not pending.questions:
            return
    if resume is None:
        given = []
        if pending.approvals:
            decided = ", ".join(f"{a.call_id!r}: True" for a in pending.approvals)
            given.append(f"approvals={{{decided}}}")
        if pending.questions:
            answered = ", ".join(f"{q.id!r}: TEXT" for q in pending.questions)
            given.append(f"answers={{{answered}}}")
        line = f"Go on with: Runner.resume(result.pending, {', '.join(given)})" + (
            " (False rejects a call)." if pending.approvals else ".")
    else:
        ids = " ".join([*(f"--approve {a.call_id}" for a in pending.approvals),
                        *(f"--answer {q.id}=TEXT" for q in pending.questions)])
        line = f"Go on with: {resume} {ids}" + (" (or --reject ID)." if pending.approvals
                                                 else ".")
    console.print(Text(line, style="dim"), soft_wrap=True)


def resume_command(target: str, session_id: str, *, agent_name: str | None, db: str,
                   model: str | None, context: list[str] | None, json_output: bool) -> str:
    """``relayrace resume`` for the session, with the options the run was given (its target,
    agent, store, model and context as typed), so it can be pasted as it is."""
    words = ["relayrace", "resume", target, "--session", session_id]
    if agent_name:
        words += ["--agent", agent_name]
    if db != DEFAULT_DB:
        words += ["--db", db]
    if model:
        words += ["--model", model]
    for item in context or ():
        words += ["-c", item]
    if json_output:
        words.append("--json")
    return shlex.join(words)


def run(
    target: TargetArgument,
    prompt: Annotated[str, typer.Argument(help="The user message ('-' reads stdin).")],
    agent_name: AgentOption = None,
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="Continue (or create) this session id."),
    ] = None,
    db: DbOption = DEFAULT_DB,
    model: ModelOption = None,
    json_output: JsonOption = False,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", min=1, help="Model turns allowed.")
    ] = None,
    context: ContextOption = None,
) -> None:
    """Run an agent team on PROMPT, streaming what happens, then show the trace and usage."""
    if prompt == "-":
        prompt = sys.stdin.read()
    _run_team(target, prompt, session=session, db=db, model=model, json_output=json_output,
              max_turns=max_turns, context=context, approvals=None, agent_name=agent_name,
              answers=None)


def resume(
    target: TargetArgument,
    session: Annotated[str, typer.Option("--session", "-s", help="The session to resume.")],
    approve: Annotated[
        list[str] | None, typer.Option("--approve", help="A call id to approve (repeatable).")
    ] = None,
    reject: Annotated[
        list[str] | None, typer.Option("--reject", help="A call id to reject (repeatable).")
    ] = None,
    answer: Annotated[
        list[str] | None, typer.Option(
            "--answer", help="ID=TEXT: the answer to a pending question (repeatable); on a "
            "terminal, the questions not answered here are asked.")
    ] = None,
    db: DbOption = DEFAULT_DB,
    model: ModelOption = None,
    json_output: JsonOption = False,
    context: ContextOption = None,
    agent_name: AgentOption = None,
) -> None:
    """Continue a run that stopped for a person: approve or reject its calls, answer its
    questions."""
    with errors():
        store = sessions.open_store(db)
        if not known(store, session):
            raise unknown_session(session, db)
    both = sorted(set(approve or []) & set(reject or []))
    if both:
        raise fail(f"Call id(s) {both} are both approved and rejected; choose one.")
    decisions = dict.fromkeys(approve or [], True) | dict.fromkeys(reject or [], False)
    answers = parse_answers(answer)
    with errors():
        agent = resolve_target(target, agent_name)
        pending = sync(store, lambda: PendingRun.from_session(store.session(session),
                                                              entry=agent))
        if pending is None:
            raise UserError(f"Session {session!r} is not waiting for approval or an answer.")
        waiting = {a.call_id for a in pending.approvals}
        unknown = sorted(set(decisions) - waiting)
        if unknown or not (decisions or answers or pending.questions):
            raise UserError(f"Give --approve or --reject for the pending call ids "
                            f"{sorted(waiting)}" + (f"; unknown: {unknown}." if unknown else "."))
        if pending.questions and not json_output and _interactive():
            answers = _ask(out_console(), pending, answers)
    _run_team(target, None, session=session, db=db, model=model, json_output=json_output,
              max_turns=None, context=context, approvals=decisions, agent_name=agent_name,
              answers=answers)


def _run_team(target: str, prompt: str | None, *, session: str | None, db: str,
              model: str | None, json_output: bool, max_turns: int | None,
              context: list[str] | None, approvals: dict[str, bool] | None,
              agent_name: str | None, answers: dict[str, str] | None) -> None:
    out, err = out_console(), err_console()
    info = err if json_output else out
    variables = parse_context(context)
    session_id = session or new_session_id()
    with errors():
        agent = resolve_target(target, agent_name)
        override = resolve_model(model) if model else None
        info.print(Text(describe_models(agent, model=override), style="dim"), soft_wrap=True)
        check_credentials(agent, model=override)  # a missing key leaves no session behind
        stored = sessions.open_store(db)
        existed = session is not None and known(stored, session)
        store = stored.session(session_id)
        if session is None:
            info.print(Text.assemble(("session ", "dim"), (session_id, "bold"),
                                     (f"  (continue it with --session {session_id})", "dim")))
        elif existed:
            info.print(Text.assemble(("continuing session ", "dim"), (session_id, "bold")))
        printer = EventPrinter(out, handoff_tools=handoff_tools(agent), live=True)
        trace_ids: list[str] = []

        def on_event(event: AgentEvent) -> None:
            if isinstance(event, RunStartedEvent) and "/" not in event.path and not trace_ids:
                trace_ids.append(event.trace_id)
            if json_output:
                sys.stdout.write(dump_events([event])[0] + "\n")
                sys.stdout.flush()
            else:
                printer.print(event)

        options: dict[str, Any] = {"session": store, "max_turns": max_turns}
        if approvals is not None or answers is not None:
            options["approvals"] = approvals or {}
            options["answers"] = answers or {}
        if override is not None:
            options["model"] = override
        if variables is not None:
            options["context"] = variables
        processor = InMemoryTraceProcessor()
        previous = get_trace_processors()
        add_trace_processor(processor)
        try:
            result = _stream(agent, prompt, options, on_event, stored)
        except KeyboardInterrupt:
            printer.close()
            err.print(Text(f"Interrupted; continue with --session {session_id}.",
                           style="bold yellow"))
            raise typer.Exit(130) from None
        except BaseException:
            printer.close()
            if not json_output and trace_ids:
                out.print()
                out.print(trace_tree(processor.tree(trace_ids[0]), trace_ids[0]))
            raise
        finally:
            set_trace_processors(previous)
        pending = result.pending
        go_on = resume_command(target, session_id, agent_name=agent_name, db=db, model=model,
                               context=context, json_output=json_output)
        if json_output:
            if pending:
                print_pending(err, pending, go_on)
                raise typer.Exit(EXIT_APPROVAL)
            return
        printer.close()
        if pending:
            print_pending(out, pending, go_on)
        out.print()
        out.print(trace_tree(processor.tree(result.trace_id), result.trace_id))
        out.print()
        out.print(usage_table(result.usage))
        if pending and pending.questions and _interactive():  # ask here, and go on
            answers = _ask(out, pending, {})
        elif pending:
            raise typer.Exit(EXIT_APPROVAL)
        if not pending:
            out.print(Text.assemble(("✓ ", "bold green"), ("answered by ", "dim"),
                                    (result.last_agent.name, "bold"),
                                    (f" · session {session_id}", "dim")))
            return
    _run_team(target, None, session=session_id, db=db, model=model, json_output=False,
              max_turns=max_turns, context=context, approvals=None, agent_name=agent_name,
              answers=answers)
