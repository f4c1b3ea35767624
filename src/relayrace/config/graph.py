"""Drawing a loaded team: Mermaid and Graphviz text from the documents' references.

Nodes are agents (labelled with their pattern), teams and workflows. Edges are handoffs
(sub-agents, dashed transfers back to the parent, dotted peer transfers), delegations (agent
tools, labelled with the tool name, and specialists), team membership and routing rules
(labelled with the condition), and workflow steps (numbered).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..exceptions import UserError
from ..routing import (
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
from ._validate import ParsedDocument
from .models import AgentDocument, AgentToolSpec, TeamDocument, WorkflowDocument

if TYPE_CHECKING:
    from .loader import LoadedTeam

__all__ = ["GraphEdge", "GraphNode", "TeamGraph", "build_graph", "to_dot", "to_mermaid",
           "write_svg"]

EdgeKind = Literal["handoff", "back", "peer", "delegation", "specialist", "swarm", "member",
                   "route", "step"]


@dataclass(frozen=True, slots=True)
class GraphNode:
    """An agent, a team, a workflow, or a team's end."""

    name: str
    """The document name (``<team>:end`` for the end of a team's routing)."""
    kind: Literal["agent", "team", "workflow", "end"]
    """What it is."""
    detail: str
    """The agent's pattern, ``team``, or the workflow type."""


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


def _agent_edges(model: AgentDocument, specs: dict[str, AgentDocument]) -> Iterable[GraphEdge]:
    name, spec = model.metadata.name, model.spec
    for child in spec.sub_agents:
        yield GraphEdge(name, child, "handoff")
        child_doc = specs.get(child)
        if child_doc is None:
            continue
        policy = child_doc.spec.transfer_policy
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
    for specialist in spec.specialists:
        yield GraphEdge(name, specialist, "specialist", "specialist")


def build_graph(documents: Sequence[ParsedDocument]) -> TeamGraph:
    """The picture of ``documents`` (already checked: every name they use exists)."""
    nodes: list[GraphNode] = []
    edges: list[GraphEdge] = []
    specs = {d.name: d.model for d in documents if isinstance(d.model, AgentDocument)}
    for doc in documents:
        model = doc.model
        if isinstance(model, AgentDocument):
            nodes.append(GraphNode(doc.name, "agent", model.spec.orchestration.pattern))
            edges.extend(_agent_edges(model, specs))
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
    return TeamGraph(tuple(nodes), tuple(dict.fromkeys(edges)))


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
                   "end": ('(("', '"))')}
_MERMAID_ARROWS: dict[EdgeKind, str] = {
    "handoff": "-->", "back": "-.->", "peer": "-.->", "delegation": "==>", "specialist": "==>",
    "swarm": "-.->", "member": "---", "route": "-->", "step": "-->",
}
_DEFAULT_LABELS: dict[EdgeKind, str] = {"handoff": "handoff", "back": "back", "peer": "peer",
                                        "member": "member", "swarm": "handoff"}


def to_mermaid(team: LoadedTeam | TeamGraph) -> str:
    """A Mermaid ``flowchart`` of the team."""
    graph = team if isinstance(team, TeamGraph) else team.graph
    ids = _ids(graph)
    lines = ["flowchart TD"]
    for node in graph.nodes:
        left, right = _MERMAID_SHAPES[node.kind]
        label = "end" if node.kind == "end" else f"{node.name}<br/><i>{node.detail}</i>"
        lines.append(f"    {ids[node.name]}{left}{_mermaid_text(label)}{right}")
    for edge in graph.edges:
        label = edge.label or _DEFAULT_LABELS.get(edge.kind, "")
        if edge.kind == "swarm":
            label = f"handoff: {label}"
        text = f'|"{_mermaid_text(label)}"|' if label else ""
        source, target = ids.get(edge.source, edge.source), ids.get(edge.target, edge.target)
        lines.append(f"    {source} {_MERMAID_ARROWS[edge.kind]}{text} {target}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_DOT_NODES = {"agent": "shape=box, style=rounded", "team": "shape=hexagon",
              "workflow": "shape=parallelogram", "end": "shape=doublecircle"}
_DOT_EDGES: dict[EdgeKind, str] = {
    "handoff": "", "back": "style=dashed", "peer": "style=dotted, dir=both",
    "delegation": "penwidth=2", "specialist": "penwidth=2, style=bold",
    "swarm": "style=dashed", "member": "arrowhead=none, color=gray", "route": "color=blue",
    "step": "",
}


def to_dot(team: LoadedTeam | TeamGraph) -> str:
    """A Graphviz ``digraph`` of the team."""
    graph = team if isinstance(team, TeamGraph) else team.graph
    lines = ["digraph team {", "    rankdir=TB;", '    node [fontname="Helvetica"];',
             '    edge [fontname="Helvetica", fontsize=10];']
    for node in graph.nodes:
        label = "end" if node.kind == "end" else f"{node.name}\n{node.detail}"
        lines.append(f"    {_dot_text(node.name)} [label={_dot_text(label)}, "
                     f"{_DOT_NODES[node.kind]}];")
    for edge in graph.edges:
        label = edge.label or _DEFAULT_LABELS.get(edge.kind, "")
        attrs = [a for a in (f"label={_dot_text(label)}" if label else "",
                             _DOT_EDGES[edge.kind]) if a]
        lines.append(f"    {_dot_text(edge.source)} -> {_dot_text(edge.target)}"
                     + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_svg(team: LoadedTeam | TeamGraph, path: str | Path) -> bool:
    """Render the team to an SVG file with Graphviz ``dot``; ``False`` if it is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        return False
    done = subprocess.run([dot, "-Tsvg", "-o", str(path)], input=to_dot(team), text=True,
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise UserError(f"Graphviz dot failed ({done.returncode}): {done.stderr.strip()}")
    return True
