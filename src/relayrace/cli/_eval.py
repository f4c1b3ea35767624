"""``relayrace eval``: run a team's eval cases, compare runs, capture cases from sessions,
replay a stored conversation."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from .. import sessions
from ..core.exceptions import UserError
from ..models import Model
from ..sessions import new_session_id
from ..testing import ScriptedModel
from ._common import errors, fail
from ._target import model_attribute, model_names, resolve_model, resolve_target

if TYPE_CHECKING:
    from rich.progress import Progress

    from ..evals import Case, EvalResult, ModelChoice
    from ..evals.baseline import CaseDelta
    from ..sessions import SessionStore

__all__ = ["eval_app"]

class _RunByDefault(TyperGroup):
    """``relayrace eval TEAM CASES`` is ``relayrace eval run TEAM CASES``: a first word that
    names no subcommand (``compare``, ``capture``, ``replay``) starts ``run``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's own Context
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


eval_app = typer.Typer(help="Evaluate a team on cases: pass rates, routing, trajectories. "
                       "`relayrace eval TEAM CASES` runs them (the `run` command).",
                       no_args_is_help=True, cls=_RunByDefault)

_DB_HELP = ("Where sessions live: a SQLite file, or a store URL (memory:// keeps nothing).")
ContextOption = Annotated[list[str] | None, typer.Option(
    "--context", "-c", help="A context variable KEY=VALUE (repeatable; a case's own win).")]


def _console(stderr: bool = False) -> Console:
    """Off a terminal (CI logs, a pipe) 200 columns, unless COLUMNS says: rich's 80 would
    wrap the tables mid-id."""
    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and not os.environ.get("COLUMNS")
    return Console(stderr=stderr, highlight=False, width=200 if wide else None)


def _writable(paths: list[Path | None]) -> None:
    """Exit 2 unless every output file can be written: checked before any case runs, so a
    typo never costs a whole eval run."""
    for path in paths:
        if path is None or str(path) == "-":
            continue
        existed = path.exists()
        try:
            if path.is_dir():
                raise IsADirectoryError(f"{path} is a directory")
            with path.open("a", encoding="utf-8"):
                pass
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise fail(f"cannot write {path}: {reason}; give a file in a directory that "
                       "exists and can be written.", code=2) from None
        if not existed:
            path.unlink()  # made to try; the results write it


def _context(items: list[str] | None) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}.", param_hint="--context")
        found[key.strip()] = value
    return found


def _prices(items: list[str] | None) -> dict[str, tuple[float, float]]:
    found: dict[str, tuple[float, float]] = {}
    for item in items or []:
        name, _, pair = item.rpartition("=")
        prices = pair.split("/")
        try:
            found[name or "*"] = (float(prices[0]), float(prices[1]))
        except (ValueError, IndexError):
            raise typer.BadParameter(f"expected MODEL=INPUT/OUTPUT (USD per million tokens, "
                                     f"e.g. gpt-4o-mini=0.15/0.60), got {item!r}.",
                                     param_hint="--price") from None
    return found


def _model_choice(spec: str | None) -> ModelChoice:
    """``--model``: ``provider:model``, or ``file.py:NAME`` holding a model or a function
    that makes one per case run (what a scripted model needs)."""
    if spec is None:
        return None
    file_part, _, name = spec.rpartition(":")
    if not file_part.endswith(".py"):
        return resolve_model(spec)
    module, value = model_attribute(file_part, name)
    if isinstance(value, ScriptedModel):
        raise UserError(f"{spec} is a ScriptedModel, which plays one conversation; give a "
                        f"function that makes one per case run: def {name}(case) -> Model.")
    if isinstance(value, Model) or (callable(value) and not isinstance(value, type)):
        return value
    raise UserError(f"{spec} is neither a Model nor a function (case) -> Model (found "
                    f"{type(value).__name__}). {model_names(module)}")


def _load_result(ref: str, store: SessionStore) -> EvalResult:
    """A results file (``--json``) or an eval run id in the store."""
    from ..evals import EvalResult, load_eval_run

    path = Path(ref)
    if path.suffix == ".json" or path.is_file():
        try:
            return EvalResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise UserError(f"{ref}: not an eval results file (write one with --json): "
                            f"{exc}") from None
    loaded: EvalResult = asyncio.run(_close_after(store, load_eval_run(store, ref)))
    return loaded


async def _close_after(store: SessionStore, work: Any) -> Any:
    try:
        return await work
    finally:
        await store.aclose()


def _short_path(path: list[str]) -> str:
    return " → ".join(path) or "(none)"


def _results_table(result: EvalResult) -> Table:
    errors_ = sum(r.status == "error" for r in result.runs)
    stopped = sum(bool(r.stopped) for r in result.runs)
    apart = [f"{n} {what}" for n, what in ((errors_, "error(s)"),
                                           (stopped, "stopped for a person")) if n]
    table = Table(title=f"{result.team}: {result.pass_rate:.0%} of {len(result.runs)} case "
                        "run(s) passed" + (f" ({', '.join(apart)})" if apart else ""),
                  title_justify="left")
    for column in ("case", "passed", "path", "tokens", "ms", "first divergence"):
        # Ids and counts never wrap; a path or a divergence folds.
        table.add_column(column, overflow="fold", no_wrap=column in ("case", "passed"))
    for case in result.cases:
        rate = case.pass_rate
        style = "green" if rate == 1 else "red" if rate == 0 else "yellow"
        run = case.first_failed()
        why = Text("")
        if run is not None:
            failure = run.first_failure()
            why = Text(run.error or (f"{failure.name}:\n{failure.detail}" if failure else ""),
                       style="red")
        passed = sum(r.passed for r in case.runs)
        table.add_row(case.case_id, Text(f"{passed}/{len(case.runs)}", style=style),
                      _short_path(case.usual_path), f"{case.mean('tokens'):.0f}",
                      f"{case.mean('seconds') * 1000:.1f}", why)
    return table


def _confusion_table(result: EvalResult) -> tuple[Text, Table] | None:
    """The routing matrix, and its title on a line of its own (a table's title wraps at the
    table's width)."""
    from ..evals.confusion import ConfusionMatrix

    matrix = ConfusionMatrix.of(result.runs)
    if not matrix.counts:
        return None
    title = Text(f"Routing (expected ↓, reached →): {matrix.summary()}", style="italic")
    table = Table()
    table.add_column("expected")
    for reached in matrix.reached:
        table.add_column(reached, justify="right")
    for expected in matrix.expected:
        cells = []
        for reached in matrix.reached:
            n = matrix.count(expected, reached)
            style = "green" if expected == reached else "bold red"
            cells.append(Text(str(n) if n else "·", style=style if n else "dim"))
        table.add_row(expected, *cells)
    return title, table


def _distribution_table(result: EvalResult) -> Table:
    table = Table(title="Per case run", title_justify="left")
    for column in ("", "mean", "median", "p90", "min", "max"):
        table.add_column(column, justify="right")
    for label, metric, fmt in (("tokens", "tokens", ".0f"), ("requests", "requests", ".1f"),
                               ("latency (ms)", "seconds", ".1f"), ("cost (USD)", "cost", ".5f")):
        d = result.distribution(metric)
        if d is None:
            table.add_row(label, "—", "—", "—", "—", "—")
            continue
        scale = 1000 if metric == "seconds" else 1
        table.add_row(label, *(format(v * scale, fmt)
                               for v in (d.mean, d.p50, d.p90, d.min, d.max)))
    return table


def _baseline_table(deltas: list[CaseDelta], against: str) -> Table:
    table = Table(title=f"Against {against}", title_justify="left")
    for column in ("case", "", "pass rate", "path", "tokens", "ms"):
        table.add_column(column, overflow="fold")

    def rate(v: float | None) -> str:
        return "—" if v is None else f"{v:.0%}"

    def num(v: float | None, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    def ms(v: float | None) -> str:
        return num(None if v is None else v * 1000, ".1f")

    for d in deltas:
        style = {"better": "green", "worse": "bold red"}.get(d.verdict, "dim")
        path = (f"{_short_path(d.path[0])}\n→ {_short_path(d.path[1])}" if d.path_changed
                else "same")
        table.add_row(d.case_id, Text(d.verdict, style=style),
                      f"{rate(d.pass_rate[0])} → {rate(d.pass_rate[1])}", path,
                      f"{num(d.tokens[0], '.0f')} → {num(d.tokens[1], '.0f')}",
                      f"{ms(d.seconds[0])} → {ms(d.seconds[1])}")
    return table


async def _evaluate(team: Any, cases: list[Case], options: dict[str, Any],
                    progress: Progress | None, store: SessionStore) -> EvalResult:
    from ..evals import run_eval

    total = len(cases) * options["repeat"]
    task = progress.add_task(f"{len(cases)} case(s) x {options['repeat']}",
                             total=total) if progress else None

    def advance(_: Any) -> None:
        if progress is not None and task is not None:
            progress.advance(task)

    try:
        return await run_eval(team, cases, store=store, on_run=advance, **options)
    finally:
        await store.aclose()


@eval_app.command("run")
def run_cases(
    team: Annotated[str, typer.Argument(help="The team: path/to/team.py:variable, or a YAML "
                                             "team (--agent picks the entry when it has "
                                             "several).")],
    cases_file: Annotated[Path, typer.Argument(help="The cases: a YAML or JSONL file.")],
    agent_name: Annotated[str | None, typer.Option("--agent", "-a", help="The agent to run, "
                                                   "by name.")] = None,
    repeat: Annotated[int, typer.Option("--repeat", "-n", min=1, help="Runs per case.")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", "-j", min=1,
                                             help="Case runs at once.")] = 4,
    model: Annotated[str | None, typer.Option("--model", "-m", help=(
        "Every agent's model: provider:model, or file.py:NAME holding a Model or a function "
        "(case) -> Model, which makes one per case run (scripted models for offline CI)."))
    ] = None,
    judge: Annotated[str | None, typer.Option(
        "--judge", help="The judge model for rubrics: provider:model or file.py:NAME.")
    ] = None,
    judge_timeout: Annotated[float, typer.Option("--judge-timeout", min=0.001,
                                                 help="Seconds a judge may take.")] = 60.0,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", min=0.001, help="Seconds one case run may take, conversation and checks: "
        "past it, the run is ended and counts as an error.")] = None,
    db: Annotated[str, typer.Option("--db", envvar="RELAYRACE_DB", help=_DB_HELP)
                  ] = ".relayrace/sessions.db",
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Write the results as JSON here ('-': standard output).")] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Write the HTML report here.")
                    ] = None,
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="Compare with this eval run id, or a results file (--json).")
    ] = None,
    min_pass_rate: Annotated[float | None, typer.Option(
        "--min-pass-rate", min=0.0, max=1.0,
        help="Exit with 1 when fewer case runs pass (0-1).")] = None,
    price: Annotated[list[str] | None, typer.Option(
        "--price", help="MODEL=IN/OUT: USD per million tokens, for the cost (repeatable; "
        "MODEL * for any).")] = None,
    context: ContextOption = None,
) -> None:
    """Run every case of CASES on TEAM (--repeat times), check what happened, and report:
    pass rates, first divergences, routing, tokens, latency and cost."""
    # Imported here: the rest of the command line starts without them.
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..evals import load_cases
    from ..evals.baseline import compare
    from ..evals.html import html_report
    from ..evals.junit import junit_xml
    to_stdout = json_out is not None and str(json_out) == "-"
    out = _console(stderr=to_stdout)
    _writable([json_out, junit, html])
    with errors():
        agent = resolve_target(team, agent_name)
        if model is None and any(isinstance(a.model, ScriptedModel) for a in agent.root.walk()):
            raise UserError(f"{team} runs on a scripted model, which plays one conversation, "
                            "not one per case run: give --model provider:model, or --model "
                            "file.py:NAME with a function (case) -> Model (see "
                            "examples/support/eval_models.py).")
        cases = load_cases(cases_file)
        defaults = _context(context)
        if defaults:
            for case in cases:
                case.context = {**defaults, **(case.context or {})}
        store = sessions.open_store(db)
        against = _load_result(baseline, sessions.open_store(db)) if baseline else None
        options = {"repeat": repeat, "concurrency": concurrency, "model": _model_choice(model),
                   "judge": _model_choice(judge) if judge else None,
                   "judge_timeout": judge_timeout, "run_timeout": timeout,
                   "prices": _prices(price), "label": team, "cases_file": str(cases_file)}
        if isinstance(options["judge"], ScriptedModel) or callable(options["judge"]) and \
                not isinstance(options["judge"], Model | str):
            raise UserError("--judge takes provider:model or file.py:NAME holding a Model.")
        with Progress(TextColumn("[bold]eval[/] {task.description}"), BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=_console(True),
                      transient=True) as progress:
            result = asyncio.run(_evaluate(agent, cases, options, progress, store))
    out.print(_results_table(result))
    matrix = _confusion_table(result)
    if matrix is not None:
        out.print(matrix[0], soft_wrap=True)
        out.print(matrix[1])
    out.print(_distribution_table(result))
    deltas = compare(against, result) if against is not None else []
    if against is not None:
        out.print(_baseline_table(deltas, f"baseline {against.run_id}"))
    data = result.to_dict()
    if to_stdout:
        typer.echo(json.dumps(data, indent=2))
    elif json_out is not None:
        json_out.write_text(json.dumps(data, indent=2), encoding="utf-8")
    written = []
    if json_out is not None and not to_stdout:
        written.append(f"results {json_out}")
    if junit is not None:
        junit.write_text(junit_xml(result), encoding="utf-8")
        written.append(f"JUnit {junit}")
    if html is not None:
        html.write_text(html_report(result, baseline=deltas), encoding="utf-8")
        written.append(f"report {html}")
    if written:
        out.print(Text(f"wrote {' · '.join(written)}", style="dim"), soft_wrap=True)
    stored = ("not stored (memory://)" if "memory://" in db else
              f"each case run is a session: relayrace sessions show {result.run_id}")
    out.print(Text(f"eval run {result.run_id} · {result.seconds:.2f} s · {stored}", style="dim"),
              soft_wrap=True)
    if min_pass_rate is not None and result.pass_rate < min_pass_rate:
        out.print(Text(f"✗ pass rate {result.pass_rate:.1%} is below --min-pass-rate "
                       f"{min_pass_rate:.1%}", style="bold red"))
        raise typer.Exit(1)


@eval_app.command("compare")
def compare_runs(
    baseline: Annotated[str, typer.Argument(help="The baseline: a results file or run id.")],
    current: Annotated[str, typer.Argument(help="The run to judge: a results file or run id.")],
    db: Annotated[str, typer.Option("--db", envvar="RELAYRACE_DB", help=_DB_HELP)
                  ] = ".relayrace/sessions.db",
) -> None:
    """Compare two eval runs case by case: pass rate, path, tokens, latency."""
    from ..evals.baseline import compare
    with errors():
        before = _load_result(baseline, sessions.open_store(db))
        after = _load_result(current, sessions.open_store(db))
    _console().print(_baseline_table(compare(before, after), baseline))


@eval_app.command("capture")
def capture(
    session_id: Annotated[str, typer.Argument(help="The stored session to make a case of.")],
    into: Annotated[Path, typer.Option("--into", help="The case file to add it to (created "
                                                      "if missing).")],
    case_id: Annotated[str | None, typer.Option("--id", help="The case's id (default: "
                                                "session-ID).")] = None,
    db: Annotated[str, typer.Option("--db", envvar="RELAYRACE_DB", help=_DB_HELP)
                  ] = ".relayrace/sessions.db",
    context: ContextOption = None,
) -> None:
    """Turn a stored conversation into an eval case that expects what happened, to edit."""
    from ..evals.capture import append_case, capture_case, capture_note, child_logs
    with errors():
        store = sessions.open_store(db)

        async def events() -> Any:
            if not await store.exists(session_id):
                raise UserError(f"No session {session_id!r} in {db}; list them with "
                                "`relayrace sessions list`.")
            log = await store.session(session_id).get_events()
            return log, await child_logs(store, log)

        stored, children = asyncio.run(_close_after(store, events()))
        case = capture_case(stored, case_id or f"session-{session_id}",
                            context=_context(context) or None, children=children)
        append_case(into, case, note=capture_note(session_id, stored))
    path = case.expect.path_spec()
    _console().print(Text.assemble(("✓ ", "bold green"), f"case {case.id} added to {into}: ",
                                   (_short_path(path.agents if path else []), "bold")))


def _made(factory: Any, case: Case, spec: str | None) -> Model | str:
    """The model ``factory`` makes for ``case``; its failure is the command line's error."""
    try:
        made: Model | str = factory(case)
    except Exception as exc:
        raise UserError(f"--model {spec} could not make a model for case {case.id!r}: "
                        f"{type(exc).__name__}: {exc}") from None
    return made


@eval_app.command("replay")
def replay_session(
    session_id: Annotated[str, typer.Argument(help="The stored session to replay.")],
    team: Annotated[str, typer.Option("--team", "-t", help="The team to replay on: "
                                                          "path/to/team.py:variable, or a "
                                                          "YAML team.")],
    agent_name: Annotated[str | None, typer.Option("--agent", "-a", help="The agent to run, "
                                                   "by name.")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help=(
        "Every agent's model: provider:model, or file.py:NAME (a Model, or a function "
        "(case) -> Model)."))] = None,
    db: Annotated[str, typer.Option("--db", envvar="RELAYRACE_DB", help=_DB_HELP)
                  ] = ".relayrace/sessions.db",
    context: ContextOption = None,
) -> None:
    """Say a stored conversation's user turns again (another model, a changed team) and show
    where the trajectory diverged from the stored one: exit 1 if it did, 0 if not."""
    from ..evals.capture import capture_case
    from ..evals.replay import first_divergence, replay
    out = _console()
    with errors():
        agent = resolve_target(team, agent_name)
        store = sessions.open_store(db)
        stored_case_id = f"session-{session_id}"
        choice = _model_choice(model)

        async def go() -> Any:
            if not await store.exists(session_id):
                raise UserError(f"No session {session_id!r} in {db}; list them with "
                                "`relayrace sessions list`.")
            events = await store.session(session_id).get_events()
            chosen = choice if choice is None or isinstance(choice, Model | str) else \
                _made(choice, capture_case(events, stored_case_id), model)
            new = store.session(new_session_id())
            return (*await replay(agent, events, model=chosen, context=_context(context) or None,
                                  session=new), new.session_id)

        before, after, new_id = asyncio.run(_close_after(store, go()))
    split = first_divergence(before, after)
    if split is None:
        out.print(Text.assemble(("✓ ", "bold green"), "the replay took the same "
                                f"{len(after.steps)} steps as session {session_id}"))
    else:
        out.print(Text(f"✗ the replay diverged at step {split.step + 1}:", style="bold red"))
        for step in split.shared[-3:]:
            out.print(Text(f"  {step}", style="dim"), soft_wrap=True)
        out.print(Text(f"- {split.stored}   (stored)", style="red"), soft_wrap=True)
        out.print(Text(f"+ {split.replayed}   (replayed)", style="green"), soft_wrap=True)
    out.print(Text(f"replayed in session {new_id} · stored: {_short_path(before.path)} · "
                   f"replayed: {_short_path(after.path)}", style="dim"), soft_wrap=True)
    if split is not None:
        raise typer.Exit(1)  # CI fails on a divergence
