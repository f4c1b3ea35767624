"""The served teams as graphs for the console (``GET /api/graph``): the same nodes and edges
as ``relayrace graph`` (`agent_graph`), with remote (A2A) agents and MCP toolsets marked."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request

from ..agents.agent import Agent
from ..agents.delegation import AgentTool
from ..config.graph import agent_graph
from ..connect.a2a import RemoteAgent
from ..connect.mcp import MCPServer

__all__ = ["router", "team_graph"]

router = APIRouter(prefix="/api")


def _agents(root: Agent[Any]) -> dict[str, Agent[Any]]:
    """Every agent of ``root``'s tree by name, as `agent_graph` follows it."""
    found: dict[str, Agent[Any]] = {}
    stack = [root]
    while stack:
        agent = stack.pop()
        if agent.name in found:
            continue
        found[agent.name] = agent
        stack.extend(agent.sub_agents)
        stack.extend(t.agent for t in agent.tools if isinstance(t, AgentTool))
        stack.extend(agent.specialists)
    return found


def team_graph(root: Agent[Any]) -> dict[str, Any]:
    """``root``'s graph as JSON: nodes (``remote``: reached over A2A) and edges, plus a node
    and a ``uses`` edge per toolset (``mcp``: an MCP server's)."""
    graph = agent_graph(root)
    agents = _agents(root)
    nodes = []
    for node in graph.nodes:
        row = asdict(node)
        agent = agents.get(node.name) if node.kind != "tool" else None
        row["remote"] = "a2a" if isinstance(agent, RemoteAgent) else ""
        nodes.append(row)
    edges = [asdict(e) for e in graph.edges]
    for agent in agents.values():
        for toolset in agent.toolsets:
            mcp = isinstance(toolset, MCPServer)
            name = f"toolset:{getattr(toolset, 'name', type(toolset).__name__)}"
            if all(n["name"] != name for n in nodes):
                nodes.append({"name": name, "kind": "toolset", "remote": "mcp" if mcp else "",
                              "detail": "MCP server" if mcp else "toolset",
                              "label": name.removeprefix("toolset:")})
            edges.append({"source": agent.name, "target": name, "kind": "tool", "label": ""})
    return {"agent": root.name, "nodes": nodes, "edges": edges}


@router.get("/graph", summary="Every served team as a graph (as `relayrace graph` draws it)")
async def graphs(request: Request) -> dict[str, Any]:
    served = request.app.state.relayrace.agents
    return {"teams": [team_graph(agent) for agent in served.values()]}
