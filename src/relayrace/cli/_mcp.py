"""``relayrace mcp serve``: a team's entry agents as the tools of an MCP server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from ..agent import Agent
from ..exceptions import UserError
from ..mcp_serve import mcp_server, serve_http, serve_stdio
from ._target import resolve_model, resolve_target

__all__ = ["AllowedHosts", "AllowedOrigins", "entry_agents", "mcp_app"]

AllowedHosts = Annotated[list[str] | None, typer.Option(
    "--allowed-host", help="Also answer requests for this Host: NAME (any port) or NAME:PORT, "
    "or '*' for any (repeatable). Loopback names, and --host unless it is 0.0.0.0 or ::, "
    "always are; other hosts get 421 (DNS rebinding).")]
"""``--allowed-host``, the same on every serving command."""

AllowedOrigins = Annotated[list[str] | None, typer.Option(
    "--allowed-origin", help="Let web pages at this origin (scheme://host[:port], or '*') "
    "post to the server (repeatable). Pages on an allowed host may; others get 403.")]
"""``--allowed-origin``, the same on every serving command."""

mcp_app = typer.Typer(help="Serve a team over MCP (Model Context Protocol).",
                      no_args_is_help=True)


def entry_agents(target: str, names: list[str] | None) -> list[Agent[Any]]:
    """The agents ``serve`` offers: those named, else a YAML team's entry points, else the
    agent the target names."""
    if names:
        return [resolve_target(target, n) for n in names]
    path = Path(target)
    if path.is_dir() or target.endswith((".yaml", ".yml")):
        from ..config import load_team

        if not path.exists():
            raise UserError(f"Team path {target!r} does not exist.")
        team = load_team(path)
        return [team[n] for n in team.entry_points or list(team)]
    return [resolve_target(target)]


@mcp_app.command("serve")
def serve(
    target: Annotated[str, typer.Argument(help=(
        "The team: path/to/team.py:variable, or a YAML team (its entry agents, or --agent)."))],
    agent_names: Annotated[list[str] | None, typer.Option(
        "--agent", "-a", help="Offer this agent, by name (repeatable).")] = None,
    port: Annotated[int | None, typer.Option(
        "--port", min=0, max=65535,
        help="Serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio.")] = None,
    db: Annotated[Path | None, typer.Option(
        "--db", help="Keep each call's session in this SQLite file (default: in memory).")
    ] = None,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Use this model for every agent: provider:model, or "
        "path/to/file.py:VARIABLE naming a Model object.")] = None,
    max_turns: Annotated[int | None, typer.Option(
        "--max-turns", min=1, help="Model turns allowed per call.")] = None,
    name: Annotated[str, typer.Option("--name", help="The server's name.")] = "relayrace",
    allowed_hosts: AllowedHosts = None,
    allowed_origins: AllowedOrigins = None,
) -> None:
    """Offer a team's entry agents as MCP tools: each call runs the agent on its task and
    returns its answer (and its report, as structured content)."""
    from . import _errors

    with _errors():
        agents = entry_agents(target, agent_names)
        server = mcp_server(agents, name=name, db=db,
                            model=resolve_model(model) if model else None, max_turns=max_turns)
        if port is None:
            asyncio.run(serve_stdio(server))
        else:
            typer.echo(f"Serving {', '.join(a.name for a in agents)} at "
                       f"http://127.0.0.1:{port}/mcp", err=True)
            asyncio.run(serve_http(server, port=port, allowed_hosts=allowed_hosts or (),
                                   allowed_origins=allowed_origins or ()))
