"""What the ``relayrace validate`` and ``relayrace graph`` commands do, as plain functions."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..agents.agent import Agent
from ..core.exceptions import RelayraceError, UserError
from ..models import Model
from ..teams.patterns import ParallelFanOut, Pipeline, PlanAndExecute
from ..teams.workflows import Chain
from .graph import to_mermaid, write_svg
from .loader import LoadedTeam, load_team

__all__ = ["describe", "drawing", "graph", "svg_file", "validate"]


def _model_name(model: Model | str | None) -> str:
    if model is None:
        return "(no model)"
    return model if isinstance(model, str) else model.name


def _summary(agent: Agent[Any]) -> str:
    if isinstance(agent, Chain):
        return (_summary(agent.agent) + f"; then {agent.link_mode}: "
                + ", ".join(link.agent.name for link in agent.links))
    if isinstance(agent, PlanAndExecute | ParallelFanOut | Pipeline):
        return f"{agent.label}: " + _summary(agent.worker)
    if agent.is_composite:
        return "members: " + ", ".join(a.name for a in agent.sub_agents)
    if agent.pattern == "swarm":
        return "swarm of " + ", ".join(a.name for a in agent.sub_agents)
    parts = [agent.pattern, _model_name(agent.model)]
    if agent.tools:
        parts.append("tools: " + ", ".join(t.name for t in agent.tools))
    if agent.toolsets:
        parts.append("toolsets: " + ", ".join(t.label for t in agent.toolsets))
    if agent.sub_agents:
        parts.append("sub-agents: " + ", ".join(a.name for a in agent.sub_agents))
    return "; ".join(parts)


def describe(team: LoadedTeam) -> str:
    """A plain-text account of a loaded team: documents, agents, entry points, warnings."""
    lines = [f"{team.path}: {len(team.documents)} documents"]
    width = max(len(d.name) for d in team.documents)
    for doc in team.documents:
        lines.append(f"  {doc.kind:<8} {doc.name:<{width}}  {doc.file}:{doc.line}  "
                     f"{_summary(team[doc.name])}")
    lines.append("Entry points: " + (", ".join(team.entry_points) or "(none)"))
    if team.warnings:
        lines.append(f"{len(team.warnings)} warnings:")
        lines.extend(f"  {w}" for w in team.warnings)
    else:
        lines.append("No warnings.")
    return "\n".join(lines)


def validate(path: str | Path) -> tuple[bool, str]:
    """Load the team at ``path`` without running it: ``(True, report)`` or ``(False, errors)``.

    Warnings do not fail validation; they are listed in the report.
    """
    try:
        team = load_team(path)
    except RelayraceError as exc:
        notes = "".join(f"\n{n}" for n in getattr(exc, "__notes__", ()))
        return False, f"{path}: invalid team definition:\n{exc}{notes}"
    return True, describe(team)


def graph(target: str | Path, svg_out: Path | None = None) -> str:
    """The team ``target`` names as a Mermaid flowchart; with ``svg_out``, also an SVG.

    ``target`` is a YAML team (a directory or one file) or ``path/to/team.py:agent``, as
    ``relayrace run`` takes. An SVG needs Graphviz's ``dot``: without it nothing is drawn and
    ``UserError`` says how to install it. Raises ``ConfigError`` if a YAML team does not load.
    """
    if svg_out is not None:
        _need_dot(svg_out)
    drawn = drawing(target)
    if svg_out is not None:
        svg_file(drawn, svg_out)
    return to_mermaid(drawn)


def drawing(target: str | Path) -> LoadedTeam | Agent[Any]:
    """What ``graph`` draws of ``target``: a loaded YAML team, or the agent a
    ``path/to/team.py:agent`` names."""
    text = str(target)
    if text.endswith(".py") or ".py:" in text:
        from ..cli._target import resolve_target  # the CLI's own resolution of file.py:agent

        return resolve_target(text)
    return load_team(text)


def svg_file(drawn: LoadedTeam | Agent[Any], svg_out: Path) -> None:
    """Write ``drawn`` as an SVG; ``UserError`` saying how to get Graphviz's ``dot`` if it
    is not installed."""
    _need_dot(svg_out)
    write_svg(drawn, svg_out)


def _need_dot(svg_out: Path) -> None:
    if shutil.which("dot") is None:
        raise UserError(
            f"{svg_out} cannot be written: --svg needs Graphviz's 'dot', which is not installed. "
            "Install Graphviz (apt install graphviz, brew install graphviz, or "
            "https://graphviz.org/download/); meanwhile the Mermaid text `relayrace graph` "
            "prints shows the same graph in any Mermaid viewer (e.g. https://mermaid.live).")
