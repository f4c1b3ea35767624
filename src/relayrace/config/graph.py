r"""Drawing a team: Mermaid and Graphviz text, from a YAML team's documents or any agent tree.

Nodes are agents (labelled with their name, pattern and model), teams, workflows and tools.
Edges say what they are: ``transfer`` (a handoff to a sub-agent; dashed ``transfer back`` to
the parent, dotted ``transfer`` between peers), ``returns`` (a task-mode agent giving control
back), ``delegates: <tool>`` (an agent tool) and ``delegates (meta-tool)`` (a specialist),
``uses`` (a tool), ``member`` and routing rules (labelled with the condition) of a team, and
numbered workflow ``step``\ s.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..agents.agent import Agent
from ..agents.delegation import AgentTool
from ..core.exceptions import UserError
from ..teams.routing import (
    AgentTarget,
    Always,
    ContextEquals,
    FromSpeaker,
    RevertToInitiator,
    RoundRobin,
    Rule,
    Stay,
    Target,
    TerminateTarget,
    ToolCalled,
)
from ..teams.team import Team
from ..teams.workflows import LoopAgent, ParallelAgent, SequentialAgent
from ._validate import ParsedDocument
from .models import AgentDocument, AgentToolSpec, PythonToolSpec, TeamDocument, WorkflowDocument

if TYPE_CHECKING:
    from ..models.interface import Model
    from .loader import LoadedTeam

__all__ = ["GraphEdge", "GraphNode", "TeamGraph", "agent_graph", "build_graph", "model_name",
           "to_dot", "to_mermaid", "write_svg"]

EdgeKind = Literal["handoff", "back", "peer", "return", "delegation", "specialist", "swarm",
                   "tool", "member", "route", "step"]


@dataclass(frozen=True, slots=True)
class GraphNode:
    """An agent, a team, a workflow, a tool, or a team's end."""

    name: str
    """The agent's name (``<team>:end`` for the end of a team's routing, ``tool:<name>``)."""
    kind: Literal["agent", "team", "workflow", "tool", "end"]
    """What it is."""
    detail: str
    """The agent's pattern and model, ``team``, the workflow type, or ``tool``."""
    label: str = ""
    """What the picture names it, when not ``name`` (a tool's own name)."""


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """A reference from one node to another."""

    source: str
    """Where the edge starts."""
    target: str
    """Where it ends."""
    kind: EdgeKind
    """What kind of reference it is."""
    label: str = ""
    """The tool name, the rule condition, or the step number."""


@dataclass(frozen=True, slots=True)
class TeamGraph:
    """Everything a loaded team's picture shows."""

    nodes: tuple[GraphNode, ...]
    """Every node, in document order."""
    edges: tuple[GraphEdge, ...]
    """Every edge."""


def _condition(rule: Rule) -> str:
    c = rule.condition
    text = ("always" if isinstance(c, Always)
            else f"from {c.agent}" if isinstance(c, FromSpeaker)
            else f"called {c.name}" if isinstance(c, ToolCalled)
            else f"{c.key} == {c.value!r}" if isinstance(c, ContextEquals) else str(c))
    return f"{text} (p{rule.priority})" if rule.priority else text


def _targets(team: str, target: Target, initial: str, speaker: str) -> list[str]:
    if isinstance(target, AgentTarget):
        return [target.agent]
    if isinstance(target, TerminateTarget):
        return [f"{team}:end"]
    if isinstance(target, RevertToInitiator):
        return [initial]
    if isinstance(target, Stay):
        return [speaker]
    if isinstance(target, RoundRobin):
        return list(target.agents)
    return []


def _team_edges(doc: ParsedDocument, model: TeamDocument) -> Iterable[GraphEdge]:
    name, spec = model.metadata.name, model.spec
    for member in spec.agents:
        yield GraphEdge(name, member, "member")
    initial = spec.initial or spec.agents[0]
    for rule in doc.rules:
        cond = rule.condition
        speaker = cond.agent if isinstance(cond, FromSpeaker) else name
        for target in _targets(name, rule.target, initial, speaker):
            yield GraphEdge(speaker, target, "route", _condition(rule))


def _tool_node(name: str) -> GraphNode:
    return GraphNode(f"tool:{name}", "tool", "tool", name)


def _agent_edges(model: AgentDocument, specs: dict[str, AgentDocument]) -> Iterable[GraphEdge]:
    name, spec = model.metadata.name, model.spec
    for child in spec.sub_agents:
        yield GraphEdge(name, child, "handoff")
        child_doc = specs.get(child)
        if child_doc is None:
            continue
        policy = child_doc.spec.transfer_policy
        if child_doc.spec.mode == "task":
            yield GraphEdge(child, name, "return")
        if policy.to_parent:
            yield GraphEdge(child, name, "back")
        if policy.to_peers:
            for peer in spec.sub_agents:
                if peer != child:
                    yield GraphEdge(child, peer, "peer")
    swarm = spec.orchestration.pattern == "swarm"
    for tool in spec.tools:
        if isinstance(tool, AgentToolSpec):
            yield GraphEdge(name, tool.agent, "swarm" if swarm else "delegation",
                            tool.name or tool.agent)
        elif isinstance(tool, PythonToolSpec):
            yield GraphEdge(name, _tool_node(_python_tool_name(tool)).name, "tool")
    for specialist in spec.specialists:
        yield GraphEdge(name, specialist, "specialist")
    if spec.chain is not None:  # a link runs as a delegated child once this agent answered
        for link in spec.chain.on_complete:
            yield GraphEdge(name, link.agent, "delegation",
                            "chain: default" if link.default else "chain")


def _python_tool_name(spec: PythonToolSpec) -> str:
    return spec.name or spec.function.rpartition(":")[2].rpartition(".")[2]


def _yaml_detail(model: AgentDocument) -> str:
    primary = model.spec.model.primary if model.spec.model is not None else None
    about: list[str] = [model.spec.orchestration.pattern]
    if model.spec.mode != "chat":
        about.append(model.spec.mode)
    if primary is not None:
        about.append(f"{primary.provider}:{primary.model}")
    return " · ".join(about)


def build_graph(documents: Sequence[ParsedDocument]) -> TeamGraph:
    """The picture of ``documents`` (already checked: every name they use exists)."""
    nodes: list[GraphNode] = []
    edges: list[GraphEdge] = []
    specs = {d.name: d.model for d in documents if isinstance(d.model, AgentDocument)}
    for doc in documents:
        model = doc.model
        if isinstance(model, AgentDocument):
            nodes.append(GraphNode(doc.name, "agent", _yaml_detail(model)))
            edges.extend(_agent_edges(model, specs))
            nodes.extend(_tool_node(_python_tool_name(t)) for t in model.spec.tools
                         if isinstance(t, PythonToolSpec))
        elif isinstance(model, TeamDocument):
            nodes.append(GraphNode(doc.name, "team", "team"))
            team_edges = list(_team_edges(doc, model))
            if any(e.target == f"{doc.name}:end" for e in team_edges):
                nodes.append(GraphNode(f"{doc.name}:end", "end", "end"))
            edges.extend(team_edges)
        elif isinstance(model, WorkflowDocument):
            nodes.append(GraphNode(doc.name, "workflow", model.spec.type))
            edges.extend(GraphEdge(doc.name, step, "step", str(i))
                         for i, step in enumerate(model.spec.steps, 1))
    return TeamGraph(tuple(dict.fromkeys(nodes)), tuple(dict.fromkeys(edges)))


# -- any agent tree ---------------------------------------------------------------------------


def model_name(agent: Agent[Any], override: Model | str | None = None) -> str:
    """The model ``agent`` runs on: ``override`` (one model for every agent, as
    ``Runner.run``'s ``model=``) when given, else its own; ``""`` for a person, a workflow or
    an agent with none."""
    if agent.is_human or agent.is_composite:
        return ""
    model = override if override is not None else agent.model
    return "" if model is None else model if isinstance(model, str) else model.name


def _node(agent: Agent[Any], override: Model | str | None) -> GraphNode:
    if isinstance(agent, Team):
        return GraphNode(agent.name, "team", "team")
    workflow = ("sequential" if isinstance(agent, SequentialAgent) else "parallel"
                if isinstance(agent, ParallelAgent) else "loop"
                if isinstance(agent, LoopAgent) else "")
    if agent.is_composite:
        return GraphNode(agent.name, "workflow", workflow or type(agent).__name__)
    if agent.is_human:
        return GraphNode(agent.name, "agent", "a person")
    about = [agent.pattern] + ([agent.mode] if agent.mode != "chat" else [])
    return GraphNode(agent.name, "agent",
                     " · ".join(about + [model_name(agent, override)]).strip(" ·"))


def _member_edges(agent: Agent[Any]) -> Iterable[GraphEdge]:
    if isinstance(agent, Team):
        for member in agent.sub_agents:
            yield GraphEdge(agent.name, member.name, "member")
        for rule in agent.rules:
            cond = rule.condition
            speaker = cond.agent if isinstance(cond, FromSpeaker) else agent.name
            for target in _targets(agent.name, rule.target, agent.initial, speaker):
                yield GraphEdge(speaker, target, "route", _condition(rule))
    elif isinstance(agent, ParallelAgent):
        yield from (GraphEdge(agent.name, b.name, "member", "branch") for b in agent.sub_agents)
    else:
        yield from (GraphEdge(agent.name, s.name, "step", str(i))
                    for i, s in enumerate(agent.sub_agents, 1))


def _handoff_edges(agent: Agent[Any]) -> Iterable[GraphEdge]:
    swarm = agent.pattern == "swarm"
    for h in agent.handoffs:
        child = h.agent
        if swarm:
            yield GraphEdge(agent.name, child.name, "member")
        else:
            yield GraphEdge(agent.name, child.name, "handoff", h.tool_name or "")
        if child.mode == "task":
            yield GraphEdge(child.name, agent.name, "return")
        if child.transfer_policy.to_parent:
            yield GraphEdge(child.name, agent.name, "back")
        if child.transfer_policy.to_peers:
            yield from (GraphEdge(child.name, peer.agent.name, "peer", peer.tool_name or "")
                        for peer in agent.handoffs if peer.agent is not child)


def agent_graph(agent: Agent[Any], *, model: Model | str | None = None) -> TeamGraph:
    """The picture of ``agent``'s tree: what it hands off to, delegates to and uses.

    Works on any agent, team or workflow built in Python (or loaded from YAML): sub-agents,
    agent tools, specialists and their children are followed; each agent is drawn once.
    Each agent's detail names its model; ``model`` is one for every agent (as a run's
    ``model=`` overrides theirs); a person (``human(...)``) is said to be one.
    """
    nodes: list[GraphNode] = []
    edges: list[GraphEdge] = []
    seen: set[int] = set()
    stack = [agent]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        nodes.append(_node(current, model))
        if current.is_composite:
            edges.extend(_member_edges(current))
        else:
            edges.extend(_handoff_edges(current))
        children = list(current.sub_agents)
        for tool in current.tools:
            if isinstance(tool, AgentTool):
                edges.append(GraphEdge(current.name, tool.agent.name, "delegation", tool.name))
                children.append(tool.agent)
            elif not tool.delegates:  # meta-tools are drawn as the specialists they reach
                tool_node = _tool_node(tool.name)
                nodes.append(tool_node)
                edges.append(GraphEdge(current.name, tool_node.name, "tool"))
        for specialist in current.specialists:
            edges.append(GraphEdge(current.name, specialist.name, "specialist"))
            children.append(specialist)
        stack.extend(reversed(children))
    nodes.extend(GraphNode(e.target, "end", "end") for e in edges
                 if e.kind == "route" and e.target.endswith(":end"))
    return TeamGraph(tuple(dict.fromkeys(nodes)), tuple(dict.fromkeys(edges)))


def _graph(team: LoadedTeam | TeamGraph | Agent[Any]) -> TeamGraph:
    if isinstance(team, TeamGraph):
        return team
    return agent_graph(team) if isinstance(team, Agent) else team.graph


# -- rendering --------------------------------------------------------------------------------


def _ids(graph: TeamGraph) -> dict[str, str]:
    ids: dict[str, str] = {}
    for node in graph.nodes:
        base = re.sub(r"\W", "_", node.name) or "node"
        candidate, n = base, 2
        while candidate in ids.values():
            candidate, n = f"{base}_{n}", n + 1
        ids[node.name] = candidate
    return ids


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


_MERMAID_SHAPES = {"agent": ('["', '"]'), "team": ('{{"', '"}}'), "workflow": ('[/"', '"/]'),
                   "tool": ('(["', '"])'), "end": ('(("', '"))')}
_MERMAID_ARROWS: dict[EdgeKind, str] = {
    "handoff": "-->", "back": "-.->", "peer": "-.->", "return": "-.->", "delegation": "==>",
    "specialist": "==>", "swarm": "-.->", "tool": "-->", "member": "---", "route": "-->",
    "step": "-->",
}
_EDGE_LABELS: dict[EdgeKind, tuple[str, str]] = {  # (without a label, with one: {} is the label)
    "handoff": ("transfer", "transfer: {}"), "back": ("transfer back", "transfer back: {}"),
    "peer": ("transfer", "transfer: {}"), "return": ("returns", "returns: {}"),
    "delegation": ("delegates", "delegates: {}"),
    "specialist": ("delegates (meta-tool)", "delegates (meta-tool): {}"),
    "swarm": ("transfer", "transfer: {}"), "tool": ("uses", "uses: {}"),
    "member": ("member", "{}"), "route": ("", "{}"), "step": ("step", "step {}"),
}


def _edge_label(edge: GraphEdge) -> str:
    plain, labelled = _EDGE_LABELS[edge.kind]
    return labelled.format(edge.label) if edge.label else plain


def _node_label(node: GraphNode, separator: str) -> str:
    if node.kind == "end":
        return "end"
    name = node.label or node.name
    return name if node.kind == "tool" else f"{name}{separator}{node.detail}"


def to_mermaid(team: LoadedTeam | TeamGraph | Agent[Any]) -> str:
    """A Mermaid ``flowchart`` of a loaded YAML team, or of any agent's tree."""
    graph = _graph(team)
    ids = _ids(graph)
    lines = ["flowchart TD"]
    for node in graph.nodes:
        left, right = _MERMAID_SHAPES[node.kind]
        label = _node_label(node, "<br/><i>") + ("</i>" if node.kind in
                                                  ("agent", "team", "workflow") else "")
        lines.append(f"    {ids[node.name]}{left}{_mermaid_text(label)}{right}")
    for edge in graph.edges:
        label = _edge_label(edge)
        text = f'|"{_mermaid_text(label)}"|' if label else ""
        source, target = ids.get(edge.source, edge.source), ids.get(edge.target, edge.target)
        lines.append(f"    {source} {_MERMAID_ARROWS[edge.kind]}{text} {target}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_DOT_NODES = {"agent": "shape=box, style=rounded", "team": "shape=hexagon",
              "workflow": "shape=parallelogram", "tool": "shape=ellipse, style=dashed",
              "end": "shape=doublecircle"}
_DOT_EDGES: dict[EdgeKind, str] = {
    "handoff": "", "back": "style=dashed", "peer": "style=dotted", "return": "style=dashed",
    "delegation": "penwidth=2", "specialist": "penwidth=2, style=bold",
    "swarm": "style=dashed", "tool": "color=gray", "member": "arrowhead=none, color=gray",
    "route": "color=blue", "step": "",
}


def to_dot(team: LoadedTeam | TeamGraph | Agent[Any]) -> str:
    """A Graphviz ``digraph`` of a loaded YAML team, or of any agent's tree."""
    graph = _graph(team)
    lines = ["digraph team {", "    rankdir=TB;", '    node [fontname="Helvetica"];',
             '    edge [fontname="Helvetica", fontsize=10];']
    for node in graph.nodes:
        label = _node_label(node, "\n")
        lines.append(f"    {_dot_text(node.name)} [label={_dot_text(label)}, "
                     f"{_DOT_NODES[node.kind]}];")
    for edge in graph.edges:
        label = _edge_label(edge)
        attrs = [a for a in (f"label={_dot_text(label)}" if label else "",
                             _DOT_EDGES[edge.kind]) if a]
        lines.append(f"    {_dot_text(edge.source)} -> {_dot_text(edge.target)}"
                     + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_svg(team: LoadedTeam | TeamGraph | Agent[Any], path: str | Path) -> bool:
    """Render the team to an SVG file with Graphviz ``dot``; ``False`` if it is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        return False
    done = subprocess.run([dot, "-Tsvg", "-o", str(path)], input=to_dot(team), text=True,
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise UserError(f"Graphviz dot failed ({done.returncode}): {done.stderr.strip()}")
    return True
