"""The served teams as graphs for the console (``GET /api/graph``): the same nodes and edges
as ``relayrace graph`` (`agent_graph`), with what the console marks: the model each agent
really runs on (the server's ``--model`` overrides every agent's), people (``human(...)``),
calls that wait for a person's approval, remote (A2A) agents and MCP toolsets."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request

from ..agents.agent import Agent
from ..agents.delegation import AgentTool
from ..config.graph import agent_graph, model_name
from ..connect.a2a import RemoteAgent
from ..connect.mcp import MCPServer

__all__ = ["router", "team_agents", "team_graph", "tools_offered"]

router = APIRouter(prefix="/api")


def team_agents(root: Agent[Any]) -> dict[str, Agent[Any]]:
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


def tools_offered(agent: Agent[Any]) -> list[dict[str, Any]]:
    """The tools ``agent`` declares to its model: its tools, its transfers and its toolsets
    (whose tools are listed when the run lists them), each with whether a call waits for a
    person's approval."""
    offered = [{"name": t.name, "description": t.description,
                "approval": t.requires_approval} for t in agent.tools]
    if not agent.is_human and not agent.is_composite:
        handoffs = agent.handoff_set()
        offered += [{"name": d.name, "description": d.description,
                     "approval": bool(h is not None and h.requires_approval)}
                    for d in handoffs.definitions
                    for h in [handoffs.by_tool.get(d.name)]]
    offered += [{"name": f"toolset:{getattr(s, 'name', type(s).__name__)}",
                 "description": "MCP server" if isinstance(s, MCPServer) else "toolset",
                 "approval": False} for s in agent.toolsets]
    return offered


def team_graph(root: Agent[Any], *, model: Any = None) -> dict[str, Any]:
    """``root``'s graph as JSON: nodes and edges, plus a node and a ``uses`` edge per toolset.

    An agent node says the ``model`` it runs on (``model``: the server's override of every
    agent's) and whether it is a person (``human``); a tool node whether its calls wait for
    approval (``approval``); ``remote``: ``a2a`` for an agent reached over A2A, ``mcp`` for
    an MCP server's toolset."""
    graph = agent_graph(root, model=model)
    agents = team_agents(root)
    gated = {t.name for a in agents.values() for t in a.tools if t.requires_approval}
    nodes = []
    for node in graph.nodes:
        row = asdict(node)
        agent = agents.get(node.name) if node.kind != "tool" else None
        row["remote"] = "a2a" if isinstance(agent, RemoteAgent) else ""
        row["human"] = agent is not None and agent.is_human
        row["approval"] = node.kind == "tool" and node.name.removeprefix("tool:") in gated
        row["model"] = model_name(agent, model) if agent is not None else ""
        nodes.append(row)
    edges = [asdict(e) for e in graph.edges]
    for agent in agents.values():
        for toolset in agent.toolsets:
            mcp = isinstance(toolset, MCPServer)
            name = f"toolset:{getattr(toolset, 'name', type(toolset).__name__)}"
            if all(n["name"] != name for n in nodes):
                nodes.append({"name": name, "kind": "toolset", "remote": "mcp" if mcp else "",
                              "detail": "MCP server" if mcp else "toolset", "human": False,
                              "approval": False, "label": name.removeprefix("toolset:")})
            edges.append({"source": agent.name, "target": name, "kind": "tool", "label": ""})
    return {"agent": root.name, "nodes": nodes, "edges": edges}


@router.get("/graph", summary="Every served team as a graph (as `relayrace graph` draws it), "
            "with the model each agent runs on")
async def graphs(request: Request) -> dict[str, Any]:
    server = request.app.state.relayrace
    return {"teams": [team_graph(agent, model=server.runs.model)
                      for agent in server.agents.values()]}
