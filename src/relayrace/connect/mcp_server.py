"""A relayrace team as an MCP server: each entry agent is a tool, each call a run.

``relayrace mcp serve TARGET`` uses this over stdio (or streamable HTTP on 127.0.0.1 with
``--port``), so any MCP client (an IDE, another framework) can use a team. The server is the
``mcp`` SDK's own (``FastMCP`` on 1.x, ``MCPServer`` on 2.x); needs ``relayrace[mcp]``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field
from pydantic_core import to_jsonable_python

from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..core.exceptions import UserError
from ..core.reports import parse_report
from ..models.interface import Model
from ..runner import Runner
from ..sessions import MemorySession, Session, SQLiteSession, new_session_id
from .asgi import Access, HostGuard, KeyGuard, serve_asgi
from .keys import Keys
from .mcp import _sdk

__all__ = ["mcp_server", "serve_http", "serve_stdio"]

_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def _server_class() -> Any:
    """The SDK's high-level server class: ``MCPServer`` on 2.x, ``FastMCP`` on 1.x."""
    _sdk()
    try:
        return importlib.import_module("mcp.server.mcpserver").MCPServer
    except ImportError:
        return importlib.import_module("mcp.server.fastmcp").FastMCP


def mcp_server(agents: Sequence[Agent[Any]], *, name: str = "relayrace",
               db: Path | None = None, model: Model | str | None = None,
               max_turns: int | None = None) -> Any:
    """An MCP server (the SDK's) offering each of ``agents`` as a tool named after it.

    A call ``{"task": "..."}`` runs the agent's team on the task in a new session (kept in the
    SQLite file ``db`` if given, where ``relayrace sessions`` shows it; else in memory). The
    result's text is the final answer, sent once (an ``output_type``'s data as JSON, and that
    data, when an object, as the structured content). The result's ``_meta["relayrace"]``
    holds the agent that gave it, the session id, and the delegation report when the answer
    ends with one. A
    run that fails, or stops for approval, is an ``isError`` result saying why (and, for a
    run that stopped, how it can go on).
    """
    if not agents:
        raise UserError("An MCP server needs at least one agent to offer.")
    names = [_INVALID.sub("_", a.name)[:64] for a in agents]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"Several agents would be offered as the MCP tool(s) {dup}; pick agents "
                        "whose names differ.")
    server = _server_class()(name)
    for agent, tool_name in zip(agents, names, strict=True):
        server.add_tool(_runner_of(agent, db, model, max_turns), name=tool_name,
                        description=agent.description or f"Ask the relayrace agent "
                        f"{agent.name!r} (and its team) to do a task; returns its answer.")
    return server


def _runner_of(agent: Agent[Any], db: Path | None, model: Model | str | None,
               max_turns: int | None) -> Any:
    types = _sdk().types

    def result(text: str, structured: Any = None, meta: dict[str, Any] | None = None,
               is_error: bool = False) -> Any:
        data: dict[str, Any] = {"content": [{"type": "text", "text": text}],
                                "isError": is_error}
        if structured is not None:
            data["structuredContent"] = structured
        if meta is not None:
            data["_meta"] = {"relayrace": meta}
        return types.CallToolResult.model_validate(data)

    async def run(task: str) -> Any:
        session_id = new_session_id()
        session: Session = SQLiteSession(session_id, db) if db is not None else MemorySession()
        try:
            outcome = await Runner.run(agent, task, session=session, model=model,
                                       max_turns=max_turns)
        except Exception as exc:  # the client is told; this server goes on serving
            return result(f"The run failed: {type(exc).__name__}: {exc}", is_error=True)
        if outcome.pending is not None:
            return result(_stopped(outcome.pending, session_id, db), is_error=True)
        output = outcome.final_output
        if isinstance(output, str):
            answer, data = output, None
        else:  # the agent's output_type: its data, as JSON
            data = to_jsonable_python(output)
            answer = json.dumps(data, ensure_ascii=False)
        report = parse_report(answer)
        reported = (report.key_findings or report.sources or report.gaps
                    or report.confidence != "unknown")
        # The answer is the text, once (the SDK's client refuses an HTTP event over 1 MiB);
        # an output_type's data is also the structured content, as MCP asks. Who answered,
        # where and the report are the result's metadata.
        return result(answer, data if isinstance(data, dict) else None, {
            "agent": outcome.last_agent.name, "session_id": session_id,
            "report": report.to_dict() if reported else None})

    # Set here, not written as annotations: the SDK reads them, and its types are imported
    # only when a server is made (relayrace imports without the mcp package).
    run.__annotations__ = {
        "task": Annotated[str, Field(description="What the agent should do, in plain words.")],
        "return": types.CallToolResult,
    }
    run.__name__ = f"run_{_INVALID.sub('_', agent.name)}"
    return run


def _stopped(pending: PendingRun, session_id: str, db: Path | None) -> str:
    """What a client is told of a run that stopped for a person's decision."""
    calls = ", ".join(f"{a.tool_name} ({a.call_id})" for a in pending.approvals)
    asked = "; ".join(q.question for q in pending.questions)
    waits = " and ".join(w for w in (f"a decision on {calls}" if calls else "",
                                     f"an answer to: {asked}" if asked else "") if w)
    if db is not None:
        return (f"The run stopped for {waits}; nothing was done yet. Someone with the server's "
                f"database decides with `relayrace resume TEAM --session {session_id} --db "
                f"{db}`.")
    return (f"The run stopped for {waits}, and nothing was done. This server keeps its "
            "sessions in memory, so the run cannot be resumed: ask for a task that needs no "
            "such decision, or have the server started with --db FILE, where a stopped run "
            "can be resumed.")


async def serve_stdio(server: Any) -> None:
    """Serve ``server`` (from :func:`mcp_server`) over this process's stdin and stdout."""
    await server.run_stdio_async()


async def serve_http(server: Any, *, port: int, host: str = "127.0.0.1",
                     sock: socket.socket | None = None, allowed_hosts: Sequence[str] = (),
                     allowed_origins: Sequence[str] = (), api_keys: Sequence[str] = ()) -> None:
    """Serve ``server`` over streamable HTTP at ``http://host:port/mcp`` until cancelled, then
    shut down (open streams get a second to end).

    ``sock`` is an already bound socket to serve on instead (e.g. one bound to port 0).
    Requests must name a loopback host, ``host`` or one of ``allowed_hosts`` as their Host,
    and a web page elsewhere than those or ``allowed_origins`` may not post (`HostGuard`).
    With ``api_keys``, every request needs one (``Authorization: Bearer KEY`` or
    ``X-API-Key: KEY``; else 401, `KeyGuard`). Each call runs in a session of its own, and MCP
    lists no sessions, so one key's calls never see another's.
    """
    access = Access([host, *allowed_hosts], allowed_origins)
    keys = Keys(api_keys)
    from mcp.server.transport_security import TransportSecuritySettings

    # relayrace's guard checks Host and Origin (the same for all its servers): the SDK's own
    # check, on by default for a loopback host, would refuse what --allowed-host allows.
    unchecked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if "transport_security" in inspect.signature(server.streamable_http_app).parameters:
        app = server.streamable_http_app(transport_security=unchecked)
    else:  # mcp 1.x reads it from the server's settings
        server.settings.transport_security = unchecked
        app = server.streamable_http_app()
    await serve_asgi(HostGuard(KeyGuard(app, keys), access), port=port, host=host, sock=sock)
