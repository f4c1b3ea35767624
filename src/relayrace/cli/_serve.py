"""``relayrace serve``: a team behind the HTTP API, the OpenAI-compatible endpoint and the
web console."""

from __future__ import annotations

import errno
import gc
import logging
import signal
import socket
from pathlib import Path
from typing import Annotated

import typer

from ..core.exceptions import UserError
from ._common import MODEL_HELP, errors
from ._mcp import entry_agents
from ._options import AllowedHosts, AllowedOrigins, ApiKeys, api_keys_given
from ._target import describe_models, resolve_model

__all__ = ["serve"]


def serve(
    target: Annotated[str, typer.Argument(help=(
        "The team: path/to/team.py:variable, or a YAML team (its entry agents, or --agent)."))],
    agent_names: Annotated[list[str] | None, typer.Option(
        "--agent", "-a", help="Serve this agent, by name (repeatable; the first is the "
        "default).")] = None,
    host: Annotated[str, typer.Option(
        "--host", help="The address to listen on (loopback unless you mean otherwise).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    db: Annotated[str | None, typer.Option(
        "--db", envvar="RELAYRACE_DB", help="Where sessions live: a SQLite file or a store URL "
        "(default: .relayrace/sessions.db, the CLI's).")] = None,
    api_keys: ApiKeys = None,
    cors: Annotated[list[str] | None, typer.Option(
        "--cors-origin", help="Let browsers call from this origin (repeatable).")] = None,
    rate_limit: Annotated[str | None, typer.Option(
        "--rate-limit", help="Requests per key: N/s, N/m or N/h (e.g. 600/m).")] = None,
    max_body: Annotated[int, typer.Option(
        "--max-body", min=1, help="Largest request body, in bytes.")] = 1_000_000,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help=MODEL_HELP)] = None,
    max_turns: Annotated[int | None, typer.Option(
        "--max-turns", min=1, help="Model turns allowed per run.")] = None,
    otel: Annotated[bool, typer.Option(
        "--otel", help="Export runs to OpenTelemetry (a request's traceparent is their "
        "parent).")] = False,
    match_transcripts: Annotated[bool, typer.Option(
        "--match-transcripts", help="On /v1/chat/completions, let a request without an "
        "X-Relayrace-Session header go on with the one session whose conversation it resends "
        "(off: such a request starts a new session). Only for a server with one user per "
        "key.")] = False,
    durable: Annotated[bool, typer.Option(
        "--durable", help="Queue the API's runs for `relayrace worker` processes on the same "
        "--db (DBOS) instead of running them in the server.")] = False,
    allowed_hosts: AllowedHosts = None,
    allowed_origins: AllowedOrigins = None,
    idempotency_window: Annotated[float, typer.Option(
        "--idempotency-window", min=1, help="Seconds a request's Idempotency-Key is kept: a "
        "retry within them gets the first response and starts no second run.")] = 86_400.0,
    prices: Annotated[str | None, typer.Option(
        "--prices", help="A YAML price table (per model: input, output, cached_input per "
        "million tokens; see docs/console.md): the console shows costs.")] = None,
    eval_cases: Annotated[Path | None, typer.Option(
        "--eval-cases", help="The case file the console's \"Save as eval case\" adds cases "
        "to (without it the console only shows the case's YAML).")] = None,
    user: Annotated[str, typer.Option(
        "--user", help="Who decides approvals on a server without API keys, as the session "
        "log records it (a request's X-Relayrace-User header says otherwise; with keys, the "
        "key's name, from --api-key NAME:KEY, does).")] = "",
) -> None:
    """Serve a team: the sessions and runs API, OpenAI-compatible chat completions, and the
    web console at http://HOST:PORT/."""
    with errors():
        import uvicorn

        from ..server import create_app

        keys = api_keys_given(api_keys)
        agents = entry_agents(target, agent_names)
        override = resolve_model(model) if model else None
        app = create_app(agents, store=db, api_keys=keys, cors_origins=cors or (),
                         max_body_bytes=max_body, rate_limit=rate_limit,
                         model=override, max_turns=max_turns,
                         otel=otel, durable=durable, idempotency_window=idempotency_window,
                         match_transcripts=match_transcripts,
                         allowed_hosts=[host, *(allowed_hosts or ())],
                         allowed_origins=allowed_origins or (), prices=prices,
                         eval_cases=eval_cases, user=user)
        # Bound before the "Serving" line: a port in use is said, with one to try instead.
        with listen(host, port) as listening:
            logging.basicConfig(level=logging.INFO, format="%(message)s")
            where = f"[{host}]" if ":" in host else host
            url = f"http://{where}:{listening.getsockname()[1]}/"
            names = ", ".join(a.name for a in agents)
            typer.echo(f"Serving {names} at {url} (API keys: {'required' if keys else 'none'})",
                       err=True)
            for agent in agents:  # as `relayrace run` says it
                typer.echo(f"{agent.name}: {describe_models(agent, model=override)}", err=True)
            # What was loaded to start is kept out of the collector's later passes: a full
            # collection of a busy server then walks the requests' objects, not the modules'.
            gc.freeze()
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning",
                                                   timeout_graceful_shutdown=2))
            stopped: list[int] = []
            # uvicorn shuts down gracefully on SIGTERM, then raises it again for the handler it
            # found: this one, which notes it instead of ending the process unannounced.
            previous = signal.signal(signal.SIGTERM, lambda sig, _: stopped.append(sig))
            try:
                server.run(sockets=[listening])
            finally:
                signal.signal(signal.SIGTERM, previous)
            if stopped:
                typer.echo(f"Stopped serving {names} at {url} (SIGTERM).", err=True)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for the server to listen on.

    Raises ``UserError`` when the port is taken, naming a free one to try instead.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UserError(f"port {port} is in use; try --port {_free_port(family, host, port)}"
                            ".") from None
        raise UserError(f"Cannot listen on {host}:{port}: {exc.strerror or exc}; check --host "
                        "and --port.") from None
    return sock


def _free_port(family: socket.AddressFamily, host: str, taken: int) -> int:
    """The first port after ``taken`` that ``host`` can bind now (0 if none of the next 100)."""
    for port in range(taken + 1, min(taken + 101, 65536)):
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    return 0
