"""The ``relayrace`` command line: run a team live, list and inspect stored sessions.
Layer: an entry point, the top one. May import everything: the runner, the server,
durable runs, config, evals and connect's servers.


``relayrace run team.py:triage "hello"`` streams the run (messages, tool calls, handoffs,
delegations), then prints the trace tree and the usage per agent. Sessions live in SQLite
(``.relayrace/sessions.db`` by default), so a conversation continues with ``--session ID``.
A run that stops for a person (an approval, a question) exits with ``EXIT_APPROVAL`` (3);
``relayrace resume`` decides or answers. On a terminal, ``run`` and ``resume`` ask the
questions there and go on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from .._version import __version__
from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..core.events import AgentEvent, HandoffEvent, RunStartedEvent, dump_events
from ..core.exceptions import RelayraceError, UserError
from ..runner import Runner, RunResult
from ..sessions import DEFAULT_DB_PATH, SessionInfo, SessionStore, new_session_id, open_store
from ..tracing import (
    InMemoryTraceProcessor,
    add_trace_processor,
    get_trace_processors,
    set_trace_processors,
)
from ._render import (
    EventPrinter,
    format_time,
    session_label,
    session_tree,
    sessions_table,
    trace_tree,
    truncate,
    usage_table,
)
from ._target import check_credentials, describe_models, resolve_model, resolve_target

__all__ = ["EXIT_APPROVAL", "app", "check_credentials", "describe_models", "main", "print_run"]

EXIT_APPROVAL = 3
"""The exit code of ``run`` and ``resume`` when the run stopped for a person: approval, or an
answer it could not ask for (no terminal)."""

_EXIT_CODES = ("Exit codes: 0 done; 1 error; 2 bad command line; 3 the run stopped for "
               "approval or an answer (decide or answer with `relayrace resume`); "
               "130 interrupted.")

app = typer.Typer(
    name="relayrace",
    help="Run relayrace agent teams and inspect their sessions.",
    epilog=_EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
sessions_app = typer.Typer(help="List and inspect stored sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")

DbOption = Annotated[
    str,
    typer.Option(
        "--db", envvar="RELAYRACE_DB", show_default=True,
        help="Where sessions live: a SQLite file, or a store URL (sqlite:///PATH, "
        "postgresql://USER@HOST/DB).",
    ),
]
DEFAULT_DB = str(DEFAULT_DB_PATH)
T = TypeVar("T")
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON lines instead.")]
TargetArgument = Annotated[str, typer.Argument(
    help="The agent to run: path/to/team.py:variable, or a YAML team (use --agent).")]
AgentOption = Annotated[str | None, typer.Option(
    "--agent", "-a", help="The agent to run, by name (required for a YAML team).")]
ModelOption = Annotated[str | None, typer.Option(
    "--model", "-m", help="Use this model for every agent: provider:model, or "
    "path/to/file.py:VARIABLE naming a Model object.")]
ContextOption = Annotated[list[str] | None, typer.Option(
    "--context", "-c", help="A context variable KEY=VALUE (repeatable).")]


def _stdout() -> Console:
    return Console(highlight=False)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def _fail(message: str, code: int = 1) -> typer.Exit:
    _stderr().print(Text(f"Error: {message}", style="bold red"), soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def _errors() -> Iterator[None]:
    """Turn relayrace errors into a red message and exit code 1, Ctrl-C into 130."""
    try:
        yield
    except RelayraceError as exc:
        raise _fail(str(exc)) from None
    except sqlite3.Error as exc:
        raise _fail(f"The session database could not be used: {exc}. Check the --db path, "
                    "or move the file aside to start afresh.") from None
    except KeyboardInterrupt:
        _stderr().print(Text("Interrupted.", style="bold yellow"))
        raise typer.Exit(130) from None


def _version(value: bool) -> None:
    if value:
        typer.echo(f"relayrace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Run relayrace agent teams and inspect their sessions."""


# -- run ----------------------------------------------------------------------------------------


def _parse_context(items: list[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    context: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}.", param_hint="--context")
        context[key.strip()] = value
    return context


def _parse_answers(items: list[str] | None) -> dict[str, str]:
    answers: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected ID=TEXT, got {item!r}.", param_hint="--answer")
        answers[key.strip()] = value
    return answers


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


def _handoff_tools(agent: Agent[Any]) -> set[str]:
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


def _sync(store: SessionStore, work: Callable[[], Awaitable[T]]) -> T:
    """``work()`` in an event loop of its own, the store's connections closed after it."""
    async def go() -> T:
        try:
            return await work()
        finally:
            await store.aclose()

    return asyncio.run(go())


def _known(store: SessionStore, session_id: str) -> bool:
    return _sync(store, lambda: store.exists(session_id))


async def print_run(agent: Agent[Any], input: str | None, *, console: Console | None = None,
                    trace: bool = True, **options: Any) -> RunResult:
    """Run like ``Runner.stream``, printing events live as the CLI does, then the trace tree
    and the usage table (with ``trace=True``). Takes ``Runner.run``'s options."""
    out = console or _stdout()
    printer = EventPrinter(out, handoff_tools=_handoff_tools(agent), live=True)
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
        _print_pending(out, result.pending, result.session.session_id)
    if trace:
        out.print()
        out.print(trace_tree(processor.tree(result.trace_id), result.trace_id))
        out.print(usage_table(result.usage))
    return result


def _print_pending(console: Console, pending: PendingRun, session_id: str) -> None:
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
    ids = " ".join([*(f"--approve {a.call_id}" for a in pending.approvals),
                    *(f"--answer {q.id}=TEXT" for q in pending.questions)])
    console.print(Text(f"Go on with: relayrace resume TARGET --session {session_id} {ids}" +
                       (" (or --reject ID)." if pending.approvals else "."), style="dim"),
                  soft_wrap=True)


@app.command(epilog=_EXIT_CODES)
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


@app.command(epilog=_EXIT_CODES)
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
    with _errors():
        store = open_store(db)
        if not _known(store, session):
            raise _unknown_session(session, db)
    both = sorted(set(approve or []) & set(reject or []))
    if both:
        raise _fail(f"Call id(s) {both} are both approved and rejected; choose one.")
    decisions = dict.fromkeys(approve or [], True) | dict.fromkeys(reject or [], False)
    answers = _parse_answers(answer)
    with _errors():
        agent = resolve_target(target, agent_name)
        pending = _sync(store, lambda: PendingRun.from_session(store.session(session),
                                                              entry=agent))
        if pending is None:
            raise UserError(f"Session {session!r} is not waiting for approval or an answer.")
        waiting = {a.call_id for a in pending.approvals}
        unknown = sorted(set(decisions) - waiting)
        if unknown or not (decisions or answers or pending.questions):
            raise UserError(f"Give --approve or --reject for the pending call ids "
                            f"{sorted(waiting)}" + (f"; unknown: {unknown}." if unknown else "."))
        if pending.questions and not json_output and _interactive():
            answers = _ask(_stdout(), pending, answers)
    _run_team(target, None, session=session, db=db, model=model, json_output=json_output,
              max_turns=None, context=context, approvals=decisions, agent_name=agent_name,
              answers=answers)


def _run_team(target: str, prompt: str | None, *, session: str | None, db: str,
              model: str | None, json_output: bool, max_turns: int | None,
              context: list[str] | None, approvals: dict[str, bool] | None,
              agent_name: str | None, answers: dict[str, str] | None) -> None:
    out, err = _stdout(), _stderr()
    info = err if json_output else out
    variables = _parse_context(context)
    session_id = session or new_session_id()
    with _errors():
        agent = resolve_target(target, agent_name)
        override = resolve_model(model) if model else None
        info.print(Text(describe_models(agent, model=override), style="dim"), soft_wrap=True)
        check_credentials(agent, model=override)  # a missing key leaves no session behind
        sessions = open_store(db)
        existed = session is not None and _known(sessions, session)
        store = sessions.session(session_id)
        if session is None:
            info.print(Text.assemble(("session ", "dim"), (session_id, "bold"),
                                     (f"  (continue it with --session {session_id})", "dim")))
        elif existed:
            info.print(Text.assemble(("continuing session ", "dim"), (session_id, "bold")))
        printer = EventPrinter(out, handoff_tools=_handoff_tools(agent), live=True)
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
            result = _stream(agent, prompt, options, on_event, sessions)
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
        if json_output:
            if pending:
                _print_pending(err, pending, session_id)
                raise typer.Exit(EXIT_APPROVAL)
            return
        printer.close()
        if pending:
            _print_pending(out, pending, session_id)
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


@app.command()
def validate(
    path: Annotated[Path, typer.Argument(help="A YAML team: a directory or one file.")],
) -> None:
    """Check a YAML team without running it: errors name the file, line and key."""
    from ..config.cli import validate as check

    ok, report = check(path)
    (_stdout() if ok else _stderr()).print(report, soft_wrap=True, highlight=False)
    if not ok:
        raise typer.Exit(1)


@app.command()
def graph(
    target: Annotated[str, typer.Argument(
        help="A YAML team (a directory or one file) or path/to/team.py:agent_variable.")],
    svg: Annotated[Path | None, typer.Option(
        "--svg", help="Also write an SVG here (needs Graphviz's dot).")] = None,
) -> None:
    """Print a team as a Mermaid graph: agents, transfers, delegations, tools, routing rules."""
    from ..config.cli import graph as draw

    with _errors():
        text = draw(target, svg)
    typer.echo(text)


# -- sessions -----------------------------------------------------------------------------------


async def _children(store: SessionStore, session_id: str) -> dict[str, list[SessionInfo]]:
    """Every descendant of ``session_id``, as a map from a parent id to its children."""
    found: dict[str, list[SessionInfo]] = {}
    todo = [session_id]
    while todo:
        parent = todo.pop()
        if parent in found:
            continue
        kids = await store.list_sessions(parent_id=parent, limit=100_000)
        found[parent] = sorted(kids, key=lambda i: i.created_at)
        todo.extend(c.session_id for c in found[parent])
    return found


def _unknown_session(session_id: str, db: str) -> typer.Exit:
    db_hint = "" if db == DEFAULT_DB else f" --db {db}"
    return _fail(
        f"No session {session_id!r} in {db}. List the session ids with "
        f"`relayrace sessions list{db_hint}`."
    )


@sessions_app.command("list")
def list_sessions(db: DbOption = DEFAULT_DB, json_output: JsonOption = False) -> None:
    """List the top-level sessions with their sizes and child-session counts."""
    if "://" not in db and not Path(db).exists():
        if not json_output:
            _stdout().print(f"No sessions yet (no database at {db}).")
        return
    with _errors():
        store = open_store(db)

        async def listed() -> list[tuple[SessionInfo, int]]:
            infos = await store.list_sessions(limit=100_000)
            rows = []
            for info in sorted(infos, key=lambda i: i.created_at):
                tree = await _children(store, info.session_id)
                rows.append((info, sum(len(v) for v in tree.values())))
            return rows

        rows = _sync(store, listed)
    if json_output:
        for info, count in rows:
            typer.echo(json.dumps({**dataclasses.asdict(info), "child_sessions": count}))
        return
    out = _stdout()
    if not rows:
        out.print(f"No sessions in {db}.")
        return
    out.print(sessions_table(rows, str(db)))


@sessions_app.command("show")
def show_session(
    session_id: Annotated[str, typer.Argument(help="The session id (see `sessions list`).")],
    db: DbOption = DEFAULT_DB,
    json_output: JsonOption = False,
) -> None:
    """Show a session's conversation and the tree of its child sessions."""
    with _errors():
        store = open_store(db)
        if not _known(store, session_id):
            raise _unknown_session(session_id, db)
        session = store.session(session_id)
        if json_output:
            sys.stdout.write(_sync(store, session.export_jsonl))
            return
        events = _sync(store, session.get_events)
        children = _sync(store, lambda: _children(store, session_id))
    out = _stdout()
    info = session.info
    out.print(Text.assemble(("session ", "dim"), session_label(info),
                            (f"  created {format_time(info.created_at)}", "dim"),
                            (f", updated {format_time(info.updated_at)}", "dim")))
    base = info.path.count("/") if info.path else 0
    printer = EventPrinter(
        out,
        handoff_call_ids=[e.tool_call_id for e in events if isinstance(e, HandoffEvent)],
        base_depth=base,
    )
    printer.print_all(events)
    out.print()
    if any(children.values()):
        out.print(Text("Child sessions", style="bold"))
        out.print(session_tree(info, children))
    else:
        out.print(Text("No child sessions.", style="dim"))


from ._a2a import a2a_app  # noqa: E402 - it uses _errors above
from ._durable import submit, worker  # noqa: E402 - it uses _errors above
from ._eval import eval_app  # noqa: E402 - it uses _errors above
from ._mcp import mcp_app  # noqa: E402 - it uses _errors above
from ._serve import serve  # noqa: E402 - it uses _errors above

app.add_typer(mcp_app, name="mcp")
app.add_typer(a2a_app, name="a2a")
app.add_typer(eval_app, name="eval")
app.command()(serve)
app.command(epilog=_EXIT_CODES)(submit)
app.command()(worker)


def main() -> None:
    """The ``relayrace`` console script."""
    app()
