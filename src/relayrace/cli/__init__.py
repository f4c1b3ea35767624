"""The ``relayrace`` command line: run a team live, list and inspect stored sessions.
Layer: an entry point, the top one. May import everything: the runner, the server,
durable runs, config, evals and connect's servers.


``relayrace run team.py:triage "hello"`` streams the run (messages, tool calls, handoffs,
delegations), then prints the trace tree and the usage per agent. Sessions live in SQLite
(``.relayrace/sessions.db`` by default), so a conversation continues with ``--session ID``.
A run that stops for a person (an approval, a question) exits with ``EXIT_APPROVAL`` (3);
``relayrace resume`` decides or answers. On a terminal, ``run`` and ``resume`` ask the
questions there and go on.

This module is the command table; each command lives in a module of its own: ``_run`` (run,
resume), ``_sessions``, ``_team`` (validate, graph), ``_serve``, ``_mcp``, ``_a2a``,
``_durable`` (submit, worker), ``_eval`` and ``_demo``; what they share is in ``_common``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer

from .._version import __version__
from ._a2a import a2a_app
from ._common import EXIT_APPROVAL, EXIT_CODES
from ._demo import demo
from ._durable import submit, worker
from ._eval import eval_app
from ._mcp import mcp_app
from ._run import print_run, resume, run
from ._serve import serve
from ._sessions import sessions_app
from ._target import check_credentials, describe_models
from ._team import graph, validate

__all__ = ["EXIT_APPROVAL", "app", "check_credentials", "describe_models", "main", "print_run"]

app = typer.Typer(
    name="relayrace",
    help="Run relayrace agent teams and inspect their sessions.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
"""The ``relayrace`` command and its subcommands."""


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


# in the order `relayrace --help` lists them
app.command()(demo)
app.add_typer(sessions_app, name="sessions")
app.command(epilog=EXIT_CODES)(run)
app.command(epilog=EXIT_CODES)(resume)
app.command()(validate)
app.command()(graph)
app.add_typer(mcp_app, name="mcp")
app.add_typer(a2a_app, name="a2a")
app.add_typer(eval_app, name="eval")
app.command()(serve)
app.command(epilog=EXIT_CODES)(submit)
app.command()(worker)


def main(args: Sequence[str] | None = None) -> None:
    """The ``relayrace`` console script: ``args``, or the command line's."""
    app(args=None if args is None else list(args), prog_name="relayrace")
