"""A relayrace team connected to other processes over MCP, offline on scripted models.

    python examples/connected/main.py

The assistant uses two MCP servers:
- over stdio: ``notes_server.py``, an MCP server written with the mcp SDK (started as a child
  process on the first run that needs it);
- over streamable HTTP: another relayrace team, ``librarian.py``, served by
  ``relayrace mcp serve librarian.py:librarian --port PORT`` in its own process.

Each connection is one section below (``stdio_notes``, ``http_librarian``), so more kinds of
remote agents can be added beside them. Needs ``pip install 'relayrace[mcp]'``.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from relayrace import Agent, MCPServer
from relayrace.cli import print_run
from relayrace.testing import ScriptedModel, text, tool_call

HERE = Path(__file__).resolve().parent


def stdio_notes() -> MCPServer:
    """The notes server, a child process spoken to over its stdin and stdout."""
    return MCPServer.stdio(sys.executable, [str(HERE / "notes_server.py")], name="notes",
                           prefix="notes")


@contextmanager
def http_librarian() -> Iterator[MCPServer]:
    """The librarian team served over MCP by a second process, and a client for it."""
    with socket.socket() as probe:  # a free port of 127.0.0.1
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "relayrace.cli", "mcp", "serve",
               f"{HERE / 'librarian.py'}:librarian", "--port", str(port)]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:  # wait until it accepts connections, 30 s at most
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"The librarian server did not start: {' '.join(command)}")
                time.sleep(0.1)
        yield MCPServer.http(f"http://127.0.0.1:{port}/mcp", name="librarian")
    finally:
        process.terminate()
        process.wait(timeout=10)


def scripted_model() -> ScriptedModel:
    """The assistant's turns: search the notes, ask the librarian, answer."""
    return ScriptedModel([
        tool_call("notes_search", {"query": "handoff"}),
        tool_call("librarian", {"task": "books about agent handoffs"}),
        text("A handoff passes the live conversation to another agent. The librarian "
             "recommends 'Relay Patterns' (chapter 4) and 'Agents at Work' (chapter 7)."),
    ])


async def main() -> None:
    console = Console()
    model = scripted_model()
    with http_librarian() as librarian:
        notes = stdio_notes()
        assistant = Agent(
            "assistant", model=model, tools=[notes, librarian],
            instructions="Answer from the team's notes; ask the librarian for books.")
        async with notes, librarian:
            await print_run(assistant, "What is a handoff, and what should I read?",
                            console=console)
    model.assert_complete()


if __name__ == "__main__":
    asyncio.run(main())
