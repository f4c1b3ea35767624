"""``relayrace a2a serve``: a team served over A2A (Agent2Agent)."""

from __future__ import annotations

import asyncio
import socket
from typing import Annotated

import typer

from ._common import MODEL_HELP, errors
from ._mcp import entry_agents
from ._options import AllowedHosts, AllowedOrigins, ApiKeys, api_keys_given
from ._target import resolve_model

__all__ = ["a2a_app"]

a2a_app = typer.Typer(help="Serve a team over A2A (Agent2Agent).", no_args_is_help=True)


@a2a_app.command("serve")
def serve(
    target: Annotated[str, typer.Argument(help=(
        "The team: path/to/team.py:variable, or a YAML team (its entry agents, or --agent)."))],
    agent_names: Annotated[list[str] | None, typer.Option(
        "--agent", "-a", help="Serve this agent, by name (repeatable; the first is the "
        "default for messages that name none).")] = None,
    host: Annotated[str, typer.Option(
        "--host", help="The address to listen on (loopback unless you mean otherwise).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(
        "--port", min=0, max=65535, help="The port (0: any free one, printed).")] = 8001,
    db: Annotated[str | None, typer.Option(
        "--db", envvar="RELAYRACE_DB",
        help="Where sessions live: a SQLite file or a store URL (default: "
        ".relayrace/sessions.db).")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help=MODEL_HELP)] = None,
    max_turns: Annotated[int | None, typer.Option(
        "--max-turns", min=1, help="Model turns allowed per message.")] = None,
    name: Annotated[str | None, typer.Option(
        "--name", help="The agent card's name (default: the first agent's).")] = None,
    allowed_hosts: AllowedHosts = None,
    allowed_origins: AllowedOrigins = None,
    api_keys: ApiKeys = None,
) -> None:
    """Serve a team's entry agents over A2A: each message is a run in the session of its
    context; the agent card is at /.well-known/agent-card.json."""
    from ..connect.a2a_server import create_a2a_app, serve_a2a
    with errors():
        agents = entry_agents(target, agent_names)
        keys = api_keys_given(api_keys)
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()  # clients that come before the server starts wait in the backlog
        bound = sock.getsockname()[1]
        where = f"[{host}]" if ":" in host else host
        url = f"http://{where}:{bound}"
        app = create_a2a_app(agents, url=url, store=db, name=name,
                             model=resolve_model(model) if model else None,
                             max_turns=max_turns, api_keys=keys, allowed_hosts=allowed_hosts or (),
                             allowed_origins=allowed_origins or ())
        typer.echo(f"Serving {', '.join(a.name for a in agents)} over A2A at {url} "
                   f"(API keys: {'required' if keys else 'none'})", err=True)
        try:
            asyncio.run(serve_a2a(app, port=bound, host=host, sock=sock))
        except KeyboardInterrupt:
            pass
