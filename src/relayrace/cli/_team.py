"""``relayrace validate`` and ``relayrace graph``: a team checked or drawn without running it
(the work is `relayrace.config.cli`'s)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import err_console, errors, out_console

__all__ = ["graph", "validate"]


def validate(
    path: Annotated[Path, typer.Argument(help="A YAML team: a directory or one file.")],
) -> None:
    """Check a YAML team without running it: errors name the file, line and key."""
    from ..config.cli import validate as check

    ok, report = check(path)
    (out_console() if ok else err_console()).print(report, soft_wrap=True, highlight=False)
    if not ok:
        raise typer.Exit(1)


def graph(
    target: Annotated[str, typer.Argument(
        help="A YAML team (a directory or one file) or path/to/team.py:agent_variable.")],
    svg: Annotated[Path | None, typer.Option(
        "--svg", help="Also write an SVG here (needs Graphviz's dot).")] = None,
) -> None:
    """Print a team as a Mermaid graph: agents, transfers, delegations, tools, routing rules."""
    from ..config.cli import drawing, svg_file
    from ..config.graph import to_mermaid

    with errors():
        drawn = drawing(target)
        typer.echo(to_mermaid(drawn))  # printed even when the SVG cannot be made
        if svg is not None:
            svg_file(drawn, svg)
