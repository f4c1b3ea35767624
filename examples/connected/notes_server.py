"""A small MCP server over stdio, written with the mcp SDK: a team's shared notes.

relayrace starts it as a child process (``MCPServer.stdio``); any MCP client could.
"""

from __future__ import annotations

import importlib

try:  # the SDK's high-level server: MCPServer on mcp 2.x, FastMCP on 1.x
    Server = importlib.import_module("mcp.server.mcpserver").MCPServer
except ImportError:
    Server = importlib.import_module("mcp.server.fastmcp").FastMCP

NOTES = {
    "handoff": "A handoff passes the live conversation to another agent in the same session.",
    "delegation": "A delegation runs a child agent on a bounded task; it reports back.",
    "mcp": "MCP servers offer tools to any client: stdio for local processes, HTTP for services.",
}

app = Server("notes")


@app.tool()
def search(query: str) -> list[str]:
    """The notes whose topic or text mentions ``query``."""
    q = query.lower()
    return [f"{topic}: {body}" for topic, body in NOTES.items() if q in topic or q in body.lower()]


@app.tool()
def topics() -> list[str]:
    """Every topic with a note."""
    return sorted(NOTES)


if __name__ == "__main__":
    app.run()
