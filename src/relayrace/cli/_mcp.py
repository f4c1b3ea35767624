"""``relayrace mcp serve``: a team's entry agents as the tools of an MCP server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from ..agents.agent import Agent
from ..core.exceptions import UserError
from ._common import MODEL_HELP, errors
from ._options import AllowedHosts, AllowedOrigins, ApiKeys, api_keys_given
from ._target import resolve_model, resolve_target

__all__ = ["entry_agents", "mcp_app"]

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
        "--model", "-m", help=MODEL_HELP)] = None,
    max_turns: Annotated[int | None, typer.Option(
        "--max-turns", min=1, help="Model turns allowed per call.")] = None,
    name: Annotated[str, typer.Option("--name", help="The server's name.")] = "relayrace",
    allowed_hosts: AllowedHosts = None,
    allowed_origins: AllowedOrigins = None,
    api_keys: ApiKeys = None,
) -> None:
    """Offer a team's entry agents as MCP tools: each call runs the agent on its task and
    returns its answer (and its report, as structured content)."""
    from ..connect.mcp_server import mcp_server, serve_http, serve_stdio

    with errors():
        agents = entry_agents(target, agent_names)
        server = mcp_server(agents, name=name, db=db,
                            model=resolve_model(model) if model else None, max_turns=max_turns)
        if port is None:
            if api_keys:
                raise UserError("API keys guard the HTTP server: over stdio the only caller "
                                "is the process that started it. Add --port PORT, or leave "
                                "out --api-key.")
            asyncio.run(serve_stdio(server))
        else:
            keys = api_keys_given(api_keys)
            typer.echo(f"Serving {', '.join(a.name for a in agents)} at "
                       f"http://127.0.0.1:{port}/mcp (API keys: "
                       f"{'required' if keys else 'none'})", err=True)
            asyncio.run(serve_http(server, port=port, allowed_hosts=allowed_hosts or (),
                                   allowed_origins=allowed_origins or (), api_keys=keys))
