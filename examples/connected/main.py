"""A relayrace team connected to other processes over MCP and A2A, offline on scripted models.

    python examples/connected/main.py

The assistant uses two MCP servers:
- over stdio: ``notes_server.py``, an MCP server written with the mcp SDK (started as a child
  process on the first run that needs it);
- over streamable HTTP: another relayrace team, ``librarian.py``, served by
  ``relayrace mcp serve librarian.py:librarian --port PORT`` in its own process;

and a third relayrace team, ``billing.py``, served over A2A by
``relayrace a2a serve billing.py:billing --port PORT`` in its own process, which it reaches
both ways: as a tool (a delegation: it asks about an invoice) and as a handoff target (the
conversation moves to billing, which asks the user which invoice to refund, takes the answer
on the next turn over A2A, and gives control back when the refund is done).

Each connection is one section below (``stdio_notes``, ``http_librarian``, ``a2a_billing``).
Needs ``pip install 'relayrace[mcp,a2a]'``.
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
from tempfile import TemporaryDirectory

from rich.console import Console

from relayrace import Agent, MCPServer
from relayrace.cli import print_run
from relayrace.connect.a2a import RemoteAgent
from relayrace.sessions import MemorySession
from relayrace.testing import ScriptedModel, text, tool_call

HERE = Path(__file__).resolve().parent


def stdio_notes() -> MCPServer:
    """The notes server, a child process spoken to over its stdin and stdout."""
    return MCPServer.stdio(sys.executable, [str(HERE / "notes_server.py")], name="notes",
                           prefix="notes")


@contextmanager
def served(*command: str) -> Iterator[int]:
    """``relayrace COMMAND... --port PORT`` in a second process on a free port of 127.0.0.1,
    until the block ends: yields the port once it accepts connections (30 s at most)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-m", "relayrace.cli", *command, "--port", str(port)]
    process = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"The server did not start: {' '.join(argv)}")
                time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def http_librarian() -> Iterator[MCPServer]:
    """The librarian team served over MCP by a second process, and a client for it."""
    with served("mcp", "serve", f"{HERE / 'librarian.py'}:librarian") as port:
        yield MCPServer.http(f"http://127.0.0.1:{port}/mcp", name="librarian")


@contextmanager
def a2a_billing() -> Iterator[RemoteAgent]:
    """The billing team served over A2A by a third process (its sessions in a temporary
    SQLite file), and the remote agent that reaches it (named by its agent card)."""
    with TemporaryDirectory() as tmp, served(
            "a2a", "serve", f"{HERE / 'billing.py'}:billing", "--db", f"{tmp}/billing.db"
    ) as port:
        yield RemoteAgent(f"http://127.0.0.1:{port}")


def scripted_model() -> ScriptedModel:
    """The assistant's turns: search the notes, ask the librarian, ask billing (a delegation),
    answer; then hand a refund to billing, and answer once billing gives control back."""
    return ScriptedModel([
        tool_call("notes_search", {"query": "handoff"}),
        tool_call("librarian", {"task": "books about agent handoffs"}),
        tool_call("billing", {"query": "Is invoice INV-7 paid?"}),
        text("A handoff passes the live conversation to another agent. The librarian "
             "recommends 'Relay Patterns' (chapter 4) and 'Agents at Work' (chapter 7). "
             "Your invoice INV-7 is paid."),
        tool_call("transfer_to_billing", {"reason": "the user wants a refund"}),
        text("Billing has refunded INV-7; the money is back in 3 days."),
    ])


async def main() -> None:
    console = Console()
    model = scripted_model()
    with http_librarian() as librarian, a2a_billing() as billing:
        notes = stdio_notes()
        assistant = Agent(
            "assistant", model=model, tools=[notes, librarian, billing.as_tool(report=False)],
            sub_agents=[billing],
            instructions="Answer from the team's notes; ask the librarian for books; ask "
                         "billing about invoices, and hand refunds to billing.")
        session = MemorySession()
        async with notes, librarian:
            for said in ("What is a handoff, what should I read, and is INV-7 paid?",
                         "I want a refund, please.", "INV-7"):
                console.rule(f"user: {said}")
                await print_run(assistant, said, console=console, session=session,
                                trace=False)
    model.assert_complete()


if __name__ == "__main__":
    asyncio.run(main())
